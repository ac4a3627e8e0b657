// Reading lessons and kernel sources from disk: the only part of the lesson
// library that touches the filesystem. Kept apart from the parsers, which work
// on text, so the tests and the fuzzers can feed them anything without files.
// A file that cannot be read is a LessonError at line 0; a file over
// kMaxLessonBytes is refused before it is read.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pa/lessons/anchors.hpp"
#include "pa/lessons/document.hpp"
#include "pa/lessons/error.hpp"

namespace pa::lesson {

// Read and parse a file; LessonError (line 0) if it cannot be read.
Document load_lesson(const std::string& path);

// ---- the lesson list ----------------------------------------------------------
struct LessonEntry {
  int number = 0;     // from the file name "NN_name.md"
  std::string path;   // full path
  std::string slug;   // "paged_kv_cache" for 00_paged_kv_cache.md
};
// The files dir/NN_*.md (NN = two digits), sorted by number. Throws
// LessonError if dir cannot be read or two files share a number.
std::vector<LessonEntry> list_lessons(const std::string& dir);

// ---- anchors in files ---------------------------------------------------------
// The named anchor in one file, nullopt if absent. Throws LessonError if the
// file cannot be read or its anchors are malformed.
std::optional<AnchorRange> find_anchor(const std::string& path, std::string_view name);
// The named anchor in the first file under dir (*.cuh, *.cu, *.hpp, *.h; not
// recursive; files in name order) that has it; nullopt if none has.
std::optional<AnchorRange> find_anchor_in_dir(const std::string& dir, std::string_view name);

}  // namespace pa::lesson
