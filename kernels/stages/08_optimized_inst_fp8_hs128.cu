// Stage 8 template instances with an fp8 KV cache for head size 128 (one
// file per head size so the build compiles them in parallel).
#include "08_optimized.cuh"

namespace pa::opt {
#if defined(PA_QUICK_KERNELS)
PA_OPT_INSTANTIATE_FP8_QUICK(128)
#else
PA_OPT_INSTANTIATE_FP8(128)
#endif
}  // namespace pa::opt
