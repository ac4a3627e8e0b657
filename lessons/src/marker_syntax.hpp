// Reading the body of a `<!-- pa:... -->` comment (the text between "<!--"
// and "-->", trimmed) into a marker. Internal to pa_lesson: the block parser
// (markdown.cpp) finds the comments and decides where their markers belong.
#pragma once
#include <string>
#include <string_view>

#include "pa/lessons/markers.hpp"

namespace pa::lesson::detail {

// True if the directive's first word is pa:exercise; any other pa: directive
// is read as a step marker (and refused if it is not pa:step).
bool is_exercise_directive(std::string_view body);
// <!-- pa:step key=value ... -->. Throws LessonError at file:line.
StepMarker parse_step_marker(std::string_view body, const std::string& file, int line);
// <!-- pa:exercise key=value ... -->. Throws LessonError at file:line.
ExerciseMarker parse_exercise_marker(std::string_view body, const std::string& file, int line);

}  // namespace pa::lesson::detail
