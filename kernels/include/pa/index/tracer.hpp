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
// A tracer may instead time the kernel's step functions (the timing tracer,
// pa/kernels/timing_tracer.cuh), through PA_TIME_START / PA_TIME_PHASE:
//   static constexpr bool kTiming = true;
//   void start();                          // at kernel entry: the first span begins
//   void phase(trace::Phase, int iter);    // the warp has just finished this step
//                                          // function: its span ends, the next begins
// Every thread of a warp passes each hook together (they sit between step
// functions, where the warp is converged). A tracer without kTiming (NullTracer,
// the recording tracer) compiles the timing hooks to nothing, and a timing
// tracer (kEnabled false) the access hooks.
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

template <class T>
inline constexpr bool kTimingEnabled = requires { requires std::remove_cvref_t<T>::kTiming; };

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
#define PA_TIME_START(tracer) \
  do {                        \
  } while (0)
#define PA_TIME_PHASE(tracer, which, iter) \
  do {                                     \
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

#define PA_TIME_START(tracer)                               \
  do {                                                      \
    if constexpr (::pa::kTimingEnabled<decltype(tracer)>) { \
      (tracer).start();                                     \
    }                                                       \
  } while (0)

#define PA_TIME_PHASE(tracer, which, iter)                  \
  do {                                                      \
    if constexpr (::pa::kTimingEnabled<decltype(tracer)>) { \
      (tracer).phase((which), (iter));                      \
    }                                                       \
  } while (0)
#endif  // PA_NO_TRACE_HOOKS
