// The kernel configuration's derived constants at run time. KernelConfig
// (pa/index/config.hpp) is compile-time; the viewer lets the user pick dtype,
// head size and block size in a panel, so it takes the constants from the one
// run-time dispatch over every supported combination (make_runtime_config,
// pa/core/config_dispatch.hpp). Nothing is recomputed here: the numbers are
// KernelConfig's.
#pragma once
#include <string>

#include "pa/index/dtype.hpp"
#include "pa/index/layout.hpp"

namespace pa::viewer {

struct ConfigInfo {
  DType dtype = DType::f16;
  int elem_bytes = 2;
  int head_size = 128;
  int block_size = 16;
  int num_threads = 128;
  int num_warps = 4;
  int x = 8;
  int thread_group_size = 2;
  int num_thread_groups = 64;
  int thread_groups_per_warp = 16;
  int vec_size = 4;
  int num_vecs_per_thread = 16;
  int v_vec_size = 8;
  int num_v_vecs_per_row = 2;
  int num_rows_per_iter = 16;
  int num_rows_per_thread = 8;

  int thread_group_of_lane(int lane) const { return lane / thread_group_size; }
  // Cache geometry for decoding traced offsets (num_blocks unknown: 0).
  CacheGeometry cache(int num_kv_heads) const {
    return CacheGeometry{0, num_kv_heads, head_size, block_size, x};
  }
};

// Throws std::invalid_argument naming the bad value and the accepted ones.
ConfigInfo config_info(DType dtype, int head_size, int block_size, int num_threads = 128);

}  // namespace pa::viewer
