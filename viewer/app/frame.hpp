// One frame of the viewer's UI, the same in every mode (interactive,
// screenshot, bench): the keyboard shortcuts, and the three columns of panels
// over the whole window (lesson, problem and trace | thread block and memory |
// kernel source and analyses), with the tab each column shows.
#pragma once
#include "app/state.hpp"

namespace pa::viewer {

// Space, arrows, Home/End, Esc, ? and 0-9 (unless a text field has the keyboard).
void handle_keys(AppState& s);
// The panels of one frame, between ImGui::NewFrame and ImGui::Render.
void draw_frame(AppState& s);

}  // namespace pa::viewer
