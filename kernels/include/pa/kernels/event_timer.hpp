// The one CUDA-event timing loop: warm-up launches, then one event pair around
// each timed launch, every call checked. CUDA builds only (needs the runtime).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "pa/kernels/cuda_check.hpp"

namespace pa::kernels {

// Median of a non-empty sample (the upper median for an even count).
inline float median_of(std::vector<float> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Times `iters` calls of launch() (after `warmup` untimed calls) with events
// recorded on the default stream; returns each launch's milliseconds.
template <class F>
std::vector<float> time_launches_ms(F&& launch, int iters, int warmup) {
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
  for (int i = 0; i < warmup; ++i) launch();
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  Events ev;
  std::vector<float> ms;
  ms.reserve(iters > 0 ? iters : 0);
  for (int i = 0; i < iters; ++i) {
    PA_CUDA_CHECK(cudaEventRecord(ev.start));
    launch();
    PA_CUDA_CHECK(cudaEventRecord(ev.stop));
    PA_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    float t = 0.f;
    PA_CUDA_CHECK(cudaEventElapsedTime(&t, ev.start, ev.stop));
    ms.push_back(t);
  }
  return ms;
}

}  // namespace pa::kernels
