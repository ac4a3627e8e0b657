// Lessons: a small Markdown subset parsed into a document the viewer can draw
// (and tests can check), plus the markers that tie a section to a stage, a
// trace step and a kernel source anchor. One include for all of it:
//   document.hpp  the Markdown subset, Document, parse_lesson
//   markers.hpp   the pa:step and pa:exercise markers, the name tables
//   anchors.hpp   LESSON-BEGIN/END anchors in kernel sources
//   files.hpp     reading lessons, the lesson list, anchors in files
//   error.hpp     LessonError, which all of them throw
//
// Plain C++ (no ImGui): CMake target `pa_lesson` (lessons/CMakeLists.txt).
// A target that needs it without the top-level `add_subdirectory(lessons)`:
//   if(NOT TARGET pa_lesson)
//     add_subdirectory(${PROJECT_SOURCE_DIR}/lessons ${PROJECT_BINARY_DIR}/lessons)
//   endif()
#pragma once
#include "pa/lessons/anchors.hpp"
#include "pa/lessons/document.hpp"
#include "pa/lessons/error.hpp"
#include "pa/lessons/files.hpp"
#include "pa/lessons/markers.hpp"
