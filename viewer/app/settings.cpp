// The remembered settings (settings.hpp).
#include "app/settings.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "pa/core/atomic_file.hpp"
#include "core/settings_text.hpp"

namespace pa::viewer {

SettingsPaths settings_paths() {
  namespace fs = std::filesystem;
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  fs::path p = xdg && *xdg ? fs::path(xdg) : home && *home ? fs::path(home) / ".config" : fs::path();
  if (p.empty()) return {};
  p /= "pa-lab";
  std::error_code ec;
  fs::create_directories(p, ec);
  if (ec) return {};
  return {(p / "imgui.ini").string(), (p / "pa-viewer.ini").string()};
}

SavedPosition load_settings(const std::string& path, AppState& s) {
  SavedPosition saved;
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  const SettingsValues v = parse_settings(text.str());
  if (v.lesson) {
    s.lesson = *v.lesson;
    saved.have_lesson = true;
  }
  if (v.step) saved.step = *v.step;
  if (v.speed) s.replay.set_speed(*v.speed);
  if (v.granularity) s.granularity = *v.granularity;
  return saved;
}

void save_settings(const std::string& path, const AppState& s) {
  // Written whole or not at all: a full disk on exit keeps the last settings.
  try {
    core::write_file_atomically(path, settings_text(s.lesson, s.replay.current(), s.replay.speed(), s.granularity));
  } catch (const core::FileWriteError& e) {
    std::fprintf(stderr, "pa-viewer: settings not saved: %s\n", e.what());
  }
}

}  // namespace pa::viewer
