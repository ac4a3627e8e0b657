// Small drawing helpers shared by the panels.
#include <cmath>
#include <imgui.h>

#include "app/state.hpp"

namespace pa::viewer {

ImU32 col(Rgba c, float alpha) { c.a *= alpha; return to_u32(c); }

Rgba dimmed(Rgba c, float amount) {
  const Rgba bg{0.13f, 0.135f, 0.155f, 1};
  return {c.r + (bg.r - c.r) * amount, c.g + (bg.g - c.g) * amount, c.b + (bg.b - c.b) * amount, 1};
}

ImU32 dim_col(Rgba c, float amount) { return to_u32(dimmed(c, amount)); }

ImVec4 cost_colour(bool over_ideal) {
  const Rgba c = over_ideal ? palette::over_ideal : palette::at_ideal;
  return ImVec4(c.r, c.g, c.b, c.a);
}

ImVec4 cost_colour(int cost, int ideal) { return cost_colour(cost > ideal); }

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

void title_with_detail(AppState& s, const char* title, const std::string& detail, const char* help) {
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted(title);
  ImGui::PopFont();
  if (help) help_marker(help);
  if (detail.empty()) return;
  ImGui::SameLine();
  // Wrapped at the panel's edge: a narrow window moves the rest of the
  // detail to the next line instead of cutting it off.
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextUnformatted(detail.c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
}

Legend::Legend(AppState& s, bool per_row) : per_row_(per_row) { ImGui::PushFont(s.fonts.small); }

Legend::~Legend() { ImGui::PopFont(); }

ImVec2 Legend::place(float width, const char* button_id) {
  const float gap = ImGui::GetFontSize() * 1.2f;
  if (!first_ && !per_row_) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (ImGui::GetItemRectMax().x + gap + width <= right) ImGui::SameLine(0, gap);
  }
  first_ = false;
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 size(width, ImGui::GetFontSize() + 2);
  if (button_id) clicked_ = ImGui::InvisibleButton(button_id, size);
  else ImGui::Dummy(size);
  return p;
}

bool Legend::toggle(Rgba fill, const char* text, bool on) {
  const float sz = ImGui::GetFontSize();
  const ImVec2 p = place(sz + 5 + ImGui::CalcTextSize(text).x, text);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  if (ImGui::IsItemHovered())
    dl->AddRectFilled(ImVec2(p.x - 2, p.y), ImVec2(ImGui::GetItemRectMax().x + 2, ImGui::GetItemRectMax().y),
                      ImGui::GetColorU32(ImGuiCol_HeaderHovered), 3);
  dl->AddRectFilled(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1), col(fill), 2);
  dl->AddRect(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1),
              on ? IM_COL32(255, 255, 255, 255) : IM_COL32(90, 95, 110, 255), 2, 0, on ? 2.0f : 1.0f);
  dl->AddText(ImVec2(p.x + sz + 5, p.y + 1), ImGui::GetColorU32(ImGuiCol_Text), text);
  return clicked_;
}

void Legend::swatch(Rgba fill, const char* text) {
  const float sz = ImGui::GetFontSize();
  const ImVec2 p = place(sz + 5 + ImGui::CalcTextSize(text).x);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1), col(fill), 2);
  dl->AddRect(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1), IM_COL32(90, 95, 110, 255), 2);
  dl->AddText(ImVec2(p.x + sz + 5, p.y + 1), ImGui::GetColorU32(ImGuiCol_Text), text);
}

void Legend::framed(Rgba fill, Rgba frame, const char* text) {
  const float sz = ImGui::GetFontSize();
  const ImVec2 p = place(sz + 5 + ImGui::CalcTextSize(text).x);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1), col(fill));
  dl->AddRect(ImVec2(p.x, p.y + 1), ImVec2(p.x + sz, p.y + sz + 1), col(frame), 0, 0, 2);
  dl->AddText(ImVec2(p.x + sz + 5, p.y + 1), ImGui::GetColorU32(ImGuiCol_Text), text);
}

void Legend::lanes(const char* text) {
  // Lanes 0, 4, ..., 28 of warp 0 above warp 3's: the hue walks the lanes,
  // the shade the warps.
  const float sz = ImGui::GetFontSize(), cw = sz * 0.45f;
  const ImVec2 p = place(8 * cw + 5 + ImGui::CalcTextSize(text).x);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (int k = 0; k < 8; ++k)
    for (int w = 0; w < 2; ++w)
      dl->AddRectFilled(ImVec2(p.x + k * cw, p.y + 1 + w * sz * 0.5f), ImVec2(p.x + (k + 1) * cw, p.y + 1 + (w + 1) * sz * 0.5f),
                        col(thread_color(w * 3, k * 4, 4)));
  dl->AddText(ImVec2(p.x + 8 * cw + 5, p.y + 1), ImGui::GetColorU32(ImGuiCol_Text), text);
}

void Legend::band(Rgba fill, Rgba number_colour, const char* text) {
  const char* number = "  42 ";
  const ImVec2 ns = ImGui::CalcTextSize(number), ts = ImGui::CalcTextSize(text);
  const float w = ns.x + ts.x + 8;
  const ImVec2 p = place(w);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(p.x, p.y), ImVec2(p.x + w, p.y + ts.y + 2), col(fill));
  dl->AddText(ImVec2(p.x + 2, p.y + 1), col(number_colour), number);
  dl->AddText(ImVec2(p.x + 2 + ns.x, p.y + 1), col(palette::region_text), text);
}

void Legend::words(Rgba text_colour, const char* sample, const char* text) {
  const float sw = ImGui::CalcTextSize(sample).x;
  const ImVec2 p = place(sw + 5 + ImGui::CalcTextSize(text).x);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddText(ImVec2(p.x, p.y + 1), col(text_colour), sample);
  dl->AddText(ImVec2(p.x + sw + 5, p.y + 1), ImGui::GetColorU32(ImGuiCol_Text), text);
}

}  // namespace pa::viewer
