// The timeline's view (timeline_view.hpp): zoom and pan, the rectangles of
// the rows in view with their pixel merging, hit testing, the axis, and the
// table from lesson anchors to phases.
#include "core/timeline_view.hpp"

#include <cmath>
#include <cstdio>

namespace pa::viewer {
namespace {

constexpr int kPhases = static_cast<int>(trace::Phase::count_);
// The least a span counts for in a merged column, in pixels: a span that
// reads 0 ns long still ran.
constexpr double kMinCoverPx = 0.05;
// Merged columns whose fill rounds to the same sixteenth join one rectangle.
constexpr float kFillSteps = 16.0f;

// The first span of the row (by begin) with begin >= t; rows are sorted by begin.
std::size_t first_beginning_at(const TimelineRow& row, double t) {
  const auto it = std::partition_point(row.begin.begin(), row.begin.end(),
                                       [&](std::uint64_t b) { return static_cast<double>(b) < t; });
  return static_cast<std::size_t>(it - row.begin.begin());
}

// The per-column sums of one row's drawn lanes (TimelineScratch), cleared
// lazily: only the columns a lane touched are swept and zeroed.
class ColumnSums {
 public:
  ColumnSums(TimelineScratch& s, int lanes, int width) : s_(s), stride_(width + 2) {
    const std::size_t n = static_cast<std::size_t>(lanes) * kPhases * stride_;
    if (s_.width != width || s_.lanes < lanes) {
      s_.part.assign(n, 0.0f);
      s_.full.assign(n, 0.0f);
      s_.count.assign(static_cast<std::size_t>(lanes) * stride_, 0.0f);
      s_.width = width;
      s_.lanes = lanes;
    }
    s_.col_min.assign(static_cast<std::size_t>(lanes), width);
    s_.col_max.assign(static_cast<std::size_t>(lanes), -1);
    s_.phases.assign(static_cast<std::size_t>(lanes), 0u);
  }

  // Adds a span over pixels [x0, x1) of lane `lane` (x within [0, width]).
  void add(int lane, trace::Phase phase, double x0, double x1) {
    const int width = stride_ - 2;
    const int p = static_cast<int>(phase);
    float* part = &s_.part[(static_cast<std::size_t>(lane) * kPhases + p) * stride_];
    float* full = &s_.full[(static_cast<std::size_t>(lane) * kPhases + p) * stride_];
    const int c0 = std::min(static_cast<int>(x0), width - 1);
    const int c1 = static_cast<int>(x1);  // x1's column; x1 == c1 ends exactly at its left edge
    s_.count[static_cast<std::size_t>(lane) * stride_ + c0] += 1.0f;
    if (c1 <= c0 || (c1 == c0 + 1 && x1 == c1)) {
      part[c0] += static_cast<float>(std::max(x1 - x0, kMinCoverPx));
    } else {
      // First column partly, the ones between fully (a difference array:
      // +1 where they start, -1 after), the last partly.
      part[c0] += static_cast<float>(c0 + 1 - x0);
      full[c0 + 1] += 1.0f;
      full[c1] -= 1.0f;
      if (c1 < width && x1 > c1) part[c1] += static_cast<float>(x1 - c1);
    }
    int& lo = s_.col_min[static_cast<std::size_t>(lane)];
    int& hi = s_.col_max[static_cast<std::size_t>(lane)];
    lo = std::min(lo, c0);
    hi = std::max(hi, std::min(c1, width - 1));
    s_.phases[static_cast<std::size_t>(lane)] |= 1u << p;
  }

