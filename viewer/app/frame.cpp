// The frame's layout and keys (frame.hpp). Which tab a column shows follows a
// request (--tab, a lesson's natural tab: tab_request) for two frames, and the
// memory column follows the step: the KV cache for the steps that read K, V
// or the block table, Q and shared memory for the other memory steps. A
// timeline, when one is open, runs below the three columns across the whole
// width (time wants width), behind a splitter that sets its height.
#include "app/frame.hpp"

#include <algorithm>
#include <cmath>

namespace pa::viewer {

void handle_keys(AppState& s) {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space))) s.replay.toggle_play();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.step_by(+1);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.step_by(-1);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) s.replay.home();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End))) s.replay.end();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
    if (s.show_help) s.show_help = false;
    else s.set_focus(Focus{});
  }
  for (unsigned c : io.InputQueueCharacters) {
    if (c == '?') s.show_help = !s.show_help;
    if (c >= '0' && c <= '9') {
      s.replay.jump(0);
      load_lesson(s, static_cast<int>(c - '0'));
    }
  }
}

namespace {

// Selects the tab named by a pending tab request.
ImGuiTabItemFlags tab_flag(const AppState& s, const char* name) {
  return s.tab_request == name ? ImGuiTabItemFlags_SetSelected : 0;
}

}  // namespace

