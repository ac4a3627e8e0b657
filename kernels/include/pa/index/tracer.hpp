// The tracer policy. Every stage kernel takes a Tracer template parameter and
// reports its accesses through PA_TRACE. NullTracer compiles to nothing, so
// the normal build's kernels are unchanged; the recording tracer (kernels/,
// CUDA) writes pa::trace::Event records to device memory.
#pragma once
#include <type_traits>

namespace pa {

struct NullTracer {
  static constexpr bool kEnabled = false;
};

template <class T>
inline constexpr bool kTracing = std::remove_cvref_t<T>::kEnabled;

}  // namespace pa

// The argument expressions are not evaluated unless the tracer records.
#define PA_TRACE(tracer, ...)                       \
  do {                                              \
    if constexpr (::pa::kTracing<decltype(tracer)>) { \
      (tracer).record(__VA_ARGS__);                 \
    }                                               \
  } while (0)
