// Stage 8 template instances for head size 128 (one file per head size so the
// build compiles them in parallel).
#include "08_optimized.cuh"

namespace pa::opt {
#if defined(PA_QUICK_KERNELS)
PA_OPT_INSTANTIATE_HS_QUICK(128)
PA_OPT_INSTANTIATE_LEAN(16)
#else
PA_OPT_INSTANTIATE_HS(128)
PA_OPT_INSTANTIATE_LEAN(8) PA_OPT_INSTANTIATE_LEAN(16) PA_OPT_INSTANTIATE_LEAN(32)
#endif
}  // namespace pa::opt
