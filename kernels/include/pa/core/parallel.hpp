// A minimal parallel loop for the host side (building a problem's inputs, the
// CPU reference). Work items are independent and each writes its own outputs,
// and every item computes in a fixed order, so results are bit-identical for
// any thread count.
// PA_REFERENCE_THREADS=N caps the threads (default: all hardware threads).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace pa::detail {

inline int reference_threads() {
  int n = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("PA_REFERENCE_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) n = v;
  }
  return std::clamp(n, 1, 256);
}

template <class F>
void parallel_for(std::int64_t n, F&& f) {
  const int nt = static_cast<int>(std::min<std::int64_t>(reference_threads(), n));
  if (nt <= 1) {
    for (std::int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<std::int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (std::int64_t i; (i = next.fetch_add(1)) < n;) {
      try {
        f(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);  // stop handing out work
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(nt - 1);
  for (int t = 1; t < nt; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace pa::detail
