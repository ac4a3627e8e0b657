// The tracer policy. Every stage kernel takes a Tracer template parameter
// (passed by value, so each thread holds its own copy with its own counters)
// and reports its accesses through PA_TRACE / PA_TRACE_BARRIER.
//
// A tracer provides:
//   static constexpr bool kEnabled;
//   void record(pa::trace::Event e);  // fills e.epoch and e.seq_in_thread itself,
//                                     // drops events of unselected blocks
//   void barrier(...);                // called right after each __syncthreads():
//                                     // records a barrier event, epoch += 1
// The kernel fills every other field of the event.
//
// NullTracer compiles to nothing: with it the argument expressions are never
// evaluated, so the normal build's kernels are unchanged.
#pragma once
#include <type_traits>

namespace pa {

struct NullTracer {
  static constexpr bool kEnabled = false;
};

template <class T>
inline constexpr bool kTracing = std::remove_cvref_t<T>::kEnabled;

}  // namespace pa

// PA_NO_TRACE_HOOKS: the hooks expand to nothing at all. Only for the proof
// that the NullTracer build equals a build without hooks
// (trace/tools/tracer_overhead.sh, trace/NOTES.md); never set in the build.
#if defined(PA_NO_TRACE_HOOKS)
#define PA_TRACE(tracer, ...) \
  do {                        \
  } while (0)
#define PA_TRACE_BARRIER(tracer, ...) \
  do {                                \
  } while (0)
#else
#define PA_TRACE(tracer, ...)                         \
  do {                                                \
    if constexpr (::pa::kTracing<decltype(tracer)>) { \
      (tracer).record(__VA_ARGS__);                   \
    }                                                 \
  } while (0)

#define PA_TRACE_BARRIER(tracer, ...)                 \
  do {                                                \
    if constexpr (::pa::kTracing<decltype(tracer)>) { \
      (tracer).barrier(__VA_ARGS__);                  \
    }                                                 \
  } while (0)
#endif  // PA_NO_TRACE_HOOKS
