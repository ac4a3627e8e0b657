// The kernel source with the current step's anchor lines highlighted. The
// anchor comes from the lesson marker bound to the step and the shown thread
// block's role (core/lesson_binding.hpp); a step without a marker of its own
// shows the nearest marked step's region, in another colour and labelled as
// the enclosing region. The lines are found by the lesson parser's anchor
// scanner in kernels/stages.
#include <cmath>
#include <imgui.h>

#include <filesystem>
#include <fstream>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

const SourceFile& source_file(AppState& s, const std::string& path) {
  auto it = s.source_cache.find(path);
  if (it != s.source_cache.end()) return it->second;
  SourceFile f;
  f.path = path;
  std::ifstream in(path);
  if (!in) f.error = "cannot read " + path;
  std::string line;
  while (std::getline(in, line)) {
    for (auto& c : line)
      if (c == '\t') c = ' ';
    f.lines.push_back(line);
  }
  return s.source_cache.emplace(path, std::move(f)).first->second;
}

const std::optional<lesson::AnchorRange>& anchor(AppState& s, const std::string& name, std::string& err) {
  auto it = s.anchor_cache.find(name);
  if (it != s.anchor_cache.end()) return it->second;
  std::optional<lesson::AnchorRange> r;
  try {
    r = lesson::find_anchor_in_dir(s.source_dir, name);
  } catch (const std::exception& e) {
    err = e.what();
  }
  return s.anchor_cache.emplace(name, r).first->second;
}

}  // namespace

void draw_source_panel(AppState& s) {
  const ReplayStep* st = s.current_step();
  const StepBinding& bind = current_binding(s);
  const lesson::StepMarker* m = bind.marker ? &bind.marker->marker : nullptr;
  std::string err;
  const std::optional<lesson::AnchorRange>* ar = nullptr;
  // With an fp8 cache stage 8 runs other step functions for some steps
  // (optimized.qk_mma_fp8 beside optimized.qk_mma): show the code that ran.
  // Likewise stage 5 on an nhd or hnd cache runs its token-row LV
  // (lv.v_load_token_rows beside lv.v_load).
  std::string name = m ? m->anchor : std::string();
  if (!name.empty() && is_fp8(s.spec.kv_dtype)) {
    std::string unused;
    if (anchor(s, name + "_fp8", unused).has_value()) name += "_fp8";
  }
  if (!name.empty() && kv_layout_token_rows(s.spec.kv_layout)) {
    std::string unused;
    if (anchor(s, name + "_token_rows", unused).has_value()) name += "_token_rows";
  }
  if (!name.empty()) ar = &anchor(s, name, err);

  std::string where;
  if (ar && *ar)
    where = std::filesystem::path((*ar)->file).filename().string() + "  lines " + std::to_string((*ar)->begin_line + 1) +
            "-" + std::to_string((*ar)->end_line - 1) + "  (" + name + ")";
  else if (m)
    where = "anchor " + name + " not found in " + s.source_dir;
  title_with_detail(s, "Kernel source", where);
  // A step without a marker of its own: say whose region is shown.
  if (st && bind.enclosing && m) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.62f, 0.76f, 0.95f, 1));
    ImGui::TextWrapped("%s has no region of its own: showing the enclosing region, that of step %d (%s)",
                       step_name(st->step), bind.marked_step, s.step_label(bind.marked_step).c_str());
    ImGui::PopStyleColor();
  }
  if (!err.empty()) ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", err.c_str());

  ImGui::BeginChild("##code", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  if (!ar || !*ar) {
    if (st && !m)
      ImGui::TextWrapped("No lesson explains the code of this thread block's steps, so no source lines are shown "
                         "for %s. The other panels still show what every thread touches.",
                         step_name(st->step));
    ImGui::EndChild();
    return;
  }
  const SourceFile& f = source_file(s, (*ar)->file);
  if (!f.error.empty()) ImGui::TextColored(ImVec4(1, 0.5f, 0.45f, 1), "%s", f.error.c_str());
  ImGui::PushFont(s.fonts.mono);
  const float lh = ImGui::GetTextLineHeightWithSpacing();
  const int b = (*ar)->begin_line + 1, e = (*ar)->end_line - 1;  // 1-based code lines
  if (s.step_changed) ImGui::SetScrollY(std::max(0.0f, (b - 4) * lh));
  ImGuiListClipper clip;
  clip.Begin(static_cast<int>(f.lines.size()), lh);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  while (clip.Step()) {
    for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
      const int ln = i + 1;
      const bool hl = ln >= b && ln <= e;
      const ImVec2 p = ImGui::GetCursorScreenPos();
      // Amber: the step's own region; blue: the enclosing region of a step without one.
      if (hl)
        dl->AddRectFilled(p, ImVec2(p.x + ImGui::GetWindowWidth() + ImGui::GetScrollX(), p.y + lh),
                          col(bind.enclosing ? palette::enclosing_region : palette::own_region));
      const bool marker_line = f.lines[i].find("LESSON-") != std::string::npos;
      const ImVec4 num_col = vec4(bind.enclosing ? palette::enclosing_number : palette::own_number);
      ImGui::TextColored(hl ? num_col : ImVec4(0.45f, 0.47f, 0.52f, 1), "%4d", ln);
      ImGui::SameLine();
      ImVec4 c = hl ? vec4(palette::region_text) : ImVec4(0.74f, 0.76f, 0.80f, 1);
      if (marker_line) c = ImVec4(0.45f, 0.55f, 0.45f, 1);
      else if (f.lines[i].find("//") != std::string::npos && f.lines[i].find_first_not_of(' ') == f.lines[i].find("//"))
        c = ImVec4(0.50f, 0.65f, 0.50f, 1);
      ImGui::TextColored(c, "%s", f.lines[i].c_str());
    }
  }
  ImGui::PopFont();
  ImGui::EndChild();
}

}  // namespace pa::viewer
