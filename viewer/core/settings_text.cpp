// pa-viewer.ini's text (settings_text.hpp).
#include "core/settings_text.hpp"

#include <algorithm>
#include <sstream>

#include "core/args.hpp"
#include "core/names.hpp"
#include "pa/core/parse_number.hpp"

namespace pa::viewer {

SettingsValues parse_settings(std::string_view text) {
  SettingsValues out;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t nl = std::min(text.find('\n', at), text.size());
    const std::string_view line = text.substr(at, nl - at);
    at = nl + 1;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "lesson") {
      if (const auto n = parse_number<int>(v)) out.lesson = std::clamp(*n, 0, kMaxLesson);
    } else if (k == "step") {
      if (const auto n = parse_number<int>(v); n && *n >= 0) out.step = *n;
    } else if (k == "speed") {
      if (const auto x = parse_number<float>(v); x && *x > 0.0f) out.speed = *x;
    } else if (k == "granularity") {
      if (const auto g = granularity_from_name(v)) out.granularity = *g;
    }
  }
  return out;
}

std::string settings_text(int lesson, int step, float speed, Granularity granularity) {
  std::ostringstream out;
  out << "lesson=" << lesson << "\nstep=" << step << "\nspeed=" << speed
      << "\ngranularity=" << granularity_name(granularity) << "\n";
  return out.str();
}

}  // namespace pa::viewer
