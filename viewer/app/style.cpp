// The viewer's fonts and ImGui style (style.hpp says why they sit together).
#include "app/style.hpp"

#include <filesystem>
#include <string>

namespace pa::viewer {
namespace {

const char* kFontDir = "/usr/share/fonts/truetype/dejavu/";

}  // namespace

Fonts load_fonts(float scale) {
  ImGuiIO& io = ImGui::GetIO();
  Fonts f;
  f.scale = scale;
  // Latin, Greek (lessons write sigma, alpha...), arrows, math and the
  // typographic marks the lessons use.
  static ImVector<ImWchar> ranges;
  if (ranges.empty()) {
    ImFontGlyphRangesBuilder b;
    b.AddRanges(io.Fonts->GetGlyphRangesDefault());
    static const ImWchar extra[] = {0x0370, 0x03FF, 0x2010, 0x205E, 0x2190, 0x21FF, 0x2200, 0x22FF,
                                    0x2300, 0x23FF, 0x2500, 0x257F, 0x25A0, 0x25FF, 0x2713, 0x2717, 0};
    b.AddRanges(extra);
    b.BuildRanges(&ranges);
  }
  auto add = [&](const char* file, float px) -> ImFont* {
    const std::string p = std::string(kFontDir) + file;
    if (!std::filesystem::exists(p)) return nullptr;
    return io.Fonts->AddFontFromFileTTF(p.c_str(), px * scale, nullptr, ranges.Data);
  };
  f.regular = add("DejaVuSans.ttf", 15.0f);
  if (!f.regular) {  // no TTF: ImGui's built-in font, still readable
    ImFontConfig c;
    c.SizePixels = 13.0f * scale;
    f.regular = io.Fonts->AddFontDefault(&c);
  }
  f.bold = add("DejaVuSans-Bold.ttf", 15.0f);
  f.italic = add("DejaVuSans-Oblique.ttf", 15.0f);
  f.mono = add("DejaVuSansMono.ttf", 14.0f);
  f.h1 = add("DejaVuSans-Bold.ttf", 21.0f);
  f.h2 = add("DejaVuSans-Bold.ttf", 17.5f);
  f.small = add("DejaVuSans.ttf", 12.0f);
  for (ImFont** p : {&f.bold, &f.italic, &f.mono, &f.h1, &f.h2, &f.small})
    if (!*p) *p = f.regular;
  return f;
}

void apply_style(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& st = ImGui::GetStyle();
  st.WindowRounding = 0;
  st.ChildRounding = 4;
  st.FrameRounding = 4;
  st.GrabRounding = 4;
  st.TabRounding = 4;
  st.WindowPadding = ImVec2(8, 8);
  st.FramePadding = ImVec2(7, 4);
  st.ItemSpacing = ImVec2(8, 6);
  st.ScrollbarSize = 13;
  ImVec4* c = st.Colors;
  c[ImGuiCol_WindowBg] = kWindowBackground;
  c[ImGuiCol_ChildBg] = ImVec4(0.13f, 0.135f, 0.155f, 1);
  c[ImGuiCol_PopupBg] = ImVec4(0.12f, 0.125f, 0.145f, 0.97f);
  c[ImGuiCol_Border] = ImVec4(0.25f, 0.26f, 0.30f, 1);
  c[ImGuiCol_FrameBg] = ImVec4(0.19f, 0.20f, 0.23f, 1);
  c[ImGuiCol_Tab] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_TabActive] = ImVec4(0.25f, 0.35f, 0.55f, 1);
  c[ImGuiCol_TabHovered] = ImVec4(0.30f, 0.42f, 0.65f, 1);
  c[ImGuiCol_Header] = ImVec4(0.22f, 0.30f, 0.45f, 1);
  c[ImGuiCol_Button] = ImVec4(0.21f, 0.27f, 0.38f, 1);
  c[ImGuiCol_ButtonHovered] = ImVec4(0.29f, 0.39f, 0.56f, 1);
  st.ScaleAllSizes(scale);
}

}  // namespace pa::viewer
