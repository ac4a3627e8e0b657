// The trace: where it came from, its size, load timings, and opening a trace
// file (from assets/traces or any path); then the same for a timeline
// (assets/timelines), which the Timeline panel below the columns shows.
#include <cmath>
#include <imgui.h>

#include <cstdio>
#include <filesystem>
#include <vector>

#include "app/state.hpp"
#include "core/names.hpp"
#include "core/trace_files.hpp"

#ifndef PA_ASSETS_DIR
#define PA_ASSETS_DIR "assets"
#endif

namespace pa::viewer {

void draw_trace_panel(AppState& s) {
  ImGui::Text("source: %s", s.trace_source.c_str());
  if (!s.trace_revision.empty()) ImGui::Text("revision: %s", s.trace_revision.c_str());
  if (!s.trace_path.empty()) ImGui::TextWrapped("file: %s", s.trace_path.c_str());
  ImGui::Text("stage %d (%s)", static_cast<int>(s.stage), stage_name(s.stage));
  ImGui::TextWrapped("problem: %s", s.spec.describe().c_str());
  ImGui::Text("%zu events, %d thread block%s, %d replay steps", s.events.size(), s.index.num_blocks(),
              s.index.num_blocks() == 1 ? "" : "s", s.index.num_steps(s.block));
  ImGui::Text("load %.1f ms, index %.1f ms", s.load_ms, s.index_ms);
  ImGui::Separator();
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted("Open a trace file");
  ImGui::PopFont();
  ImGui::SetNextItemWidth(-ImGui::GetFontSize() * 4);
  const bool enter = ImGui::InputText("##path", s.open_path, sizeof s.open_path, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open") || enter) open_trace_file(s, s.open_path);
  // Bundled traces: one folder per source (host-model/, nvidia-h100/), listed recursively.
  const std::filesystem::path dir = std::filesystem::path(PA_ASSETS_DIR) / "traces";
  // Walked at most every 2 s, not every frame (a recursive directory walk).
  static std::vector<TraceFileEntry> files;
  static double listed_at = -1e9;
  if (ImGui::GetTime() - listed_at > 2.0) {
    files = list_trace_files(dir);
    listed_at = ImGui::GetTime();
  }
  if (!files.empty()) {
    ImGui::TextDisabled("bundled traces (%s):", dir.string().c_str());
    for (const auto& f : files)
      if (ImGui::Selectable(f.relative.c_str(), f.path == s.trace_path)) {
        std::snprintf(s.open_path, sizeof s.open_path, "%s", f.path.c_str());
        open_trace_file(s, f.path);
      }
  } else {
    ImGui::TextDisabled("no bundled traces (*.patrace) in %s", dir.string().c_str());
  }
  if (!s.trace_path.empty() && ImGui::Button("Back to the host model")) {
    s.replay.jump(0);
    regenerate_from_model(s);
  }

  // Timelines: measured on a GPU, shown beside the replay.
  ImGui::Separator();
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted("Open a timeline (.patl)");
  ImGui::PopFont();
  if (s.timeline) ImGui::TextWrapped("shown: %s", s.timeline->path().c_str());
  ImGui::SetNextItemWidth(-ImGui::GetFontSize() * 4);
  const bool tl_enter = ImGui::InputText("##timeline_path", s.open_timeline_path, sizeof s.open_timeline_path,
                                         ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (ImGui::Button("Open##timeline") || tl_enter) open_timeline_file(s, s.open_timeline_path);
  if (!s.timeline_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
    ImGui::TextWrapped("%s", s.timeline_error.c_str());
    ImGui::PopStyleColor();
  }
  const std::filesystem::path tl_dir = std::filesystem::path(PA_ASSETS_DIR) / "timelines";
  static std::vector<TraceFileEntry> timelines;
  static double timelines_listed_at = -1e9;
  if (ImGui::GetTime() - timelines_listed_at > 2.0) {
    timelines = list_trace_files(tl_dir, ".patl");
    timelines_listed_at = ImGui::GetTime();
  }
  if (!timelines.empty()) {
    ImGui::TextDisabled("bundled timelines (%s):", tl_dir.string().c_str());
    for (const auto& f : timelines)
      if (ImGui::Selectable(f.relative.c_str(), s.timeline && f.path == s.timeline->path())) {
        std::snprintf(s.open_timeline_path, sizeof s.open_timeline_path, "%s", f.path.c_str());
        open_timeline_file(s, f.path);
      }
  } else {
    ImGui::TextDisabled("no bundled timelines (*.patl) in %s", tl_dir.string().c_str());
  }
}

}  // namespace pa::viewer
