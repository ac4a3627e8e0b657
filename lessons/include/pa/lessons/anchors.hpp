// Source anchors: `// LESSON-BEGIN(name)` ... `// LESSON-END(name)` comments
// in the kernel sources, the other end of a step marker's anchor=name. The
// viewer shows the lines between them next to the lesson, so a lesson quotes
// the kernel's real code and cannot drift from it. This scans source text;
// finding an anchor in a file or a folder is in files.hpp.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "pa/lessons/error.hpp"

namespace pa::lesson {

struct AnchorRange {
  std::string name;
  std::string file;   // path as given
  int begin_line = 0; // 1-based line of the LESSON-BEGIN comment
  int end_line = 0;   // 1-based line of the LESSON-END comment
  // The code lines between them are begin_line+1 .. end_line-1.
};

// All anchors of a source text, in order of their LESSON-BEGIN lines. Throws
// LessonError (file:line) for an END without BEGIN, a BEGIN without END, a
// duplicate name or a malformed name. Anchors may nest or overlap; names are
// unique per file.
std::vector<AnchorRange> scan_anchors(std::string_view source, const std::string& file = "<source>");

}  // namespace pa::lesson
