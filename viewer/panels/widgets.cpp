// Small drawing helpers shared by the panels.
#include <cmath>
#include <imgui.h>

#include "app/state.hpp"

namespace pa::viewer {

ImU32 col(Rgba c, float alpha) { c.a *= alpha; return to_u32(c); }

ImU32 dim_col(Rgba c, float amount) {
  const Rgba bg{0.13f, 0.135f, 0.155f, 1};
  return to_u32({c.r + (bg.r - c.r) * amount, c.g + (bg.g - c.g) * amount, c.b + (bg.b - c.b) * amount, 1});
}

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void section_title(AppState& s, const char* text) {
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted(text);
  ImGui::PopFont();
}

}  // namespace pa::viewer
