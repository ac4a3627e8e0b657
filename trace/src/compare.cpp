// compare_events: recorded events against the model's (pa/trace/compare.hpp).
#include "pa/trace/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

namespace pa::trace {

bool value_is_lse(const Event& e) {
  if (e.tensor == Tensor::state_lse || e.tensor == Tensor::prefix_lse || e.tensor == Tensor::suffix_lse) return true;
  // The merge's compute event reports the merged lse (kernels/stages/EVENTS.md).
  return e.step == Step::merge && e.op == Op::compute;
}

Tolerance event_value_tolerance(const Event& e, DType dtype) {
  return value_is_lse(e) ? lse_tolerance(dtype) : tolerance_for(dtype);
}

namespace {

// One thread of a trace: its thread block's label and its warp and lane.
using ThreadKey = std::tuple<int, int, int, int, int>;  // seq, head, partition, warp, lane

ThreadKey thread_of(const Event& e) { return {e.seq, e.head, e.partition, e.warp, e.lane}; }

std::string thread_name(const ThreadKey& k) {
  std::ostringstream s;
  s << "thread (seq " << std::get<0>(k) << ", head " << std::get<1>(k) << ", partition " << std::get<2>(k)
    << ", warp " << std::get<3>(k) << ", lane " << std::get<4>(k) << ")";
  return s.str();
}

// Every field but the value, byte for byte (Event has no padding: event.hpp).
bool same_fields(Event a, Event b) {
  a.value = b.value = 0.f;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// The names of the fields (other than value) in which a and b differ.
std::string differing_fields(const Event& a, const Event& b) {
  std::string s;
  auto field = [&](const char* name, bool differs) {
    if (!differs) return;
    if (!s.empty()) s += ", ";
    s += name;
  };
  field("stage", a.stage != b.stage);
  field("step", a.step != b.step);
  field("op", a.op != b.op);
  field("tensor", a.tensor != b.tensor);
  field("kv_head", a.kv_head != b.kv_head);
  field("iter", a.iter != b.iter);
  field("epoch", a.epoch != b.epoch);
  field("seq_in_thread", a.seq_in_thread != b.seq_in_thread);
  field("token", a.token != b.token);
  field("logical_block", a.logical_block != b.logical_block);
  field("physical_block", a.physical_block != b.physical_block);
  field("dim_begin", a.dim_begin != b.dim_begin);
  field("dim_count", a.dim_count != b.dim_count);
  field("src_lane", a.src_lane != b.src_lane);
  field("lane_iter", a.lane_iter != b.lane_iter);
  field("byte_offset", a.byte_offset != b.byte_offset);
  field("bytes", a.bytes != b.bytes);
  return s.empty() ? std::string("their bytes") : s;
}

bool same_value(float got, float want, Tolerance tol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return within(want, got, tol);
}


// Program order within a thread.
void sort_program_order(std::vector<Event>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Event& a, const Event& b) {
    return std::tie(a.epoch, a.seq_in_thread) < std::tie(b.epoch, b.seq_in_thread);
  });
}

}  // namespace

EventComparison compare_events(const std::vector<Event>& recorded, const std::vector<Event>& model, DType dtype,
                               int max_reported) {
  EventComparison c;
  c.recorded_events = recorded.size();
  c.model_events = model.size();
  std::map<ThreadKey, std::pair<std::vector<Event>, std::vector<Event>>> threads;
  for (const Event& e : recorded) threads[thread_of(e)].first.push_back(e);
  for (const Event& e : model) threads[thread_of(e)].second.push_back(e);
  c.threads = threads.size();

  std::ostringstream lines;
  lines.precision(9);
  int shown = 0;
  // Whether the next difference is one of the first max_reported (then the
  // caller writes its line to `lines`).
  auto show = [&] { return shown++ < max_reported; };
  for (auto& [key, rm] : threads) {
    auto& [rec, mod] = rm;
    sort_program_order(rec);
    sort_program_order(mod);
    if (rec.size() != mod.size()) {
      ++c.threads_count_differ;
      if (show()) lines << thread_name(key) << ": " << rec.size() << " recorded events, model " << mod.size() << "\n";
    }
    const std::size_t n = std::min(rec.size(), mod.size());
    for (std::size_t i = 0; i < n; ++i) {
      const Event& g = rec[i];
      const Event& w = mod[i];
      ++c.pairs_compared;
      if (!same_fields(g, w)) {
        ++c.field_differences;
        if (show())
          lines << thread_name(key) << " event " << i << " differs in " << differing_fields(g, w)
                << "\n    recorded: " << describe(g) << "\n    model:    " << describe(w) << "\n";
        continue;
      }
      if (!std::isnan(w.value)) ++c.values_compared;
      const Tolerance tol = event_value_tolerance(w, dtype);
      if (!same_value(g.value, w.value, tol)) {
        ++c.value_differences;
        if (show())
          lines << thread_name(key) << " event " << i << " (" << describe(w) << "): value " << g.value
                << " recorded, " << w.value << " model; accepted: |difference| <= " << tol.abs << " + " << tol.rel
                << " x |model|" << (value_is_lse(w) ? " (an lse: absolute)" : "") << "\n";
      }
    }
  }
  if (c.equal()) return c;
  std::ostringstream r;
  r << "recorded " << c.recorded_events << " events, model " << c.model_events << "; " << c.threads << " threads, "
    << c.threads_count_differ << " with different event counts; " << c.field_differences << " of "
    << c.pairs_compared << " event pairs differ in a field; " << c.value_differences << " of " << c.values_compared
    << " values outside the " << dtype_name(dtype) << " tolerance\n"
    << lines.str();
  if (shown > max_reported) r << "(" << shown - max_reported << " more not shown)\n";
  c.report = r.str();
  return c;
}

}  // namespace pa::trace
