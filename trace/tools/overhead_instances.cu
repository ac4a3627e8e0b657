// Stage kernels 1-5 instantiated with NullTracer, for the tracer-overhead
// comparison (trace/tools/tracer_overhead.sh): compiled once as is and once
// with -DPA_NO_TRACE_HOOKS (PA_TRACE / PA_TRACE_BARRIER expand to nothing),
// the two cubins must have the same registers and the same SASS.
#include "launch.cuh"

namespace pa::kernels {
#define PA_INST(DT, H, B)                                                                                     \
  template __global__ void stage1_q_to_smem_kernel<KernelConfig<DType::DT, H, B, 128>, NullTracer>(StageArgs, \
                                                                                                 NullTracer); \
  template __global__ void stage2_qk_kernel<KernelConfig<DType::DT, H, B, 128>, NullTracer>(StageArgs, NullTracer); \
  template __global__ void stage3_softmax_kernel<KernelConfig<DType::DT, H, B, 128>, NullTracer>(StageArgs,   \
                                                                                               NullTracer);   \
  template __global__ void stage4_lv_kernel<KernelConfig<DType::DT, H, B, 128>, NullTracer>(StageArgs, NullTracer); \
  template __global__ void stage5_v1_kernel<KernelConfig<DType::DT, H, B, 128>, NullTracer>(StageArgs, NullTracer);
PA_INST(f16, 128, 16)
PA_INST(bf16, 64, 8)
PA_INST(f32, 256, 32)
#undef PA_INST
}  // namespace pa::kernels
