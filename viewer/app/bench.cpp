// The frame benchmark (bench.hpp).
#include "app/bench.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>

#include <algorithm>
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
}

}  // namespace pa::viewer
