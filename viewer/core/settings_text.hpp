// The text of pa-viewer.ini, the settings an interactive run remembers
// (app/settings.cpp keeps the file): key=value lines for the lesson, the
// step, the replay speed and the granularity. Reading it never fails: a
// damaged or unknown line is skipped, each value on its own, so a half-written
// or hand-edited file still gives back what it holds intact.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "core/trace_index.hpp"

namespace pa::viewer {

struct SettingsValues {
  std::optional<int> lesson;  // 0..kMaxLesson (a larger saved one is clamped)
  std::optional<int> step;    // >= 0
  std::optional<float> speed;
  std::optional<Granularity> granularity;
};

SettingsValues parse_settings(std::string_view text);
std::string settings_text(int lesson, int step, float speed, Granularity granularity);

}  // namespace pa::viewer
