// Recorded events against the host model's: the one comparison that the GPU
// tests and `pa-lab trace --check` share.
//
// Equal means: the same threads (seq, head, partition label, warp, lane); per
// thread the same number of events, which, taken in program order (epoch,
// seq_in_thread), agree in every field but `value` EXACTLY (they are index
// math and the model runs the kernels' own index headers); and agree in
// `value` within the problem dtype's tolerance from pa/core/tolerance.hpp.
// The GPU computes a value in float and the model takes it from the float64
// reference, so values cannot be exact:
//   - a log-sum-exp (an attention state's lse, the merge's merged lse) within
//     lse_tolerance(dtype), an absolute bound;
//   - every other value within tolerance_for(dtype).
// NaN ("no value reported") equals only NaN; an infinity equals only the same
// infinity (the lse of an empty state is -inf).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "pa/index/dtype.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/core/event.hpp"

namespace pa::trace {

struct EventComparison {
  std::size_t recorded_events = 0, model_events = 0;
  std::size_t threads = 0;             // threads with an event in either list
  std::size_t threads_count_differ = 0;  // threads whose event counts differ
  std::size_t pairs_compared = 0;      // (recorded, model) pairs at the same place in one thread
  std::size_t field_differences = 0;   // pairs with a field other than value different
  std::size_t values_compared = 0;     // pairs with equal fields where the model reports a value
  std::size_t value_differences = 0;   // of those, values outside the tolerance
  // Empty when equal; otherwise the counts above and the first differences,
  // one thread or event pair per line (the differing fields named).
  std::string report;

  bool equal() const {
    return recorded_events == model_events && threads_count_differ == 0 && field_differences == 0 &&
           value_differences == 0;
  }
};

// The tolerance a value of this (model) event is compared with (see above).
Tolerance event_value_tolerance(const Event& e, DType dtype);

// Whether the event's value is a log-sum-exp (compared absolutely).
bool value_is_lse(const Event& e);

// Compares `recorded` with `model` (any order; each thread's events are put in
// program order). max_reported bounds the lines of differences in the report.
EventComparison compare_events(const std::vector<Event>& recorded, const std::vector<Event>& model, DType dtype,
                               int max_reported = 8);

}  // namespace pa::trace
