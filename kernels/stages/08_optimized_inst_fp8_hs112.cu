// Stage 8 template instances with an fp8 KV cache for head size 112 (one
// file per head size so the build compiles them in parallel).
#include "08_optimized.cuh"

namespace pa::opt {
#if defined(PA_QUICK_KERNELS)
#error "quick builds hold fp8 stage 8 instances for head 128 only (optimized.cmake)"
#else
PA_OPT_INSTANTIATE_FP8(112)
#endif
}  // namespace pa::opt
