// The kernel configuration's derived constants at run time. KernelConfig
// (pa/index/config.hpp) is compile-time; the viewer lets the user pick dtype,
// KV cache dtype, head size and block size in a panel, so it takes the
// constants from the one run-time dispatch over every supported combination
// (make_runtime_config, pa/core/config_dispatch.hpp). Nothing is recomputed
// here: the numbers are KernelConfig's.
#pragma once
#include <string>

#include "pa/core/problem.hpp"
#include "pa/index/dtype.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"

namespace pa::viewer {

struct ConfigInfo {
  DType dtype = DType::f16;          // Q and the output
  KvDType kv_dtype = KvDType::same;  // the K/V cache: dtype's own, or fp8
  pa::KvLayout kv_layout = pa::KvLayout::vllm;  // how the device holds it (vllm, nhd, hnd)
  int elem_bytes = 2;                // one Q / output element
  // One K / V cache element: the bytes to decode k_cache / v_cache offsets
  // with (1 for an fp8 cache, whatever the query dtype).
  int kv_elem_bytes = 2;
  int head_size = 128;
  int block_size = 16;
  int num_threads = 128;
  int num_warps = 4;
  int x = 8;                         // cache elements per 16 bytes (K layout's innermost dimension)
  int thread_group_size = 2;
  int num_thread_groups = 64;
  int thread_groups_per_warp = 16;
  int vec_size = 4;
  int vec_bytes = 8;    // one K vec in the cache
  int q_vec_bytes = 8;  // the Q vec it meets in shared memory (differs from vec_bytes with an fp8 cache)
  int num_vecs_per_thread = 16;
  int v_vec_size = 8;
  int v_vec_bytes = 16;
  int num_v_vecs_per_row = 2;
  int num_rows_per_iter = 16;  // vLLM's layout (0 for token rows)
  int num_rows_per_thread = 8;
  // Token rows (nhd, hnd): stage 5's own mapping (config.hpp); the lv_
  // counts are 0 for vLLM's layout.
  bool token_rows = false;
  int lv_lanes_per_token = 0, lv_tokens_per_iter = 0, lv_token_steps = 0;

  int thread_group_of_lane(int lane) const { return lane / thread_group_size; }
  // Cache geometry for decoding traced offsets in the cache's layout
  // (num_blocks unknown: 0; no offset formula needs it); its offsets count
  // cache elements of kv_elem_bytes each.
  KvLayoutGeometry cache(int num_kv_heads) const {
    return KvLayoutGeometry{kv_layout, CacheGeometry{0, num_kv_heads, head_size, block_size, x}};
  }
};

// Throws std::invalid_argument naming the bad value and the accepted ones.
ConfigInfo config_info(DType dtype, int head_size, int block_size, int num_threads = 128,
                       KvDType kv_dtype = KvDType::same, bool token_rows = false);
// The problem's configuration (its dtype, KV cache dtype, head and block size,
// threads), in its layout: the token-row mapping for nhd and hnd.
ConfigInfo config_info(const ProblemSpec& spec);

}  // namespace pa::viewer
