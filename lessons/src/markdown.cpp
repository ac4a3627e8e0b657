// Markdown blocks: the lesson's lines grouped into sections (at headings) of
// paragraphs, list items, code, quotes, tables, rules, <details> and
// exercises, with each pa: marker comment handed to the marker syntax
// (marker_syntax.hpp) and its marker attached where it belongs: a step marker
// to the next section, an exercise to the next paragraph or list item.
// Written to be total: every loop advances at least one line, and nothing
// recurses on the input's nesting (<details> holds one level).
#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "inline_spans.hpp"
#include "marker_syntax.hpp"
#include "pa/lessons/document.hpp"
#include "pa/lessons/error.hpp"
#include "text.hpp"

namespace pa::lesson {

using namespace detail;

std::vector<Document::MarkerRef> Document::markers() const {
  std::vector<MarkerRef> out;
  for (std::size_t i = 0; i < sections.size(); ++i)
    for (const auto& m : sections[i].markers) out.push_back({&m, i});
  return out;
}

std::vector<const Block*> Document::exercises() const {
  std::vector<const Block*> out;
  for (const auto& sec : sections)
    for (const auto& b : sec.blocks) {
      if (b.kind == BlockKind::exercise) out.push_back(&b);
      for (const auto& c : b.children)
        if (c.kind == BlockKind::exercise) out.push_back(&c);
    }
  return out;
}

namespace {

// ---- what a line starts -----------------------------------------------------------
struct Fence {
  char ch = 0;
  std::size_t len = 0;
  int indent = 0;
  std::string info;
};

std::optional<Fence> fence_open(std::string_view line) {
  auto [cols, b] = leading_indent(line);
  std::string_view s = line.substr(b);
  if (s.size() < 3 || (s[0] != '`' && s[0] != '~')) return std::nullopt;
  std::size_t n = 0;
  while (n < s.size() && s[n] == s[0]) ++n;
  if (n < 3) return std::nullopt;
  std::string_view info = trim(s.substr(n));
  if (s[0] == '`' && info.find('`') != std::string_view::npos) return std::nullopt;
  return Fence{s[0], n, cols, std::string(info)};
}

bool fence_closes(std::string_view line, const Fence& f) {
  std::string_view s = trim(line);
  if (s.size() < f.len) return false;
  for (char c : s)
    if (c != f.ch) return false;
  return true;
}

// Strip up to `cols` columns of leading indentation.
std::string_view strip_indent(std::string_view line, int cols) {
  std::size_t i = 0;
  int c = 0;
  while (i < line.size() && c < cols && (line[i] == ' ' || line[i] == '\t')) {
    c += line[i] == '\t' ? 4 : 1;
    ++i;
  }
  return line.substr(i);
}

struct Heading {
  int level;
  std::string_view text;
};
std::optional<Heading> heading_of(std::string_view line) {
  auto [cols, b] = leading_indent(line);
  if (cols > 3) return std::nullopt;
  std::string_view s = line.substr(b);
  int n = 0;
  while (static_cast<std::size_t>(n) < s.size() && s[n] == '#') ++n;
  if (n < 1 || n > 6) return std::nullopt;
  if (static_cast<std::size_t>(n) < s.size() && s[n] != ' ' && s[n] != '\t') return std::nullopt;
  std::string_view t = trim(s.substr(n));
  // Optional closing sequence: " ###".
  std::size_t e = t.size();
  while (e > 0 && t[e - 1] == '#') --e;
  if (e == 0) {
    t = {};
  } else if (e < t.size() && is_space(t[e - 1])) {
    t = trim(t.substr(0, e));
  }
  return Heading{n, t};
}

bool is_rule(std::string_view line) {
  std::string_view s = trim(line);
  if (s.size() < 3) return false;
  const char c = s[0];
  if (c != '-' && c != '*' && c != '_') return false;
  int count = 0;
  for (char ch : s) {
    if (ch == c) {
      ++count;
    } else if (ch != ' ' && ch != '\t') {
      return false;
    }
  }
  return count >= 3;
}

struct ListItem {
  bool numbered;
  int number;
  int indent_cols;
  std::string_view text;
};
std::optional<ListItem> list_item_of(std::string_view line) {
  auto [cols, b] = leading_indent(line);
  std::string_view s = line.substr(b);
  if (s.empty()) return std::nullopt;
  if (s[0] == '-' || s[0] == '*' || s[0] == '+') {
    if (s.size() == 1) return ListItem{false, 0, cols, {}};
    if (s[1] != ' ' && s[1] != '\t') return std::nullopt;
    return ListItem{false, 0, cols, trim(s.substr(2))};
  }
  std::size_t n = 0;
  while (n < s.size() && n < 10 && is_digit(s[n])) ++n;
  if (n == 0 || n > 9 || n >= s.size() || (s[n] != '.' && s[n] != ')')) return std::nullopt;
  if (n + 1 < s.size() && s[n + 1] != ' ' && s[n + 1] != '\t') return std::nullopt;
  int number = 0;
  for (std::size_t i = 0; i < n; ++i) number = number * 10 + (s[i] - '0');
  return ListItem{true, number, cols, n + 1 < s.size() ? trim(s.substr(n + 2)) : std::string_view{}};
}

bool is_quote(std::string_view line) {
  auto [cols, b] = leading_indent(line);
  return cols <= 3 && b < line.size() && line[b] == '>';
}
std::string_view quote_body(std::string_view line) {
  auto [cols, b] = leading_indent(line);
  std::string_view s = line.substr(b + 1);
  if (!s.empty() && s[0] == ' ') s.remove_prefix(1);
  return s;
}

bool is_table_row(std::string_view line) {
  std::string_view s = trim(line);
  return !s.empty() && s[0] == '|';
}
bool is_table_delimiter(std::string_view line) {
  std::string_view s = trim(line);
  if (s.empty() || s.find('-') == std::string_view::npos) return false;
  for (char c : s)
    if (c != '|' && c != '-' && c != ':' && c != ' ' && c != '\t') return false;
  return true;
}
std::vector<std::vector<Span>> table_cells(std::string_view line) {
  std::string_view s = trim(line);
  if (!s.empty() && s[0] == '|') s.remove_prefix(1);
  // A trailing unescaped '|' closes the row rather than opening an empty cell.
  if (!s.empty() && s.back() == '|' && !(s.size() >= 2 && s[s.size() - 2] == '\\')) s.remove_suffix(1);
  std::vector<std::vector<Span>> cells;
  std::size_t b = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == '|' && (i == 0 || s[i - 1] != '\\'))) {
      cells.push_back(parse_inline(s.substr(b, i - b)));
      b = i + 1;
    }
  }
  return cells;
}

