// pa-viewer.ini's text: what an interactive run saves reads back the same,
// and a damaged file gives back each value that is intact, never a throw.
#include <catch2/catch_test_macros.hpp>
#include <string>

#include "core/args.hpp"
#include "core/settings_text.hpp"

using namespace pa::viewer;

TEST_CASE("settings: what is saved reads back", "[viewer][settings]") {
  const std::string text = settings_text(8, 151, 4.0f, Granularity::step);
  CHECK(text == "lesson=8\nstep=151\nspeed=4\ngranularity=step\n");
  const SettingsValues v = parse_settings(text);
  CHECK(v.lesson == 8);
  CHECK(v.step == 151);
  CHECK(v.speed == 4.0f);
  CHECK(v.granularity == Granularity::step);
  CHECK(parse_settings(settings_text(0, 0, 0.5f, Granularity::instruction)).granularity == Granularity::instruction);
}

TEST_CASE("settings: a damaged file keeps every intact value, skips the rest", "[viewer][settings]") {
  // Values a partial parse would have misread (the old std::stoi took "3abc" for 3).
  int ran = 0;
  for (const char* bad : {"lesson=3abc", "lesson=", "lesson= 3", "lesson=x", "step=-4", "step=1e3", "speed=0",
                          "speed=-1", "speed=nan", "speed=inf", "granularity=warp", "=3", "lesson"}) {
    INFO(bad);
    // The damaged line comes last, so a value misread from it would replace the intact one.
    const SettingsValues v = parse_settings(std::string("lesson=2\nstep=7\nspeed=1.5\n") + bad + "\n");
    CHECK(v.lesson == 2);
    CHECK(v.step == 7);
    CHECK(v.speed == 1.5f);
    CHECK_FALSE(v.granularity.has_value());
    ++ran;
  }
  CHECK(ran == 13);
  // A lesson saved by a build with more lessons is clamped; unknown keys and a truncated last line are skipped.
  const SettingsValues v = parse_settings("lesson=42\nfont=big\nspeed=2.5\nstep=1");
  CHECK(v.lesson == kMaxLesson);
  CHECK(v.speed == 2.5f);
  CHECK(v.step == 1);
  CHECK_FALSE(parse_settings("").lesson.has_value());
}