  // Emits lane `lane`'s columns as rectangles and zeroes what it touched.
  // warps: how many warps share the drawn lane (the fill's denominator).
  void flush(int lane, int row, int warps, std::vector<TimelineRect>& out) {
    const int lo = s_.col_min[static_cast<std::size_t>(lane)];
    const int hi = s_.col_max[static_cast<std::size_t>(lane)];
    const std::uint32_t mask = s_.phases[static_cast<std::size_t>(lane)];
    if (hi < lo) return;
    float run[kPhases] = {};
    float* count = &s_.count[static_cast<std::size_t>(lane) * stride_];
    TimelineRect cur;
    bool open = false;
    float cur_q = -1;
    for (int c = lo; c <= hi; ++c) {
      float best = 0, total = 0;
      int best_p = -1;
      for (std::uint32_t m = mask; m != 0; m &= m - 1) {
        const int p = __builtin_ctz(m);
        const std::size_t at = (static_cast<std::size_t>(lane) * kPhases + p) * stride_ + c;
        run[p] += s_.full[at];
        const float v = s_.part[at] + run[p];
        total += v;
        if (v > best) {
          best = v;
          best_p = p;
        }
      }
      const auto spans = static_cast<std::uint32_t>(count[c]);
      if (best_p < 0 || total <= 1e-4f) {  // an empty column ends a run
        if (open) out.push_back(cur);
        open = false;
        continue;
      }
      const float fill = std::clamp(total / static_cast<float>(warps), 1.0f / kFillSteps, 1.0f);
      const float q = std::round(fill * kFillSteps) / kFillSteps;
      if (open && static_cast<int>(cur.phase) == best_p && q == cur_q && cur.x1 == static_cast<float>(c)) {
        cur.x1 = static_cast<float>(c + 1);
        cur.spans += spans;
        continue;
      }
      if (open) out.push_back(cur);
      cur = TimelineRect{static_cast<float>(c), static_cast<float>(c + 1), row, lane, static_cast<trace::Phase>(best_p),
                         std::max(q, 1.0f / kFillSteps), spans, kNoSpan};
      cur_q = q;
      open = true;
    }
    if (open) out.push_back(cur);
    // Zero what this lane touched (the difference array reaches one column further).
    for (std::uint32_t m = mask; m != 0; m &= m - 1) {
      const int p = __builtin_ctz(m);
      float* part = &s_.part[(static_cast<std::size_t>(lane) * kPhases + p) * stride_];
      float* full = &s_.full[(static_cast<std::size_t>(lane) * kPhases + p) * stride_];
      std::fill(part + lo, part + hi + 2, 0.0f);
      std::fill(full + lo, full + hi + 2, 0.0f);
    }
    std::fill(count + lo, count + hi + 2, 0.0f);
  }

