// Character and line helpers shared by the lesson parsers (Markdown, markers,
// anchors, the lesson list). ASCII only, on string_views, never allocating
// except split_lines' vector: the parsers stay linear in their input.
// Internal to pa_lesson.
#pragma once
#include <cctype>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

namespace pa::lesson::detail {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
inline bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_punct(char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; }

inline std::string_view trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Columns of leading whitespace (a tab counts 4) and the byte where text starts.
inline std::pair<int, std::size_t> leading_indent(std::string_view s) {
  int cols = 0;
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
    cols += s[i] == '\t' ? 4 : 1;
    ++i;
  }
  return {cols, i};
}

// The lines of a text, without their '\n' (or "\r\n").
inline std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t b = 0;
  while (b <= text.size()) {
    std::size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(b, e - b);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (e == text.size()) break;
    b = e + 1;
  }
  // A final '\n' does not start another (empty) line worth keeping.
  if (!lines.empty() && lines.back().empty() && !text.empty() && text.back() == '\n') lines.pop_back();
  return lines;
}

// The one rule for names a lesson and a kernel source share: a marker's
// anchor= and id=, and the name in LESSON-BEGIN(name).
inline bool valid_anchor_name(std::string_view n) {
  if (n.empty() || n.size() > 128) return false;
  for (char c : n)
    if (!is_alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

}  // namespace pa::lesson::detail
