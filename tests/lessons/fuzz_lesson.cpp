// libFuzzer entry for the lesson parser and the anchor scanner (PA_FUZZ=ON,
// clang). Any exception other than LessonError, any crash, sanitizer report,
// timeout or out-of-memory is a finding. See lessons/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pa/lessons/lesson.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto doc = pa::lesson::parse_lesson(text, "fuzz.md");
    (void)doc.markers();
  } catch (const pa::lesson::LessonError&) {
  }
  try {
    (void)pa::lesson::scan_anchors(text, "fuzz.cuh");
  } catch (const pa::lesson::LessonError&) {
  }
  return 0;
}
