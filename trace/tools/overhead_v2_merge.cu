// Stage 1 (its read-back hooks moved), stage 6's reduce kernel and stage 7's
// merge kernel with NullTracer, for trace/tools/tracer_overhead_v2.sh: the
// same file compiles against the sources from before their hooks (the
// launchers' tracer argument has a default, so the calls read the same).
#include "07_cascade_merge.cuh"
#include "launch.cuh"

namespace pa::kernels {
void overhead_v2_merge_instances(const V2Args& a, const MergeArgs& m, const StageArgs& s) {
  launch_v2_reduce<__half>(a, nullptr);
  launch_v2_reduce<float>(a, nullptr);
  launch_v2_reduce<__nv_bfloat16>(a, nullptr);
  launch_merge_kernel<__half>(m, nullptr);
  launch_merge_kernel<float>(m, nullptr);
  launch_merge_kernel<__nv_bfloat16>(m, nullptr);
  launch_stage_kernel<trace::Stage::q_to_smem, KernelConfig<DType::f16, 128, 16, 128>>(s, NullTracer{}, nullptr);
  launch_stage_kernel<trace::Stage::q_to_smem, KernelConfig<DType::bf16, 64, 8, 128>>(s, NullTracer{}, nullptr);
  launch_stage_kernel<trace::Stage::q_to_smem, KernelConfig<DType::f32, 256, 32, 128>>(s, NullTracer{}, nullptr);
}
}  // namespace pa::kernels