 private:
  TimelineScratch& s_;
  int stride_;
};

}  // namespace

TimeRange fit_view(std::uint64_t duration_ns) {
  const double d = duration_ns > 0 ? static_cast<double>(duration_ns) : 1000.0;
  return {-0.01 * d, 1.01 * d};
}

TimeRange zoom_view(TimeRange v, double at, double factor, std::uint64_t duration_ns) {
  if (!(factor > 0) || !std::isfinite(factor)) return v;
  const double widest = 4 * fit_view(duration_ns).width();
  const double w = std::clamp(v.width() / factor, kMinViewNs, widest);
  // `at` keeps its fraction of the width.
  const double f = v.width() > 0 ? (at - v.begin) / v.width() : 0.5;
  TimeRange out{at - f * w, at - f * w + w};
  return pan_view(out, 0, duration_ns);
}

TimeRange pan_view(TimeRange v, double delta_ns, std::uint64_t duration_ns) {
  const double d = static_cast<double>(duration_ns);
  const double w = v.width();
  double b = v.begin + delta_ns;
  // At least a tenth of the view stays over [0, d].
  b = std::clamp(b, -0.9 * w, std::max(-0.9 * w, d - 0.1 * w));
  return {b, b + w};
}

void timeline_rects(const std::vector<TimelineRow>& rows, int first_row, int last_row,
                    TimeRange view, int width_px, int lane_capacity, std::vector<TimelineRect>& out,
                    TimelineScratch& scratch, TimelineRectStats* stats) {
  if (width_px <= 0 || !(view.width() > 0)) return;
  first_row = std::max(first_row, 0);
  last_row = std::min(last_row, static_cast<int>(rows.size()));
  const double ppn = width_px / view.width();  // pixels per ns
  const double W = width_px;
  const std::size_t out_before = out.size();
  for (int r = first_row; r < last_row; ++r) {
    const TimelineRow& row = rows[static_cast<std::size_t>(r)];
    if (row.spans.empty()) continue;
    const int drawn = drawn_lanes(row.lanes, lane_capacity);
    const bool merged_lanes = drawn < row.lanes;
    const int warps_per_lane = (row.lanes + drawn - 1) / drawn;
    // Spans that can overlap the view: begin in [view.begin - longest, view.end).
    const std::size_t a = first_beginning_at(row, view.begin - static_cast<double>(row.max_duration_ns));
    const std::size_t b = first_beginning_at(row, view.end);
    ColumnSums sums(scratch, drawn, width_px);
    for (std::size_t k = a; k < b; ++k) {
      const double t0 = static_cast<double>(row.begin[k]), t1 = static_cast<double>(row.end[k]);
      if (stats) ++stats->spans_visited;
      // A span ending where the view begins is outside it, unless it is 0 ns long.
      if (t1 < view.begin || (t1 == view.begin && t1 > t0)) continue;
      if (stats) ++stats->spans_visible;
      const double x0 = std::clamp((t0 - view.begin) * ppn, 0.0, W);
      const double x1 = std::clamp((t1 - view.begin) * ppn, 0.0, W);
      const int lane = drawn_lane_of(row.lane[k], row.lanes, drawn);
      const trace::Phase phase = row.phase[k];
      if (!merged_lanes && x1 - x0 >= 1.0) {
        out.push_back({static_cast<float>(x0), static_cast<float>(x1), r, lane, phase, 1.0f, 1, row.spans[k]});
      } else {
        sums.add(lane, phase, x0, std::max(x0, x1));
      }
    }
    for (int lane = 0; lane < drawn; ++lane) sums.flush(lane, r, merged_lanes ? warps_per_lane : 1, out);
  }
  if (stats) stats->rects += out.size() - out_before;
}

TimelineHit timeline_hit(const TimelineRow& row, int lane_capacity, int drawn_lane, double t,
                         double tol_ns) {
  TimelineHit hit;
  const int drawn = drawn_lanes(row.lanes, lane_capacity);
  const std::size_t a = first_beginning_at(row, t - tol_ns - static_cast<double>(row.max_duration_ns));
  const std::size_t b = first_beginning_at(row, std::nextafter(t + tol_ns, INFINITY));
  double best_dist = INFINITY;
  std::uint64_t best_len = 0;
  for (std::size_t k = a; k < b; ++k) {
    if (drawn_lane_of(row.lane[k], row.lanes, drawn) != drawn_lane) continue;
    const double t0 = static_cast<double>(row.begin[k]), t1 = static_cast<double>(row.end[k]);
    const double dist = t < t0 ? t0 - t : t > t1 ? t - t1 : 0.0;
    if (dist > tol_ns) continue;
    ++hit.in_pixel;
    const std::uint64_t len = row.end[k] - row.begin[k];
    if (dist < best_dist || (dist == best_dist && len < best_len)) {
      best_dist = dist;
      best_len = len;
      hit.span = row.spans[k];
    }
  }
  return hit;
}

double tick_step_ns(double view_ns, double width_px, double min_px) {
  if (!(view_ns > 0) || !(width_px > 0)) return 1;
  const double raw = view_ns * std::max(1.0, min_px) / width_px;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double mult : {1.0, 2.0, 5.0})
    if (mult * p >= raw) return mult * p;
  return 10 * p;
}

namespace {

struct Unit {
  double ns;
  const char* name;
};
Unit unit_for(double magnitude) {
  const double a = std::fabs(magnitude);
  if (a < 1e3) return {1, "ns"};
  if (a < 1e6) return {1e3, "us"};
  if (a < 1e9) return {1e6, "ms"};
  return {1e9, "s"};
}

}  // namespace

std::string format_ns(double ns) {
  const Unit u = unit_for(ns);
  const double v = ns / u.ns;
  const double a = std::fabs(v);
  char buf[48];
  // Three significant digits (whole nanoseconds as they are).
  const int decimals = u.ns == 1 ? 0 : a < 10 ? 2 : a < 100 ? 1 : 0;
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, u.name);
  return buf;
}

std::string format_tick(double t, double step, double magnitude) {
  const Unit u = unit_for(std::max(std::fabs(magnitude), step));
  const double s = step / u.ns;
  const int decimals = s >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(s) - 1e-9)));
  const double v = std::fabs(t) < step * 1e-6 ? 0.0 : t / u.ns;  // no "-0"
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, v, u.name);
  return buf;
}

