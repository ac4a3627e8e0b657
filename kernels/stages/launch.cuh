// Launching one stage kernel for one configuration and tracer. The normal
// build instantiates it with NullTracer (generated instance files, one per
// stage x dtype x cache dtype x layout x head size: kernels/CMakeLists.txt);
// the trace module instantiates it with its recording tracer.
// Grid: (num_heads, num_seqs, 1), 128 threads; dynamic shared memory for the
// logits / out scratch (v1_dynamic_smem_bytes, layout.hpp).
#pragma once
#include "05_warp_reduce.cuh"
#include "pa/kernels/cuda_check.hpp"

namespace pa::kernels {

template <trace::Stage S, class Cfg, class Tracer>
constexpr auto stage_kernel() {
  if constexpr (S == trace::Stage::q_to_smem) return &stage1_q_to_smem_kernel<Cfg, Tracer>;
  else if constexpr (S == trace::Stage::qk) return &stage2_qk_kernel<Cfg, Tracer>;
  else if constexpr (S == trace::Stage::softmax) return &stage3_softmax_kernel<Cfg, Tracer>;
  else if constexpr (S == trace::Stage::lv) return &stage4_lv_kernel<Cfg, Tracer>;
  else {
    static_assert(S == trace::Stage::warp_reduce, "stages 1-5 only");
    return &stage5_v1_kernel<Cfg, Tracer>;
  }
}

template <trace::Stage S, class Cfg, class Tracer>
void launch_stage_kernel(const StageArgs& a, Tracer tracer, cudaStream_t stream) {
  const int tokens = S == trace::Stage::q_to_smem ? 0 : a.max_context_len;
  const auto dyn = static_cast<std::size_t>(v1_dynamic_smem_bytes(tokens, Cfg::kHeadSize, Cfg::kNumWarps));
  auto kernel = stage_kernel<S, Cfg, Tracer>();
  if (dyn > 48 * 1024) {  // above the default limit a kernel must opt in
    PA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(dyn)));
  }
  const dim3 grid(a.num_heads, a.num_seqs, 1);
  kernel<<<grid, Cfg::kNumThreads, dyn, stream>>>(a, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pa::kernels