bool is_comment_start(std::string_view line) { return starts_with(trim(line), "<!--"); }

// Lowercased, trimmed line for the few HTML tags we know.
std::string lower_trim(std::string_view line) {
  std::string s(trim(line));
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool is_details_open(std::string_view line) {
  const std::string s = lower_trim(line);
  return starts_with(s, "<details>") || starts_with(s, "<details ") || s == "<details";
}
bool is_details_close(std::string_view line) { return starts_with(lower_trim(line), "</details>"); }
bool is_summary(std::string_view line) { return starts_with(lower_trim(line), "<summary>"); }

// The text between <summary> and </summary> on one line (after <details> if any).
std::string_view summary_text(std::string_view line) {
  std::string low = lower_trim(line);
  std::string_view t = trim(line);
  const std::size_t b = low.find("<summary>");
  if (b == std::string::npos) return {};
  const std::size_t e = low.find("</summary>", b);
  const std::size_t from = b + 9;
  return t.substr(from, (e == std::string::npos ? t.size() : e) - from);
}

// ---- the block parser -------------------------------------------------------------
class BlockParser {
 public:
  BlockParser(std::string_view text, const std::string& file) : lines_(split_lines(text)), file_(file) {
    doc_.file = file;
    doc_.sections.push_back(Section{});
  }

  Document run() {
    while (i_ < lines_.size()) step();
    if (pending_exercise_) no_question("the end of the file");
    close_details();
    if (!pending_.empty()) {
      throw LessonError(file_, pending_.front().line,
                        "pa:step marker is not followed by a section heading (a marker ties the next heading's section)");
    }
    // Drop an empty preamble.
    if (!doc_.sections.empty() && doc_.sections.front().level == 0 && doc_.sections.front().blocks.empty()) {
      doc_.sections.erase(doc_.sections.begin());
    }
    return std::move(doc_);
  }

 private:
  int lineno() const { return static_cast<int>(i_) + 1; }
  std::vector<Block>& out() {
    auto& blocks = doc_.sections.back().blocks;
    if (details_open_ && !blocks.empty() && blocks.back().kind == BlockKind::details) return blocks.back().children;
    return blocks;
  }
  void close_details() { details_open_ = false; }

  // A line that starts some block other than a list item's continuation
  // (any list item starts the next item).
  bool interrupts(std::string_view line) const {
    return trim(line).empty() || heading_of(line) || fence_open(line) || is_rule(line) || list_item_of(line) ||
           is_quote(line) || is_table_row(line) || is_comment_start(line) || is_details_open(line) ||
           is_details_close(line) || is_summary(line);
  }
  // The same for a paragraph's continuation, where a list item may start
  // only as CommonMark allows: not empty, and numbered 1 if numbered. So
  // "16) hold rows" wrapped onto the start of a line stays running text.
  bool interrupts_paragraph(std::string_view line) const {
    if (const auto li = list_item_of(line)) {
      if (li->text.empty() || (li->numbered && li->number != 1)) {
        return trim(line).empty() || heading_of(line) || fence_open(line) || is_rule(line);
      }
      return true;
    }
    return interrupts(line);
  }

  // A block starts the pending exercise's question only if it is a
  // paragraph or a list item; anything else is an authoring error.
  [[noreturn]] void no_question(const std::string& found) const {
    throw LessonError(file_, pending_exercise_->line,
                      "pa:exercise '" + pending_exercise_->id + "' must be followed by its question (a paragraph "
                      "or a list item), found " + found);
  }
  void add_exercise_question(Block question) {
    Block b;
    b.kind = BlockKind::exercise;
    b.line = pending_exercise_->line;
    b.exercise = std::move(pending_exercise_);
    pending_exercise_.reset();
    b.children.push_back(std::move(question));
    out().push_back(std::move(b));
  }
  void emit(Block b) {
    if (pending_exercise_ && (b.kind == BlockKind::paragraph || b.kind == BlockKind::bullet_item ||
                              b.kind == BlockKind::numbered_item)) {
      add_exercise_question(std::move(b));
      return;
    }
    out().push_back(std::move(b));
  }

  void step() {
    std::string_view line = lines_[i_];
    if (trim(line).empty()) {
      ++i_;
      return;
    }
    if (pending_exercise_ && !is_question_start(line)) {
      const std::string found(trim(line).substr(0, 40));
      no_question("'" + found + "' at line " + std::to_string(lineno()));
    }
    if (auto f = fence_open(line)) return code_block(*f);
    if (is_comment_start(line)) return comment();
    if (auto h = heading_of(line)) return heading(*h);
    if (is_details_open(line)) {
      close_details();
      Block b;
      b.kind = BlockKind::details;
      b.line = lineno();
      b.spans = parse_inline(summary_text(line));
      doc_.sections.back().blocks.push_back(std::move(b));
      details_open_ = true;
      ++i_;
      return;
    }
    if (is_summary(line)) {
      auto& blocks = doc_.sections.back().blocks;
      if (details_open_ && !blocks.empty() && blocks.back().kind == BlockKind::details) {
        blocks.back().spans = parse_inline(summary_text(line));
      }
      ++i_;
      return;
    }
    if (is_details_close(line)) {
      close_details();
      ++i_;
      return;
    }
    if (is_rule(line)) {
      Block b;
      b.kind = BlockKind::rule;
      b.line = lineno();
      out().push_back(std::move(b));
      ++i_;
      return;
    }
    if (auto li = list_item_of(line)) return list_item(*li);
    if (is_quote(line)) return quote();
    if (is_table_row(line)) return table();
    paragraph();
  }

  void code_block(const Fence& f) {
    Block b;
    b.kind = BlockKind::code;
    b.line = lineno();
    b.info = f.info;
    std::string_view info = f.info;
    std::size_t e = 0;
    while (e < info.size() && !is_space(info[e])) ++e;
    b.language = std::string(info.substr(0, e));
    ++i_;
    while (i_ < lines_.size()) {
      if (fence_closes(lines_[i_], f)) {
        ++i_;
        break;
      }
      b.code += strip_indent(lines_[i_], f.indent);
      b.code += '\n';
      ++i_;
    }
    out().push_back(std::move(b));
  }

  // The first line of a paragraph or a list item (what step() would parse as one).
  bool is_question_start(std::string_view line) const {
    return !(fence_open(line) || is_comment_start(line) || heading_of(line) || is_details_open(line) ||
             is_summary(line) || is_details_close(line) || is_rule(line) || is_quote(line) || is_table_row(line));
  }

  void comment() {
    const int start = lineno();
    std::string_view first = trim(lines_[i_]);
    first.remove_prefix(4);  // "<!--"
    // Gather the comment body up to "-->", possibly over several lines.
    std::string body;
    std::string_view cur = first;
    bool closed = false;
    while (true) {
      const std::size_t e = cur.find("-->");
      if (e != std::string_view::npos) {
        body.append(cur.substr(0, e));
        closed = true;
        ++i_;
        break;
      }
      body.append(cur);
      body += ' ';
      ++i_;
      if (i_ >= lines_.size()) break;
      cur = lines_[i_];
    }
    std::string_view t = trim(body);
    if (starts_with(t, "pa:")) {
      const bool exercise = is_exercise_directive(t);
      if (!closed) {
        throw LessonError(file_, start, std::string(exercise ? "pa:exercise" : "pa:step") +
                                            " marker comment is not closed with -->");
      }
      if (exercise) {
        ExerciseMarker m = parse_exercise_marker(t, file_, start);
        if (const auto it = exercise_lines_.find(m.id); it != exercise_lines_.end()) {
          throw LessonError(file_, start, "pa:exercise: id '" + m.id + "' already used at line " +
                                              std::to_string(it->second) + " (ids are unique in a lesson)");
        }
        exercise_lines_.emplace(m.id, start);
        pending_exercise_ = std::move(m);
      } else {
        pending_.push_back(parse_step_marker(t, file_, start));
      }
    }
  }

  void heading(const Heading& h) {
    close_details();
    Section s;
    s.level = h.level;
    s.heading = parse_inline(h.text);
    s.line = lineno();
    s.markers = std::move(pending_);
    pending_.clear();
    if (h.level == 1 && doc_.title.empty()) doc_.title = plain_text(s.heading);
    doc_.sections.push_back(std::move(s));
    ++i_;
  }

  void list_item(const ListItem& li) {
    Block b;
    b.kind = li.numbered ? BlockKind::numbered_item : BlockKind::bullet_item;
    b.line = lineno();
    b.number = li.number;
    b.indent = std::min(li.indent_cols / 2, 8);
    std::string text(li.text);
    ++i_;
    while (i_ < lines_.size() && !interrupts(lines_[i_])) {
      text += ' ';
      text += trim(lines_[i_]);
      ++i_;
    }
    b.spans = parse_inline(text);
    emit(std::move(b));
  }

  void quote() {
    Block b;
    b.kind = BlockKind::quote;
    b.line = lineno();
    std::string text;
    while (i_ < lines_.size() && is_quote(lines_[i_])) {
      if (!text.empty()) text += ' ';
      text += trim(quote_body(lines_[i_]));
      ++i_;
    }
    b.spans = parse_inline(text);
    out().push_back(std::move(b));
  }

  void table() {
    Block b;
    b.kind = BlockKind::table;
    b.line = lineno();
    while (i_ < lines_.size() && is_table_row(lines_[i_])) {
      // The delimiter row under the header only separates; it is not a row.
      if (!(b.rows.size() == 1 && is_table_delimiter(lines_[i_]))) {
        b.rows.push_back(table_cells(lines_[i_]));
      }
      ++i_;
    }
    out().push_back(std::move(b));
  }

  void paragraph() {
    Block b;
    b.kind = BlockKind::paragraph;
    b.line = lineno();
    std::string text(trim(lines_[i_]));
    ++i_;
    while (i_ < lines_.size() && !interrupts_paragraph(lines_[i_])) {
      text += ' ';
      text += trim(lines_[i_]);
      ++i_;
    }
    b.spans = parse_inline(text);
    emit(std::move(b));
  }

  std::vector<std::string_view> lines_;
  std::string file_;
  std::size_t i_ = 0;
  Document doc_;
  std::vector<StepMarker> pending_;
  bool details_open_ = false;
  std::optional<ExerciseMarker> pending_exercise_;  // waiting for its question
  std::map<std::string, int> exercise_lines_;       // id -> line, for duplicates
};

}  // namespace

Document parse_lesson(std::string_view text, const std::string& file) {
  if (text.size() > kMaxLessonBytes) {
    throw LessonError(file, 0, "input is " + std::to_string(text.size()) + " bytes; at most " +
                                   std::to_string(kMaxLessonBytes) + " accepted");
  }
  return BlockParser(text, file).run();
}

}  // namespace pa::lesson
