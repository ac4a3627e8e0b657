// The view over a timeline (core/timeline_model.hpp) that the Timeline panel
// draws, as plain functions of the data and the view, with no window: the
// time range and its zoom and pan, which rectangles to draw for a range of
// rows (culled to the visible time with binary searches, spans narrower than
// a pixel merged per pixel column), what the pointer is over, the time axis,
// and which phases a replay step's lesson anchor stands for (the link between
// the replay and the timeline).
//
// Why merge per pixel: a million spans drawn one rectangle each would cost
// millions of vertices per frame, yet a plot a thousand pixels wide can show
// only one colour per pixel column of each lane.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "core/timeline_model.hpp"

namespace pa::viewer {

inline constexpr std::uint32_t kNoSpan = std::numeric_limits<std::uint32_t>::max();
inline constexpr std::uint32_t phase_bit(trace::Phase p) { return 1u << static_cast<unsigned>(p); }

// ---- the time range shown

// In ns from the timeline's time 0.
struct TimeRange {
  double begin = 0, end = 1;
  double width() const { return end - begin; }
};
// The narrowest view: a few steps of %globaltimer (32 ns on recent GPUs).
inline constexpr double kMinViewNs = 10;

// The whole timeline with a margin of 1% each side (a 0 ns one: about 0 .. 1 us).
TimeRange fit_view(std::uint64_t duration_ns);
// factor > 1 zooms in, < 1 out, keeping time `at` where it is on screen;
// never narrower than kMinViewNs nor wider than four times the fitted view.
TimeRange zoom_view(TimeRange v, double at, double factor, std::uint64_t duration_ns);
// Moves by delta_ns, keeping at least a tenth of the view on the timeline.
TimeRange pan_view(TimeRange v, double delta_ns, std::uint64_t duration_ns);
// The time at pixel x of a plot width_px wide, and back.
inline double time_at(TimeRange v, double x, double width_px) { return v.begin + x / width_px * v.width(); }
inline double x_of(TimeRange v, double t, double width_px) { return (t - v.begin) / v.width() * width_px; }

// ---- lanes: how a row's lanes fit its height

// A row of `lanes` lanes draws min(lanes, capacity) of them, capacity being
// how many lanes of the smallest readable height fit the row; when fewer
// are drawn, neighbouring lanes share one (their spans are merged there).
inline int drawn_lanes(int lanes, int capacity) { return std::clamp(capacity, 1, std::max(1, lanes)); }
inline int drawn_lane_of(int lane, int lanes, int drawn) {
  return lanes <= drawn ? lane : static_cast<int>(static_cast<long long>(lane) * drawn / lanes);
}

// ---- rectangles

struct TimelineRect {
  float x0 = 0, x1 = 0;  // pixels from the plot's left edge; x0 < x1, within [0, width]
  int row = 0;           // index into the rows given
  int lane = 0;          // the drawn lane of the row
  trace::Phase phase = trace::Phase::q_to_smem;
  // How busy the lane is over the rectangle, in (0, 1]: 1 for a span drawn
  // as such; a merged column: the warp time in it over the column's time,
  // per warp the drawn lane holds.
  float fill = 1;
  std::uint32_t spans = 1;      // how many spans it shows
  std::uint32_t span = kNoSpan; // the span, when it shows exactly one span drawn as such
};

struct TimelineRectStats {
  std::size_t spans_visited = 0;  // spans looked at between the binary searches' bounds
  std::size_t spans_visible = 0;  // of those, the ones overlapping the view
  std::size_t rects = 0;
};

// Buffers timeline_rects reuses from call to call (the per-column sums of
// merged lanes), so that a frame allocates nothing. No meaning outside it.
struct TimelineScratch {
  std::vector<float> part, full, count;  // [lane][phase][column]
  std::vector<int> col_min, col_max;     // per lane: the columns touched
  std::vector<std::uint32_t> phases;     // per lane: the phases touched
  int width = 0, lanes = 0;
};

// The rectangles of rows [first_row, last_row) over `view` in a plot
// `width_px` wide, appended to `out`. Per row:
// - culling: two binary searches on begin time bound the spans that can
//   overlap the view (the first may begin max_duration_ns before it), so a
//   frame costs the spans in view, not the whole timeline;
// - a span at least one pixel wide, on a lane that holds one warp at a
//   time, is one rectangle;
// - everything else is merged per pixel column and drawn lane: one rectangle
//   per column, in the phase that covers most of the column's warp time,
//   with fill its busy fraction; equal neighbouring columns become one.
// lane_capacity: see drawn_lanes. Spans reading 0 ns long (shorter than the
// timer's step) still count as a twentieth of a pixel, so none vanishes.
void timeline_rects(const std::vector<TimelineRow>& rows, int first_row, int last_row,
                    TimeRange view, int width_px, int lane_capacity, std::vector<TimelineRect>& out,
                    TimelineScratch& scratch, TimelineRectStats* stats = nullptr);

// ---- the pointer

struct TimelineHit {
  std::uint32_t span = kNoSpan;  // the span under the pointer
  int in_pixel = 0;              // spans of the drawn lane within the pointer's pixel (more than 1: merged there)
};
// The span of `row`'s drawn lane at time t: one covering t (the shortest if
// several do: lanes merged), else the nearest within tol_ns (half a pixel),
// else none.
TimelineHit timeline_hit(const TimelineRow& row, int lane_capacity, int drawn_lane, double t,
                         double tol_ns);

// ---- the time axis and numbers

// The tick spacing (1, 2 or 5 times a power of ten, in ns) that puts ticks
// at least min_px apart.
double tick_step_ns(double view_ns, double width_px, double min_px);
// A duration: "850 ns", "12.4 us", "3.25 ms", "1.20 s".
std::string format_ns(double ns);
// A tick's time, in the unit of the view's largest time `magnitude`, with as
// many decimals as the tick step needs: "12.34 us".
std::string format_tick(double t, double step, double magnitude);
// Cycles of clock64 in ns at the SM clock; negative when the clock is unknown (0).
double cycles_to_ns(std::uint64_t cycles, std::uint32_t sm_clock_khz);

// ---- the link to the replay

// The phases (bit p: Phase p) that time the step function a lesson anchor
// marks, e.g. "optimized.qk_mma" -> opt_qk_mma. The one table from the
// lessons' anchors to the timeline's phases; 0 for an anchor no phase times
// on its own (v2_partition.range runs before the first timed step).
std::uint32_t phases_of_anchor(std::string_view anchor);

}  // namespace pa::viewer
