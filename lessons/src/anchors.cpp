// Scanning kernel source text for LESSON-BEGIN(name) / LESSON-END(name)
// comments. Only these two words matter, not the language around them, so
// each line is searched for them and nothing else is parsed: any source file
// scans alike.
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include "pa/lessons/anchors.hpp"
#include "text.hpp"

namespace pa::lesson {

using namespace detail;

std::vector<AnchorRange> scan_anchors(std::string_view source, const std::string& file) {
  const auto lines = split_lines(source);
  std::vector<AnchorRange> done;
  std::map<std::string, int, std::less<>> open;  // name -> begin line
  auto name_after = [&](std::string_view line, std::size_t pos, int ln) {
    const std::size_t close = line.find(')', pos);
    if (close == std::string_view::npos) throw LessonError(file, ln, "LESSON anchor: missing ')'");
    std::string_view n = line.substr(pos, close - pos);
    if (!valid_anchor_name(n)) {
      throw LessonError(file, ln, "LESSON anchor: bad name '" + std::string(n.substr(0, 128)) +
                                      "' (accepted: 1-128 characters of A-Z a-z 0-9 _ . -)");
    }
    return std::string(n);
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int ln = static_cast<int>(i) + 1;
    std::string_view line = lines[i];
    static constexpr std::string_view kBegin = "LESSON-BEGIN(", kEnd = "LESSON-END(";
    if (auto p = line.find(kBegin); p != std::string_view::npos) {
      std::string n = name_after(line, p + kBegin.size(), ln);
      if (open.count(n)) throw LessonError(file, ln, "LESSON-BEGIN(" + n + ") while it is already open");
      for (const auto& d : done)
        if (d.name == n) throw LessonError(file, ln, "anchor '" + n + "' defined twice (first at line " +
                                                         std::to_string(d.begin_line) + ")");
      open.emplace(std::move(n), ln);
    } else if (auto q = line.find(kEnd); q != std::string_view::npos) {
      std::string n = name_after(line, q + kEnd.size(), ln);
      auto it = open.find(n);
      if (it == open.end()) throw LessonError(file, ln, "LESSON-END(" + n + ") without a LESSON-BEGIN");
      done.push_back({n, file, it->second, ln});
      open.erase(it);
    }
  }
  if (!open.empty()) {
    const auto& [n, ln] = *open.begin();
    throw LessonError(file, ln, "LESSON-BEGIN(" + n + ") has no LESSON-END(" + n + ")");
  }
  std::sort(done.begin(), done.end(), [](const AnchorRange& a, const AnchorRange& b) {
    return a.begin_line < b.begin_line;
  });
  return done;
}

}  // namespace pa::lesson