// Three columns: lesson/problem | thread block + memory | source + analyses.
void draw_frame(AppState& s) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6 * s.fonts.scale, 6 * s.fonts.scale));
  ImGui::Begin("##main", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::PopStyleVar();

  // A new step, or a resize (which moves everything), re-scrolls the lesson
  // and the source to the current step.
  static ImVec2 last_size;
  const bool resized = vp->WorkSize.x != last_size.x || vp->WorkSize.y != last_size.y;
  last_size = vp->WorkSize;
  s.step_changed = s.replay.current() != s.last_step_seen || resized;
  draw_toolbar(s);

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const float left_w = std::max(10.0f, std::floor(avail.x * 0.27f));
  const float right_w = std::max(10.0f, std::floor(avail.x * 0.29f));
  const float mid_w = std::max(10.0f, avail.x - left_w - right_w - 2 * gap);
  // The timeline's share of the height (at least a few lines each way).
  const bool timeline = timeline_panel_shown(s);
  const float splitter_h = std::floor(6 * s.fonts.scale);
  float timeline_h = 0;
  if (timeline) {
    const float fs = ImGui::GetFontSize();
    timeline_h = std::floor(avail.y * s.timeline_ui.pane_fraction);
    timeline_h = std::max(std::min(timeline_h, avail.y - fs * 8), std::min(fs * 10, avail.y * 0.5f));
    // Only a message (loading, or why a file did not open): a few lines.
    if (!s.timeline) timeline_h = std::min(timeline_h, std::floor(fs * 7));
  }
  const float h = std::max(10.0f, avail.y - (timeline ? timeline_h + splitter_h + ImGui::GetStyle().ItemSpacing.y : 0));
  s.drawn.timeline_valid = false;
  s.drawn.left_w = left_w;
  s.drawn.mid_w = mid_w;
  s.drawn.right_w = right_w;
  s.drawn.col_h = h;

  ImGui::BeginChild("##left", ImVec2(left_w, h), true);
  if (ImGui::BeginTabBar("##lefttabs")) {
    if (ImGui::BeginTabItem("Lesson", nullptr, tab_flag(s, "lesson"))) { draw_lesson_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Problem", nullptr, tab_flag(s, "problem"))) { draw_config_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Trace", nullptr, tab_flag(s, "trace"))) { draw_trace_panel(s); ImGui::EndTabItem(); }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("##mid", ImVec2(mid_w, h), true);
  draw_thread_panel(s);
  // The memory view follows the step: KV cache for K/V/block-table steps,
  // Q and shared memory otherwise.
  if (s.step_changed) {
    if (const ReplayStep* st = s.current_step()) {
      const bool kv = st->tensor == pa::trace::Tensor::k_cache || st->tensor == pa::trace::Tensor::v_cache ||
                      st->tensor == pa::trace::Tensor::block_table;
      const bool mem = st->op != pa::trace::Op::compute && st->op != pa::trace::Op::barrier &&
                       st->op != pa::trace::Op::shuffle;
      const int want = kv ? 0 : 1;
      if (mem && want != s.memory_tab) { s.memory_tab = want; s.memory_tab_request = true; }
    }
  }
  if (s.tab_request == "kv" || s.tab_request == "shared") {
    s.memory_tab = s.tab_request == "kv" ? 0 : 1;
    s.memory_tab_request = true;
  }
  if (ImGui::BeginTabBar("##memtabs")) {
    const bool req = s.memory_tab_request;
    if (ImGui::BeginTabItem("Paged KV cache", nullptr, req && s.memory_tab == 0 ? ImGuiTabItemFlags_SetSelected : 0)) {
      if (!req) s.memory_tab = 0;
      draw_kv_panel(s);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Q & shared memory", nullptr, req && s.memory_tab == 1 ? ImGuiTabItemFlags_SetSelected : 0)) {
      if (!req) s.memory_tab = 1;
      draw_smem_panel(s);
      ImGui::EndTabItem();
    }
    s.memory_tab_request = false;
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("##right", ImVec2(right_w, h), false);
  const float src_h = std::floor(h * 0.5f);
  ImGui::BeginChild("##source", ImVec2(right_w, src_h), true);
  draw_source_panel(s);
  ImGui::EndChild();
  ImGui::BeginChild("##analyses", ImVec2(right_w, std::max(10.0f, h - src_h - ImGui::GetStyle().ItemSpacing.y)), true);
  if (ImGui::BeginTabBar("##righttabs")) {
    if (ImGui::BeginTabItem("Requests", nullptr, tab_flag(s, "requests"))) { draw_requests_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Values", nullptr, tab_flag(s, "values"))) { draw_values_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Partitions", nullptr, tab_flag(s, "partitions"))) { draw_partitions_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Inspect", nullptr, s.focus_tab_request || tab_flag(s, "inspect") ? ImGuiTabItemFlags_SetSelected : 0)) {
      draw_inspect_panel(s);
      ImGui::EndTabItem();
    }
    s.focus_tab_request = false;
    ImGui::EndTabBar();
    if (s.tab_request_frames > 0 && --s.tab_request_frames == 0) s.tab_request.clear();
  }
  ImGui::EndChild();
  ImGui::EndChild();

  if (timeline) {
    // The splitter: drag it to give the timeline more or less height.
    ImGui::SetCursorScreenPos(ImVec2(ImGui::GetCursorScreenPos().x, ImGui::GetCursorScreenPos().y - ImGui::GetStyle().ItemSpacing.y));
    ImGui::InvisibleButton("##timeline_splitter", ImVec2(avail.x, splitter_h));
    if (ImGui::IsItemHovered() || ImGui::IsItemActive()) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
    if (ImGui::IsItemActive() && avail.y > 0)
      s.timeline_ui.pane_fraction = std::clamp(s.timeline_ui.pane_fraction - ImGui::GetIO().MouseDelta.y / avail.y, 0.1f, 0.9f);
    // The wheel zooms the timeline; the pane scrolls (by its scrollbar) only
    // when a small window leaves its plot too little height.
    ImGui::BeginChild("##timeline", ImVec2(avail.x, std::max(10.0f, timeline_h)), true,
                      ImGuiWindowFlags_NoScrollWithMouse);
    draw_timeline_panel(s);
    ImGui::EndChild();
  }

  ImGui::End();
  if (s.show_help) draw_help_overlay(s);
  s.last_step_seen = s.replay.current();
}

}  // namespace pa::viewer