double cycles_to_ns(std::uint64_t cycles, std::uint32_t sm_clock_khz) {
  if (sm_clock_khz == 0) return -1;
  return static_cast<double>(cycles) * 1e6 / sm_clock_khz;
}

std::uint32_t phases_of_anchor(std::string_view anchor) {
  using P = trace::Phase;
  struct Entry {
    std::string_view anchor;  // an anchor, or with a trailing '.' every anchor of that stage
    std::uint32_t phases;
  };
  static constexpr Entry kTable[] = {
      // Stages 1-5 time each stage's step function whole (the v1 kernel's
      // five phases), so every region inside one is that phase.
      {"q_to_smem.", phase_bit(P::q_to_smem)},
      {"qk.", phase_bit(P::qk)},
      {"softmax.", phase_bit(P::softmax)},
      {"lv.", phase_bit(P::lv)},
      {"warp_reduce.", phase_bit(P::warp_reduce)},
      // Stage 6: the partition's store; the reduce kernel's three regions are one step.
      {"v2_partition.partition_store", phase_bit(P::partition_store)},
      {"v2_partition.reduce_max", phase_bit(P::partition_reduce)},
      {"v2_partition.reduce_weights", phase_bit(P::partition_reduce)},
      {"v2_partition.partition_reduce", phase_bit(P::partition_reduce)},
      // Stage 7: the prefix kernel's steps and the merge kernel.
      {"cascade_merge.prefix_load", phase_bit(P::prefix_load)},
      {"cascade_merge.prefix_qk", phase_bit(P::prefix_qk)},
      {"cascade_merge.prefix_softmax", phase_bit(P::prefix_softmax)},
      {"cascade_merge.prefix_pv", phase_bit(P::prefix_pv)},
      {"cascade_merge.prefix_store", phase_bit(P::prefix_store)},
      // The timed (wgmma) kernel loads its rows' slopes after the Q tile, inside tile 0's QK span.
      {"cascade_merge.prefix_alibi", phase_bit(P::prefix_qk)},
      {"cascade_merge.merge", phase_bit(P::merge)},
      // Stage 8: one phase per step function; the split merge is timed in its
      // two steps (files of earlier kernels: its four).
      {"optimized.prologue", phase_bit(P::opt_prologue)},
      {"optimized.q_frag", phase_bit(P::opt_q_frag)},
      {"optimized.alibi", phase_bit(P::opt_q_frag)},  // timed with the Q fragments
      {"optimized.q_to_fp16", phase_bit(P::opt_q_frag)},  // likewise
      {"optimized.pipeline_issue", phase_bit(P::opt_pipeline_issue)},
      {"optimized.qk_mma", phase_bit(P::opt_qk_mma)},
      // With an fp8 cache these run in place of qk_mma / pv_mma and are timed as the same phases.
      {"optimized.qk_mma_fp8", phase_bit(P::opt_qk_mma)},
      {"optimized.online_softmax", phase_bit(P::opt_online_softmax)},
      {"optimized.pv_mma", phase_bit(P::opt_pv_mma)},
      {"optimized.pv_mma_fp8", phase_bit(P::opt_pv_mma)},
      {"optimized.warp_merge", phase_bit(P::opt_warp_merge)},
      // Timed inside the merge that calls it: the warp merge's with one split, the split merge's with several.
      {"optimized.store_item", phase_bit(P::opt_warp_merge) | phase_bit(P::opt_merge_states)},
      {"optimized.split_merge", phase_bit(P::opt_split_arrive) | phase_bit(P::opt_merge_states) |
                                    phase_bit(P::opt_merge_load_stats) | phase_bit(P::opt_merge_weights) |
                                    phase_bit(P::opt_merge_sum_store)},
  };
  for (const Entry& e : kTable) {
    const bool stage_wide = e.anchor.back() == '.';
    if (stage_wide ? anchor.substr(0, e.anchor.size()) == e.anchor : anchor == e.anchor) return e.phases;
  }
  return 0;
}

}  // namespace pa::viewer
