// A minimal tracer for the hook test: counts events per (step, op, tensor)
// with atomics. It checks that every hook compiles with a real tracer and
// that the kernels emit what kernels/stages/EVENTS.md says (the trace
// module's recording tracer and host model are the full check).
#include "counting_tracer.hpp"
#include "launch.cuh"
#include "pa/kernels/cuda_check.hpp"

namespace pa::test {

struct CountingTracer {
  static constexpr bool kEnabled = true;
  unsigned long long* counts;
  __device__ void record(const trace::Event& e) const {
    atomicAdd(&counts[event_slot(static_cast<int>(e.step), static_cast<int>(e.op), static_cast<int>(e.tensor))], 1ull);
  }
  __device__ void barrier(const trace::Event& e) const { record(e); }
};

std::vector<unsigned long long> count_events_f16_128_16(trace::Stage stage, const kernels::StageArgs& a) {
  using Cfg = KernelConfig<DType::f16, 128, 16, 128>;
  unsigned long long* d = nullptr;
  PA_CUDA_CHECK(cudaMalloc(&d, kEventSlots * sizeof(unsigned long long)));
  PA_CUDA_CHECK(cudaMemset(d, 0, kEventSlots * sizeof(unsigned long long)));
  CountingTracer t{d};
  switch (stage) {
    case trace::Stage::q_to_smem: kernels::launch_stage_kernel<trace::Stage::q_to_smem, Cfg>(a, t, nullptr); break;
    case trace::Stage::qk: kernels::launch_stage_kernel<trace::Stage::qk, Cfg>(a, t, nullptr); break;
    case trace::Stage::softmax: kernels::launch_stage_kernel<trace::Stage::softmax, Cfg>(a, t, nullptr); break;
    case trace::Stage::lv: kernels::launch_stage_kernel<trace::Stage::lv, Cfg>(a, t, nullptr); break;
    default: kernels::launch_stage_kernel<trace::Stage::warp_reduce, Cfg>(a, t, nullptr); break;
  }
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<unsigned long long> h(kEventSlots);
  PA_CUDA_CHECK(cudaMemcpy(h.data(), d, h.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  PA_CUDA_CHECK(cudaFree(d));
  return h;
}

}  // namespace pa::test
