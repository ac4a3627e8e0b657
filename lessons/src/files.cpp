// Reading from disk: lesson files, the lesson folder's NN_name.md list, and
// the kernel sources searched for an anchor. Each file's size is checked
// before its text is read (kMaxLessonBytes), and a file or folder that cannot
// be read (missing, a folder where a file should be, unreadable, too large)
// or a folder with two lessons of one number is a LessonError at line 0
// naming the path, which the viewer shows instead of the lesson.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <utility>

#include "pa/lessons/files.hpp"
#include "text.hpp"

namespace pa::lesson {

using namespace detail;
namespace fs = std::filesystem;

namespace {

// The whole file as bytes; LessonError (line 0) if it is not a readable file
// of at most kMaxLessonBytes.
std::string read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw LessonError(path, 0, "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw LessonError(path, 0, "cannot open file");
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) throw LessonError(path, 0, "cannot read file size");
  if (static_cast<std::uint64_t>(size) > kMaxLessonBytes) {
    throw LessonError(path, 0, "file is " + std::to_string(static_cast<long long>(size)) +
                                   " bytes; at most " + std::to_string(kMaxLessonBytes) + " accepted");
  }
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<std::size_t>(size), '\0');
  if (size > 0 && !in.read(text.data(), size)) throw LessonError(path, 0, "read failed");
  return text;
}

}  // namespace

Document load_lesson(const std::string& path) { return parse_lesson(read_file(path), path); }

// ---- lesson list ------------------------------------------------------------------
std::vector<LessonEntry> list_lessons(const std::string& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw LessonError(dir, 0, "cannot list lesson directory: " + ec.message());
  std::vector<LessonEntry> out;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw LessonError(dir, 0, "cannot list lesson directory: " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.size() < 7 || !is_digit(name[0]) || !is_digit(name[1]) || name[2] != '_' ||
        name.substr(name.size() - 3) != ".md") {
      continue;
    }
    LessonEntry e;
    e.number = (name[0] - '0') * 10 + (name[1] - '0');
    e.path = it->path().string();
    e.slug = name.substr(3, name.size() - 6);
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const LessonEntry& a, const LessonEntry& b) {
    return a.number != b.number ? a.number < b.number : a.path < b.path;
  });
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (out[i].number == out[i - 1].number) {
      throw LessonError(dir, 0, "two lessons numbered " + std::to_string(out[i].number) + ": " + out[i - 1].path +
                                    " and " + out[i].path);
    }
  }
  return out;
}

// ---- anchors in files ----------------------------------------------------------------
std::optional<AnchorRange> find_anchor(const std::string& path, std::string_view name) {
  for (auto& a : scan_anchors(read_file(path), path))
    if (a.name == name) return a;
  return std::nullopt;
}

std::optional<AnchorRange> find_anchor_in_dir(const std::string& dir, std::string_view name) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) throw LessonError(dir, 0, "cannot list source directory: " + ec.message());
  std::vector<std::string> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw LessonError(dir, 0, "cannot list source directory: " + ec.message());
    const auto ext = it->path().extension().string();
    if (it->is_regular_file(ec) && (ext == ".cuh" || ext == ".cu" || ext == ".hpp" || ext == ".h")) {
      files.push_back(it->path().string());
    }
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files)
    if (auto a = find_anchor(f, name)) return a;
  return std::nullopt;
}

}  // namespace pa::lesson
