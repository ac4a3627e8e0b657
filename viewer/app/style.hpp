// The viewer's look at a UI scale: the fonts (DejaVu TTF with the glyph
// ranges the lessons use; ImGui's built-in font when the TTFs are missing)
// and ImGui's style (dark, rounded, the viewer's colours, sizes scaled).
// Kept apart from the window backend because both are rebuilt together
// whenever the scale changes (window.cpp), and the panels read the fonts.
#pragma once
#include <imgui.h>

namespace pa::viewer {

struct Fonts {
  ImFont* regular = nullptr;
  ImFont* bold = nullptr;
  ImFont* italic = nullptr;
  ImFont* mono = nullptr;
  ImFont* h1 = nullptr;
  ImFont* h2 = nullptr;
  ImFont* small = nullptr;
  float scale = 1.0f;  // HiDPI content scale
};

// The window's background: ImGui's window colour, and the colour the frame is
// cleared to before ImGui draws over it.
inline const ImVec4 kWindowBackground(0.105f, 0.11f, 0.125f, 1);

// Adds the viewer's fonts at this scale to ImGui's font atlas (empty, or
// cleared first when the scale changes). A missing TTF falls back to the
// regular font, so every field is set.
Fonts load_fonts(float scale);
// ImGui's dark style with the viewer's roundings, paddings and colours, every
// size multiplied by scale.
void apply_style(float scale);

}  // namespace pa::viewer
