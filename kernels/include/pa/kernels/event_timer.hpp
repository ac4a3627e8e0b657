// The one CUDA-event timing loop: warm-up launches, then one event pair around
// each timed launch, every call checked. CUDA builds only (needs the runtime).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "pa/kernels/cuda_check.hpp"

namespace pa::kernels {

// Median of a sample (the mean of the two middle values for an even count; 0 if empty).
inline float median_of(std::vector<float> v) {
  if (v.empty()) return 0.f;
  const std::size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  const float upper = v[h];
  return 0.5f * (*std::max_element(v.begin(), v.begin() + h) + upper);
}

// Times `iters` calls of launch(i) (after `warmup` untimed calls launch(0..warmup-1))
// with one event pair on the default stream around each timed call; returns
// each call's milliseconds. before(i) runs before the start event of timed
// call i, untimed: pa-bench enqueues a GPU busy-wait there, so the host's
// launch path overlaps it instead of landing inside the measurement.
template <class F, class G>
std::vector<float> time_indexed_launches_ms(F&& launch, int iters, int warmup, G&& before) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    Events() {
      PA_CUDA_CHECK(cudaEventCreate(&start));
      const cudaError_t e = cudaEventCreate(&stop);
      if (e != cudaSuccess) {
        cudaEventDestroy(start);
        detail::cuda_fail(e, "cudaEventCreate(&stop)", __FILE__, __LINE__);
      }
    }
    ~Events() {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
  };
  for (int i = 0; i < warmup; ++i) launch(i);
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  Events ev;
  std::vector<float> ms;
  ms.reserve(iters > 0 ? iters : 0);
  for (int i = 0; i < iters; ++i) {
    before(warmup + i);
    PA_CUDA_CHECK(cudaEventRecord(ev.start));
    launch(warmup + i);
    PA_CUDA_CHECK(cudaEventRecord(ev.stop));
    PA_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float t = 0.f;
    PA_CUDA_CHECK(cudaEventElapsedTime(&t, ev.start, ev.stop));
    ms.push_back(t);
  }
  PA_CUDA_CHECK(cudaGetLastError());
  return ms;
}

// The same for a launch that needs no index and nothing before it.
template <class F>
std::vector<float> time_launches_ms(F&& launch, int iters, int warmup) {
  return time_indexed_launches_ms([&](int) { launch(); }, iters, warmup, [](int) {});
}

}  // namespace pa::kernels
