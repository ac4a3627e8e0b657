// Stage 8 (opt_decode_kernel) instantiated with its default tracer
// (NullTracer), for trace/tools/tracer_overhead_optimized.sh: compiled from
// the current sources, with -DPA_NO_TRACE_HOOKS, and from the sources before
// the hooks (a git revision); the cubins must have the same registers, spills
// and SASS. opt_launch<Cfg> exists before and after the hooks, so this file
// compiles against both.
#include "08_optimized.cuh"

namespace pa::opt {
template void opt_launch<OptConfig<DType::f16, 128, 16, 1>>(const OptParams&, dim3, cudaStream_t);
template void opt_launch<OptConfig<DType::bf16, 64, 8, 2>>(const OptParams&, dim3, cudaStream_t);
template void opt_launch<OptConfig<DType::f16, 80, 32, 1>>(const OptParams&, dim3, cudaStream_t);
}  // namespace pa::opt
