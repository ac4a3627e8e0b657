#include "core/config_info.hpp"

#include <cmath>
#include <stdexcept>
#include <utility>

#include "pa/index/config.hpp"

namespace pa::viewer {
namespace {

template <class Cfg>
ConfigInfo from_cfg(DType dt) {
  ConfigInfo c;
  c.dtype = dt;
  c.elem_bytes = Cfg::kElemBytes;
  c.head_size = Cfg::kHeadSize;
  c.block_size = Cfg::kBlockSize;
  c.num_threads = Cfg::kNumThreads;
  c.num_warps = Cfg::kNumWarps;
  c.x = Cfg::kX;
  c.thread_group_size = Cfg::kThreadGroupSize;
  c.num_thread_groups = Cfg::kNumThreadGroups;
  c.thread_groups_per_warp = Cfg::kThreadGroupsPerWarp;
  c.vec_size = Cfg::kVecSize;
  c.num_vecs_per_thread = Cfg::kNumVecsPerThread;
  c.v_vec_size = Cfg::kVVecSize;
  c.num_v_vecs_per_row = Cfg::kNumVVecsPerRow;
  c.num_rows_per_iter = Cfg::kNumRowsPerIter;
  c.num_rows_per_thread = Cfg::kNumRowsPerThread;
  return c;
}

template <DType DT, int H, int... Bs>
bool pick_block(DType dt, int block, ConfigInfo& out) {
  return ((block == Bs ? (out = from_cfg<KernelConfig<DT, H, Bs, 128>>(dt), true) : false) || ...);
}

template <DType DT, int... Hs>
bool pick_head(DType dt, int head, int block, ConfigInfo& out) {
  return ((head == Hs ? pick_block<DT, Hs, 8, 16, 32>(dt, block, out) : false) || ...);
}

}  // namespace

ConfigInfo config_info(DType dtype, int head_size, int block_size, int num_threads) {
  if (num_threads != 128)
    throw std::invalid_argument("num_threads " + std::to_string(num_threads) + " unsupported (accepted: 128)");
  ConfigInfo out;
  bool ok = false;
  // f16 and bf16 share every constant (both 2 bytes).
  if (dtype == DType::f32)
    ok = pick_head<DType::f32, 64, 80, 96, 112, 128, 192, 256>(dtype, head_size, block_size, out);
  else if (dtype == DType::f16 || dtype == DType::bf16)
    ok = pick_head<DType::f16, 64, 80, 96, 112, 128, 192, 256>(dtype, head_size, block_size, out);
  else
    throw std::invalid_argument("dtype unsupported (accepted: fp32, fp16, bf16)");
  if (!ok)
    throw std::invalid_argument("head size " + std::to_string(head_size) + " / block size " +
                                std::to_string(block_size) +
                                " unsupported (accepted head sizes 64 80 96 112 128 192 256, block sizes 8 16 32)");
  out.dtype = dtype;
  return out;
}

}  // namespace pa::viewer
