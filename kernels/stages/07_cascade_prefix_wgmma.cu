// Stage 7's wgmma prefix kernel instances: fp16 and bf16, head 128 of
// PA_V2_FOR_EACH_HEAD_BLOCK. Compiled for sm_90a only
// (kernels/stages/cascade_merge.cmake); the planner uses it when
// cascade_wgmma_built() says this build has it and the device is compute 9.0.
#include <cuda_runtime.h>

#include "07_cascade_prefix_wgmma.cuh"
#include "pa/kernels/v2_partition_instances.hpp"

namespace pa::kernels::detail {

bool launch_cascade_prefix_wgmma_any(DType dtype, int head_size, int block_size, const PrefixArgs& a,
                                     cudaStream_t s) {
#define PA_X(H, B)                                                                        \
  if constexpr (prefix_wgmma_head_ok(H)) {                                               \
    if (head_size == H && block_size == B) {                                             \
      if (dtype == DType::f16) launch_cascade_prefix_wgmma<KernelConfig<DType::f16, H, B, 128>>(a, s); \
      else launch_cascade_prefix_wgmma<KernelConfig<DType::bf16, H, B, 128>>(a, s);      \
      return true;                                                                       \
    }                                                                                    \
  }
  PA_V2_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return false;
}

bool cascade_wgmma_built(int head_size, int block_size) {
#define PA_X(H, B) \
  if (prefix_wgmma_head_ok(H) && head_size == H && block_size == B) return true;
  PA_V2_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return false;
}

}  // namespace pa::kernels::detail
