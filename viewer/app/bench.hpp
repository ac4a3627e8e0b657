// The frame benchmark (--bench N): draws N frames with vsync off, one replay
// step further each frame, and prints where the time goes: the load (the host
// model or the file read, the index, the whole job, start to first trace),
// whole frames (median, p90, max, the first) and their CPU part (building the
// panels and ImGui::Render; the rest is GL rasterization, measured by waiting
// for the GPU after each frame). With --bench-while-loading it also times the
// frames drawn while the trace loads, paced as the interactive loop paces
// them, to show the window stays live during a load. With a timeline open
// (--timeline), every frame also shows it at a new zoom, so that the Timeline
// panel computes its rectangles every frame (its worst case: otherwise it
// keeps them while the view stays), and the report adds that work.
#pragma once
#include <chrono>
#include <vector>

#include "app/state.hpp"

namespace pa::viewer {

class FrameBench {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts the clock that "start to first trace" is measured from.
  FrameBench(int frames, bool while_loading);

  void first_trace_arrived();
  // While a load runs (--bench-while-loading): waits until 200 ms after the
  // last frame, the interactive loop's 5 Hz redraw while loading.
  void pace(Clock::time_point last_frame, bool loading) const;
  // One replay step further, wrapping: every frame draws a new step.
  void advance(ReplayState& replay) const;
  // A new timeline view: zoomed in 1x, 2x, ... 512x, around a point that
  // moves through the time the rows shown cover, then again.
  void advance_timeline(TimelineUi& ui, const TimelineModel& m) const;
  // After ImGui::Render: the timeline panel's rectangles of this frame.
  void timeline_drawn(const TimelineUi& ui, bool loading);
  // After ImGui::Render: the frame's CPU time so far and its vertex count
  // (frames drawn after the load only).
  void ui_built(Clock::time_point frame_start, bool loading);
  // After the frame is presented: waits for the GPU and times the whole
  // frame. True once N frames after the load have been timed.
  bool frame_done(Clock::time_point frame_start, bool loading);
  // The timings on stdout.
  void report(const AppState& s) const;

 private:
  int frames_;
  bool while_loading_;
  Clock::time_point start_;
  double first_trace_ms_ = 0;
  std::vector<double> frame_ms_, ui_ms_;
  std::vector<double> loading_frame_ms_;  // frames drawn while a load was under way
  int vtx_max_ = 0;
  std::vector<double> rects_ms_, rects_, visited_;  // the timeline panel, per frame
  int last_recomputed_ = 0;
};

}  // namespace pa::viewer
