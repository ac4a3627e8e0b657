// Stage 8 template instances for token-row caches (nhd, hnd) of head size
// 192 (one file per head size so the build compiles them in parallel).
#include "08_optimized.cuh"

namespace pa::opt {
#if defined(PA_QUICK_KERNELS)
PA_OPT_INSTANTIATE_ROWS_HS_QUICK(192)
#else
PA_OPT_INSTANTIATE_ROWS_HS(192)
#endif
}  // namespace pa::opt
