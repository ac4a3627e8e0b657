// The frame benchmark (bench.hpp).
#include "app/bench.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

namespace pa::viewer {
namespace {

double ms_since(FrameBench::Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(FrameBench::Clock::now() - t).count();
}

// The median, 90th percentile and maximum of some timings (not empty).
struct Spread {
  double median, p90, max;
};
Spread spread_of(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back()};
}

}  // namespace

FrameBench::FrameBench(int frames, bool while_loading)
    : frames_(frames), while_loading_(while_loading), start_(Clock::now()) {}

void FrameBench::first_trace_arrived() { first_trace_ms_ = ms_since(start_); }

void FrameBench::pace(Clock::time_point last_frame, bool loading) const {
  if (!while_loading_ || !loading) return;
  const auto since = Clock::now() - last_frame;
  if (since < std::chrono::milliseconds(200)) std::this_thread::sleep_for(std::chrono::milliseconds(200) - since);
}

void FrameBench::advance(ReplayState& replay) const {
  replay.jump((replay.current() + 1) % std::max(1, replay.count()));
}

void FrameBench::advance_timeline(TimelineUi& ui, const TimelineModel& m) const {
  const int k = static_cast<int>(frame_ms_.size());
  // Around the rows shown (a block's warps span a small part of the launch).
  std::uint64_t lo = m.duration_ns(), hi = 0;
  if (ui.rows)
    for (const TimelineRow& r : *ui.rows)
      if (!r.begin.empty()) {
        lo = std::min(lo, r.begin.front());
        hi = std::max(hi, r.begin.back() + r.max_duration_ns);
      }
  if (hi <= lo) {
    lo = 0;
    hi = m.duration_ns();
  }
  TimeRange fit = fit_view(hi - lo);
  fit = {fit.begin + static_cast<double>(lo), fit.end + static_cast<double>(lo)};
  const double width = fit.width() / static_cast<double>(1 << (k % 10));
  const double centre = fit.begin + fit.width() * (0.5 + 0.45 * std::sin(k * 0.37));
  ui.view = {centre - width / 2, centre + width / 2};
  ui.view_set = true;
}

void FrameBench::timeline_drawn(const TimelineUi& ui, bool loading) {
  if (loading || ui.recomputed == last_recomputed_) return;
  last_recomputed_ = ui.recomputed;
  rects_ms_.push_back(ui.rects_ms);
  rects_.push_back(static_cast<double>(ui.rects.size()));
  visited_.push_back(static_cast<double>(ui.stats.spans_visited));
}

void FrameBench::ui_built(Clock::time_point frame_start, bool loading) {
  if (loading) return;
  ui_ms_.push_back(ms_since(frame_start));
  vtx_max_ = std::max(vtx_max_, ImGui::GetDrawData()->TotalVtxCount);
}

bool FrameBench::frame_done(Clock::time_point frame_start, bool loading) {
  glFinish();
  const double ms = ms_since(frame_start);
  if (loading) loading_frame_ms_.push_back(ms);
  else frame_ms_.push_back(ms);
  return static_cast<int>(frame_ms_.size()) >= frames_;
}

void FrameBench::report(const AppState& s) const {
  if (!loading_frame_ms_.empty()) {
    const Spread loading = spread_of(loading_frame_ms_);
    std::printf("while loading: %zu frames drawn, median %.2f ms, p90 %.2f ms, max %.2f ms (the window stays live)\n",
                loading_frame_ms_.size(), loading.median, loading.p90, loading.max);
  }
  if (frame_ms_.empty()) return;
  std::printf("events %zu  replay steps %d  model/read %.1f ms  index %.1f ms  load job %.1f ms  "
              "start to first trace %.1f ms\n",
              s.events.size(), s.index.num_steps(s.block), s.load_ms, s.index_ms, s.last_total_load_ms, first_trace_ms_);
  const Spread frames = spread_of(frame_ms_);
  std::printf("frames %zu  median %.2f ms  p90 %.2f ms  max %.2f ms (first frame %.2f ms)\n", frame_ms_.size(),
              frames.median, frames.p90, frames.max, frame_ms_.front());
  const Spread ui = spread_of(ui_ms_);
  std::printf("UI build (panels + ImGui::Render, CPU) median %.2f ms  p90 %.2f ms; the rest is GL rasterization; max %d vertices\n",
              ui.median, ui.p90, vtx_max_);
  if (s.timeline) std::printf("timeline load: read %.1f ms  index %.1f ms\n", s.timeline_read_ms, s.timeline_index_ms);
  if (s.timeline && !rects_ms_.empty()) {
    const Spread ms = spread_of(rects_ms_), rects = spread_of(rects_), visited = spread_of(visited_);
    std::printf("timeline: %zu spans, level %s, %zu rows; rectangles computed in %zu frames: median %.2f ms  p90 %.2f ms  "
                "max %.2f ms; rectangles median %.0f max %.0f; spans visited median %.0f max %.0f\n",
                s.timeline->spans().size(), to_string(s.timeline_ui.level),
                s.timeline_ui.rows ? s.timeline_ui.rows->size() : 0, rects_ms_.size(), ms.median, ms.p90, ms.max,
                rects.median, rects.max, visited.median, visited.max);
  }
}

}  // namespace pa::viewer
