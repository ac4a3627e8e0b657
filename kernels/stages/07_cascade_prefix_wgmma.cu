// Stage 7 prefix kernel variant 4 (wgmma) instances: fp16 and bf16, heads 64
// and 128 of PA_V2C_FOR_EACH_HEAD_BLOCK. Compiled for sm_90a only
// (kernels/stages/v2cascade.cmake); the planner uses it when
// cascade_wgmma_available() says this build and the device have it.
#include <cuda_runtime.h>

#include "07_cascade_prefix_wgmma.cuh"
#include "pa/kernels/v2_cascade_instances.hpp"

namespace pa::kernels::detail {

// variant 4: two warpgroups per block; 5: one; 6: S of the next tile during the
// softmax; 7: PV of the previous tile during the softmax; 8: 7 with a producer warp;
// 9: 8 with 128-token tiles.
bool launch_cascade_prefix_wgmma_any(DType dtype, int head_size, int block_size, int variant, const PrefixArgs& a,
                                     cudaStream_t s) {
#define PA_X(H, B)                                                                                         \
  if constexpr (prefix_wgmma_head_ok(H)) {                                                                \
    if (head_size == H && block_size == B) {                                                              \
      const bool f16 = dtype == DType::f16;                                                               \
      if (variant == 9) {                                                                                 \
        if (f16) launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::f16, H, B, 128>, true, 128>(a, s);  \
        else launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::bf16, H, B, 128>, true, 128>(a, s);     \
      } else if (variant == 7 || variant == 8) {                                                          \
        if (f16 && variant == 8) launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::f16, H, B, 128>, true>(a, s);    \
        else if (variant == 8) launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::bf16, H, B, 128>, true>(a, s);     \
        else if (f16) launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::f16, H, B, 128>, false>(a, s);              \
        else launch_cascade_prefix_wgmma_overlap<KernelConfig<DType::bf16, H, B, 128>, false>(a, s);                      \
      } else if (variant == 6) {                                                                          \
        if (f16) launch_cascade_prefix_wgmma_pipe<KernelConfig<DType::f16, H, B, 128>>(a, s);             \
        else launch_cascade_prefix_wgmma_pipe<KernelConfig<DType::bf16, H, B, 128>>(a, s);                \
      } else if (variant == 5) {                                                                          \
        if (f16) launch_cascade_prefix_wgmma<KernelConfig<DType::f16, H, B, 128>, 1>(a, s);               \
        else launch_cascade_prefix_wgmma<KernelConfig<DType::bf16, H, B, 128>, 1>(a, s);                  \
      } else {                                                                                            \
        if (f16) launch_cascade_prefix_wgmma<KernelConfig<DType::f16, H, B, 128>, 2>(a, s);               \
        else launch_cascade_prefix_wgmma<KernelConfig<DType::bf16, H, B, 128>, 2>(a, s);                  \
      }                                                                                                   \
      return true;                                                                                        \
    }                                                                                                     \
  }
  PA_V2C_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return false;
}

bool cascade_wgmma_built(int head_size, int block_size) {
#define PA_X(H, B) \
  if (prefix_wgmma_head_ok(H) && head_size == H && block_size == B) return true;
  PA_V2C_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return false;
}

}  // namespace pa::kernels::detail
