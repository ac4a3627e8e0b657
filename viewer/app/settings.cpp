// The remembered settings (settings.hpp).
#include "app/settings.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

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
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    try {
      if (k == "lesson") { s.lesson = std::clamp(std::stoi(v), 0, kMaxLesson); saved.have_lesson = true; }
      else if (k == "step") saved.step = std::max(0, std::stoi(v));
      else if (k == "speed") s.replay.set_speed(std::stof(v));
      else if (k == "granularity") s.granularity = v == "step" ? Granularity::step : Granularity::instruction;
    } catch (...) {
      // A damaged settings file is ignored, value by value.
    }
  }
  return saved;
}

void save_settings(const std::string& path, const AppState& s) {
  std::ofstream out(path);
  out << "lesson=" << s.lesson << "\nstep=" << s.replay.current() << "\nspeed=" << s.replay.speed()
      << "\ngranularity=" << (s.granularity == Granularity::step ? "step" : "instruction") << "\n";
}

}  // namespace pa::viewer
