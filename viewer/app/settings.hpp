// What the viewer remembers between interactive runs, in
// $XDG_CONFIG_HOME/pa-lab/ (or ~/.config/pa-lab/): pa-viewer.ini (lesson,
// step, replay speed, granularity, as key=value lines) and imgui.ini (ImGui's
// own state, which ImGui reads and writes itself). Screenshot and bench runs
// use neither, so that their output depends on the command line only. The UI
// scale is deliberately not remembered: it follows the monitor every run.
#pragma once
#include <string>

#include "app/state.hpp"

namespace pa::viewer {

// Both "" when there is no home or config folder to keep them in.
struct SettingsPaths {
  std::string imgui_ini, viewer_ini;
};
// The two files' paths; creates the folder if needed.
SettingsPaths settings_paths();

// Where the last run was: its lesson, if saved, and its step (applied once
// that lesson's trace is in).
struct SavedPosition {
  bool have_lesson = false;
  int step = 0;
};
// Reads pa-viewer.ini into s (lesson, speed, granularity; core/settings_text.hpp
// reads the text). A missing or damaged file is ignored, value by value.
SavedPosition load_settings(const std::string& path, AppState& s);
// Replaces the file whole (write, then rename); a failure is reported on
// stderr and keeps the previous file.
void save_settings(const std::string& path, const AppState& s);

}  // namespace pa::viewer
