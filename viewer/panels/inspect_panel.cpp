// The selection: what a thread or warp does and when, or who touches a
// memory element and when. Every row jumps the replay to its step.
#include <cmath>
#include <imgui.h>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {

void draw_inspect_panel(AppState& s) {
  if (!s.focus.active()) {
    ImGui::TextWrapped("Click a thread (lane) or a warp label in the thread block, or an element of the KV cache or "
                       "a word of a shared buffer (Q's among them). This tab then lists what it touches, or who "
                       "touches it, at which steps.");
    return;
  }
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted(s.focus.describe().c_str());
  ImGui::PopFont();
  ImGui::SameLine();
  if (ImGui::SmallButton("clear")) {
    s.set_focus(Focus{});
    return;
  }
  ImGui::Checkbox("step only through these steps (Left/Right, < >)", &s.follow_focus);
  const int cur = s.replay.current();
  if (s.focus.kind == Focus::Kind::element) {
    ImGui::Text("%zu accesses in this block's replay", s.focus_touches.size());
    if (ImGui::BeginTable("##touch", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("step");
      ImGui::TableSetupColumn("thread");
      ImGui::TableSetupColumn("what");
      ImGui::TableHeadersRow();
      ImGuiListClipper clip;
      clip.Begin(static_cast<int>(s.focus_touches.size()));
      while (clip.Step())
        for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
          const Touch& t = s.focus_touches[i];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          const std::string lbl = std::to_string(t.step) + "##t" + std::to_string(i);
          if (ImGui::Selectable(lbl.c_str(), t.step == cur, ImGuiSelectableFlags_SpanAllColumns)) { s.replay.pause(); s.replay.jump(t.step); }
          ImGui::TableNextColumn();
          const Rgba c = thread_color(t.warp, t.lane, s.cfg.num_warps);
          ImGui::TextColored(ImVec4(c.r, c.g, c.b, 1), "warp %d lane %d", t.warp, t.lane);
          ImGui::TableNextColumn();
          ImGui::Text("%s (%s)", step_name(t.what), op_name(t.op));
          if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", step_summary(t.what));
        }
      ImGui::EndTable();
    }
  } else {
    ImGui::Text("active in %zu of %d steps", s.focus_steps.size(), s.replay.count());
    if (ImGui::BeginTable("##steps", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      ImGui::TableSetupColumn("step");
      ImGui::TableSetupColumn("what");
      ImGui::TableHeadersRow();
      ImGuiListClipper clip;
      clip.Begin(static_cast<int>(s.focus_steps.size()));
      while (clip.Step())
        for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
          const int st = s.focus_steps[i];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          const std::string lbl = std::to_string(st) + "##s" + std::to_string(i);
          if (ImGui::Selectable(lbl.c_str(), st == cur, ImGuiSelectableFlags_SpanAllColumns)) { s.replay.pause(); s.replay.jump(st); }
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(s.step_label(st).c_str());
        }
      ImGui::EndTable();
    }
  }
}

}  // namespace pa::viewer
