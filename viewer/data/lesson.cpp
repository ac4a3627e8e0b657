// The lesson Markdown parser (see lesson.hpp for the subset). Written to be
// total: every loop advances, inline closers are found through precomputed
// position lists (no quadratic rescans), and nothing recurses on input depth.
#include "lesson.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace pa::lesson {

using pa::trace::Stage;
using pa::trace::Step;

LessonError::LessonError(std::string file, int line, const std::string& message)
    : std::runtime_error(file + ":" + std::to_string(line) + ": " + message),
      file_(std::move(file)),
      line_(line),
      message_(message) {}

// ---- names ----------------------------------------------------------------------
namespace {

struct StageName {
  Stage stage;
  const char* name;
};
constexpr StageName kStageNames[] = {
    {Stage::q_to_smem, "q_to_smem"},       {Stage::qk, "qk"},
    {Stage::softmax, "softmax"},           {Stage::lv, "lv"},
    {Stage::warp_reduce, "warp_reduce"},   {Stage::v2_partition, "v2_partition"},
    {Stage::cascade_merge, "cascade_merge"}, {Stage::optimized, "optimized"},
};

// Indexed by the Step value: the order of the enum in event.hpp.
constexpr const char* kStepNames[] = {
    "q_load",        "q_smem_store",   "q_smem_load", "block_table_load", "k_load",
    "qk_dot",        "qk_group_reduce", "logit_store", "max_reduce",      "exp_sum_reduce",
    "prob_store",    "logit_load",     "v_load",      "accumulate",       "warp_reduce",
    "out_store",     "partition_store", "partition_reduce", "merge",      "stage_output",
    "barrier",       "k_smem_load",    "v_smem_load", "rescale",          "split_arrive",
};
static_assert(std::size(kStepNames) == static_cast<std::size_t>(Step::count_),
              "kStepNames must list every Step of event.hpp, in order");

constexpr const char* kBlockRoleNames[] = {"main", "reduce", "prefix_reduce", "merge", "prefix"};
static_assert(std::size(kBlockRoleNames) == static_cast<std::size_t>(pa::BlockRole::prefix) + 1,
              "kBlockRoleNames must list every BlockRole of pa/index/events.hpp, in order");

// Indexed by the Op / Tensor value (event.hpp); a test compares them with
// pa::trace::to_string and checks that no enumerator was appended.
constexpr const char* kOpNames[] = {"global_load", "global_store", "shared_load", "shared_store", "shuffle",
                                    "barrier",     "compute",      "async_copy",  "mma",          "atomic"};
constexpr const char* kTensorNames[] = {
    "none",       "q",         "k_cache",    "v_cache",    "block_table", "context_lens", "q_smem",  "logits",
    "red_scratch", "out_scratch", "output",   "part_out",   "part_max",    "part_sum",     "state_out", "state_lse",
    "stage_out",  "kv_smem",   "workspace",  "counter",    "prefix_out",  "prefix_lse",   "suffix_out", "suffix_lse"};
constexpr const char* kAskNames[] = {"sectors", "wavefronts", "lane",    "warp",    "byte_offset",
                                     "physical_block", "token", "dim", "threads", "events"};
static_assert(std::size(kAskNames) == static_cast<std::size_t>(kNumExerciseAsks),
              "kAskNames must list every ExerciseAsk of lesson.hpp, in order");

std::string joined(const char* const* names, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += (s.empty() ? "" : " ") + std::string(names[i]);
  return s;
}

std::string joined_block_role_names() {
  std::string s;
  for (const char* n : kBlockRoleNames) s += (s.empty() ? "" : " ") + std::string(n);
  return s;
}
std::string joined_stage_names() {
  std::string s;
  for (const auto& e : kStageNames) s += (s.empty() ? "" : " ") + std::string(e.name);
  return s;
}
std::string joined_step_names() {
  std::string s;
  for (const char* n : kStepNames) s += (s.empty() ? "" : " ") + std::string(n);
  return s;
}

}  // namespace

std::optional<Stage> stage_from_name(std::string_view name) {
  for (const auto& e : kStageNames)
    if (name == e.name) return e.stage;
  return std::nullopt;
}
std::optional<Step> step_from_name(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kStepNames); ++i)
    if (name == kStepNames[i]) return static_cast<Step>(i);
  return std::nullopt;
}
const char* stage_name(Stage stage) {
  for (const auto& e : kStageNames)
    if (e.stage == stage) return e.name;
  return "?";
}
const char* step_name(Step step) {
  const auto i = static_cast<std::size_t>(step);
  return i < std::size(kStepNames) ? kStepNames[i] : "?";
}
std::optional<pa::BlockRole> block_role_from_name(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kBlockRoleNames); ++i)
    if (name == kBlockRoleNames[i]) return static_cast<pa::BlockRole>(i);
  return std::nullopt;
}
const char* block_role_name(pa::BlockRole role) {
  const auto i = static_cast<std::size_t>(role);
  return i < std::size(kBlockRoleNames) ? kBlockRoleNames[i] : "?";
}

namespace {
template <class E, std::size_t N>
std::optional<E> enum_from_name(const char* const (&names)[N], std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
template <class E, std::size_t N>
const char* enum_name(const char* const (&names)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "?";
}
}  // namespace

std::optional<pa::trace::Op> op_from_name(std::string_view name) { return enum_from_name<pa::trace::Op>(kOpNames, name); }
std::optional<pa::trace::Tensor> tensor_from_name(std::string_view name) {
  return enum_from_name<pa::trace::Tensor>(kTensorNames, name);
}
const char* op_name(pa::trace::Op op) { return enum_name(kOpNames, op); }
const char* tensor_name(pa::trace::Tensor tensor) { return enum_name(kTensorNames, tensor); }
std::optional<ExerciseAsk> exercise_ask_from_name(std::string_view name) {
  return enum_from_name<ExerciseAsk>(kAskNames, name);
}
const char* exercise_ask_name(ExerciseAsk ask) { return enum_name(kAskNames, ask); }

std::string plain_text(const std::vector<Span>& spans) {
  std::string s;
  for (const auto& sp : spans) s += sp.text;
  return s;
}

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

// ---- small text helpers -----------------------------------------------------------
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_punct(char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; }

std::string_view trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// Columns of leading whitespace (a tab counts 4) and the byte where text starts.
std::pair<int, std::size_t> leading_indent(std::string_view s) {
  int cols = 0;
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
    cols += s[i] == '\t' ? 4 : 1;
    ++i;
  }
  return {cols, i};
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::vector<std::string_view> split_lines(std::string_view text) {
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

// ---- inline spans -----------------------------------------------------------------
class InlineParser {
 public:
  explicit InlineParser(std::string_view s) : s_(s), escaped_(s.size(), 0) {
    // Backslash escapes, resolved once left to right so every scan agrees.
    for (std::size_t i = 0; i + 1 < s_.size(); ++i) {
      if (s_[i] == '\\' && !escaped_[i] && is_punct(s_[i + 1])) escaped_[i + 1] = 1;
    }
    // Candidate closers, ascending positions.
    for (std::size_t i = 0; i < s_.size(); ++i) {
      const char c = s_[i];
      if (escaped_[i]) continue;
      if (c == '`') {
        std::size_t j = i;
        while (j < s_.size() && s_[j] == '`') ++j;
        ticks_[j - i].push_back(i);
        i = j - 1;
        continue;
      }
      if (c == ']') brackets_.push_back(i);
      if (c == ')') parens_.push_back(i);
      if (c == '*' || c == '_') {
        const bool prev_space = i == 0 || is_space(s_[i - 1]);
        const bool next_alnum = i + 1 < s_.size() && is_alnum(s_[i + 1]);
        const bool dbl = i + 1 < s_.size() && s_[i + 1] == c && !escaped_[i + 1];
        const bool prev_same = i > 0 && s_[i - 1] == c && !escaped_[i - 1];
        const int k = c == '*' ? 0 : 2;
        if (dbl) {
          // "**" closer: preceded by non-space; "__" also not followed by a letter.
          const bool next2_alnum = i + 2 < s_.size() && is_alnum(s_[i + 2]);
          if (!prev_space && (c == '*' || !next2_alnum)) closers_[k + 1].push_back(i);
        } else if (!prev_same) {
          if (!prev_space && (c == '*' || !next_alnum)) closers_[k].push_back(i);
        }
      }
    }
  }

  std::vector<Span> parse() {
    std::size_t i = 0;
    while (i < s_.size()) {
      const char c = s_[i];
      if (c == '\\' && !escaped_[i] && i + 1 < s_.size() && escaped_[i + 1]) {
        text_ += s_[i + 1];
        i += 2;
        continue;
      }
      if (escaped_[i]) {  // unreachable by construction; keep the loop total
        text_ += c;
        ++i;
        continue;
      }
      if (c == '`') {
        i = code_span(i);
        continue;
      }
      if (c == '[' || (c == '!' && i + 1 < s_.size() && s_[i + 1] == '[')) {
        i = link(i);
        continue;
      }
      if (c == '*' || c == '_') {
        i = emphasis(i);
        continue;
      }
      text_ += c;
      ++i;
    }
    flush();
    return std::move(spans_);
  }

 private:
  // First entry of a sorted list greater or equal to pos, npos if none.
  static std::size_t next_in(const std::vector<std::size_t>& v, std::size_t pos) {
    auto it = std::lower_bound(v.begin(), v.end(), pos);
    return it == v.end() ? std::string_view::npos : *it;
  }

  void flush() {
    if (!text_.empty()) {
      if (!spans_.empty() && spans_.back().kind == SpanKind::plain) {
        spans_.back().text += text_;
      } else {
        spans_.push_back({SpanKind::plain, std::move(text_), {}});
      }
      text_.clear();
    }
  }
  void push(SpanKind kind, std::string text, std::string url = {}) {
    flush();
    spans_.push_back({kind, std::move(text), std::move(url)});
  }

  // Text with escapes resolved, markup kept as characters.
  std::string unescape(std::size_t b, std::size_t e) const {
    std::string out;
    out.reserve(e - b);
    for (std::size_t i = b; i < e; ++i) {
      if (s_[i] == '\\' && !escaped_[i] && i + 1 < e && escaped_[i + 1]) continue;
      out += s_[i];
    }
    return out;
  }

  std::size_t code_span(std::size_t i) {
    std::size_t j = i;
    while (j < s_.size() && s_[j] == '`') ++j;
    const std::size_t n = j - i;
    auto it = ticks_.find(n);
    const std::size_t close = it == ticks_.end() ? std::string_view::npos : next_in(it->second, j);
    if (close == std::string_view::npos) {
      text_.append(n, '`');
      return j;
    }
    std::string_view body = s_.substr(j, close - j);
    if (body.size() >= 2 && body.front() == ' ' && body.back() == ' ' && trim(body).size() > 0) {
      body = body.substr(1, body.size() - 2);
    }
    push(SpanKind::code, std::string(body));
    return close + n;
  }

  std::size_t link(std::size_t i) {
    const std::size_t open = s_[i] == '!' ? i + 1 : i;
    const std::size_t close = next_in(brackets_, open + 1);
    if (close == std::string_view::npos || close + 1 >= s_.size() || s_[close + 1] != '(') {
      text_ += s_[i];
      return i + 1;
    }
    const std::size_t paren = next_in(parens_, close + 2);
    if (paren == std::string_view::npos) {
      text_ += s_[i];
      return i + 1;
    }
    std::string label = unescape(open + 1, close);
    std::string url(trim(s_.substr(close + 2, paren - close - 2)));
    push(SpanKind::link, std::move(label), std::move(url));
    return paren + 1;
  }

  std::size_t emphasis(std::size_t i) {
    const char c = s_[i];
    const bool dbl = i + 1 < s_.size() && s_[i + 1] == c && !escaped_[i + 1];
    const std::size_t n = dbl ? 2 : 1;
    const std::size_t body = i + n;
    // Opener rules: text follows at once; '_' must not sit inside a word (snake_case).
    const bool prev_alnum = i > 0 && is_alnum(s_[i - 1]);
    const bool ok_open = body < s_.size() && !is_space(s_[body]) && s_[body] != c &&
                         (c == '*' || !prev_alnum);
    if (!ok_open) {
      text_.append(n, c);
      return body;
    }
    const int k = (c == '*' ? 0 : 2) + (dbl ? 1 : 0);
    const std::size_t close = next_in(closers_[k], body + 1);
    if (close == std::string_view::npos) {
      text_.append(n, c);
      return body;
    }
    push(dbl ? SpanKind::strong : SpanKind::emphasis, unescape(body, close));
    return close + n;
  }

  std::string_view s_;
  std::vector<char> escaped_;
  std::map<std::size_t, std::vector<std::size_t>> ticks_;  // run length -> run starts
  std::vector<std::size_t> brackets_, parens_;
  std::array<std::vector<std::size_t>, 4> closers_;  // *, **, _, __
  std::string text_;
  std::vector<Span> spans_;
};

std::vector<Span> parse_inline(std::string_view s) { return InlineParser(trim(s)).parse(); }

// ---- block structure --------------------------------------------------------------
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

bool valid_anchor_name(std::string_view n) {
  if (n.empty() || n.size() > 128) return false;
  for (char c : n)
    if (!is_alnum(c) && c != '_' && c != '.' && c != '-') return false;
  return true;
}

// The whitespace-separated words of a directive comment's body.
std::vector<std::string_view> directive_tokens(std::string_view body) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && is_space(body[i])) ++i;
    std::size_t b = i;
    while (i < body.size() && !is_space(body[i])) ++i;
    if (i > b) tokens.push_back(body.substr(b, i - b));
  }
  return tokens;
}

constexpr const char* kStepForm = "<!-- pa:step stage=NAME step=NAME anchor=NAME [block=ROLE] -->";
constexpr const char* kExerciseForm =
    "<!-- pa:exercise id=ID ask=WHAT [step=STEP] [block=ROLE] [op=OP] [tensor=TENSOR] [select=KEY=N,...] -->";

// <!-- pa:step key=value ... -->  (body = the text between <!-- and -->).
StepMarker parse_marker(std::string_view body, const std::string& file, int line) {
  const std::vector<std::string_view> tokens = directive_tokens(body);
  if (tokens.empty() || tokens[0] != "pa:step") {
    throw LessonError(file, line,
                      "unknown lesson directive '" + std::string(tokens.empty() ? "" : tokens[0]).substr(0, 64) +
                          "' (accepted: " + kStepForm + ", " + kExerciseForm + ")");
  }
  StepMarker m;
  m.line = line;
  bool have_stage = false, have_step = false, have_anchor = false;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    std::string_view tok = tokens[t];
    const std::size_t eq = tok.find('=');
    const std::string shown(tok.substr(0, 64));
    if (eq == std::string_view::npos || eq == 0) {
      throw LessonError(file, line, "pa:step: expected key=value, got '" + shown +
                                        "' (keys: stage step anchor block)");
    }
    std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty()) {
      throw LessonError(file, line, "pa:step: empty value for '" + std::string(key.substr(0, 64)) + "'");
    }
    const std::string v(value.substr(0, 128));
    if (key == "stage") {
      if (have_stage) throw LessonError(file, line, "pa:step: 'stage' given twice");
      auto s = stage_from_name(value);
      if (!s) {
        throw LessonError(file, line, "pa:step: unknown stage '" + v + "' (accepted: " + joined_stage_names() + ")");
      }
      m.stage = *s;
      m.stage_name = v;
      have_stage = true;
    } else if (key == "step") {
      if (have_step) throw LessonError(file, line, "pa:step: 'step' given twice");
      auto s = step_from_name(value);
      if (!s || *s == Step::count_) {
        throw LessonError(file, line, "pa:step: unknown step '" + v + "' (accepted: " + joined_step_names() + ")");
      }
      m.step = *s;
      m.step_name = v;
      have_step = true;
    } else if (key == "anchor") {
      if (have_anchor) throw LessonError(file, line, "pa:step: 'anchor' given twice");
      if (!valid_anchor_name(value)) {
        throw LessonError(file, line, "pa:step: bad anchor name '" + v +
                                          "' (accepted: 1-128 characters of A-Z a-z 0-9 _ . -)");
      }
      m.anchor = v;
      have_anchor = true;
    } else if (key == "block") {
      if (m.block) throw LessonError(file, line, "pa:step: 'block' given twice");
      m.block = block_role_from_name(value);
      if (!m.block) {
        throw LessonError(file, line, "pa:step: unknown block '" + v + "' (accepted: " + joined_block_role_names() +
                                          ")");
      }
    } else {
      throw LessonError(file, line, "pa:step: unknown key '" + std::string(key.substr(0, 64)) +
                                        "' (keys: stage step anchor block)");
    }
  }
  if (!have_stage || !have_step || !have_anchor) {
    std::string missing;
    if (!have_stage) missing += " stage";
    if (!have_step) missing += " step";
    if (!have_anchor) missing += " anchor";
    throw LessonError(file, line, "pa:step: missing" + missing + " (form: " + kStepForm + ")");
  }
  return m;
}

constexpr const char* kSelectKeys = "warp lane iter occurrence token dim seq head partition logical_block";

// select=KEY=N,KEY=N,...: every key once, every N a whole number in [0, 2^30).
ExerciseSelect parse_select(std::string_view value, const std::string& file, int line) {
  ExerciseSelect sel;
  std::size_t b = 0;
  while (b <= value.size()) {
    std::size_t e = value.find(',', b);
    if (e == std::string_view::npos) e = value.size();
    const std::string_view item = value.substr(b, e - b);
    const std::size_t eq = item.find('=');
    const std::string shown(item.substr(0, 64));
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size()) {
      throw LessonError(file, line, "pa:exercise: select item '" + shown + "' is not KEY=N (keys: " + kSelectKeys + ")");
    }
    const std::string_view key = item.substr(0, eq), num = item.substr(eq + 1);
    std::optional<int>* slot = key == "warp"            ? &sel.warp
                               : key == "lane"          ? &sel.lane
                               : key == "iter"          ? &sel.iter
                               : key == "occurrence"    ? &sel.occurrence
                               : key == "token"         ? &sel.token
                               : key == "dim"           ? &sel.dim
                               : key == "seq"           ? &sel.seq
                               : key == "head"          ? &sel.head
                               : key == "partition"     ? &sel.partition
                               : key == "logical_block" ? &sel.logical_block
                                                        : nullptr;
    if (!slot) {
      throw LessonError(file, line, "pa:exercise: unknown select key '" + std::string(key.substr(0, 64)) +
                                        "' (keys: " + kSelectKeys + ")");
    }
    if (slot->has_value()) {
      throw LessonError(file, line, "pa:exercise: select key '" + std::string(key) + "' given twice");
    }
    long long n = 0;
    bool ok = !num.empty() && num.size() <= 10;
    for (char c : num) {
      if (!is_digit(c)) ok = false;
      if (ok) n = n * 10 + (c - '0');
    }
    if (!ok || n >= (1ll << 30)) {
      throw LessonError(file, line, "pa:exercise: select " + std::string(key) + "='" +
                                        std::string(num.substr(0, 64)) + "' is not a whole number in [0, 2^30)");
    }
    *slot = static_cast<int>(n);
    b = e + 1;
  }
  return sel;
}

// <!-- pa:exercise key=value ... -->  (body = the text between <!-- and -->).
ExerciseMarker parse_exercise(std::string_view body, const std::string& file, int line) {
  const std::vector<std::string_view> tokens = directive_tokens(body);
  ExerciseMarker m;
  m.line = line;
  bool have_id = false, have_ask = false, have_select = false;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    std::string_view tok = tokens[t];
    const std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw LessonError(file, line, "pa:exercise: expected key=value, got '" + std::string(tok.substr(0, 64)) +
                                        "' (form: " + kExerciseForm + ")");
    }
    const std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    const std::string k(key.substr(0, 64)), v(value.substr(0, 128));
    if (value.empty()) throw LessonError(file, line, "pa:exercise: empty value for '" + k + "'");
    auto once = [&](bool given) {
      if (given) throw LessonError(file, line, "pa:exercise: '" + k + "' given twice");
    };
    if (key == "id") {
      once(have_id);
      if (value.size() > 64 || !valid_anchor_name(value)) {
        throw LessonError(file, line, "pa:exercise: bad id '" + v + "' (accepted: 1-64 characters of A-Z a-z 0-9 _ . -)");
      }
      m.id = v;
      have_id = true;
    } else if (key == "ask") {
      once(have_ask);
      const auto a = exercise_ask_from_name(value);
      if (!a) {
        throw LessonError(file, line, "pa:exercise: unknown ask '" + v + "' (accepted: " +
                                          joined(kAskNames, std::size(kAskNames)) + ")");
      }
      m.ask = *a;
      have_ask = true;
    } else if (key == "step") {
      once(m.step.has_value());
      const auto st = step_from_name(value);
      if (!st || *st == Step::count_) {
        throw LessonError(file, line, "pa:exercise: unknown step '" + v + "' (accepted: " + joined_step_names() + ")");
      }
      m.step = *st;
    } else if (key == "block") {
      once(m.block.has_value());
      m.block = block_role_from_name(value);
      if (!m.block) {
        throw LessonError(file, line, "pa:exercise: unknown block '" + v + "' (accepted: " +
                                          joined_block_role_names() + ")");
      }
    } else if (key == "op") {
      once(m.op.has_value());
      m.op = op_from_name(value);
      if (!m.op) {
        throw LessonError(file, line, "pa:exercise: unknown op '" + v + "' (accepted: " +
                                          joined(kOpNames, std::size(kOpNames)) + ")");
      }
    } else if (key == "tensor") {
      once(m.tensor.has_value());
      m.tensor = tensor_from_name(value);
      if (!m.tensor) {
        throw LessonError(file, line, "pa:exercise: unknown tensor '" + v + "' (accepted: " +
                                          joined(kTensorNames, std::size(kTensorNames)) + ")");
      }
    } else if (key == "select") {
      once(have_select);
      m.select = parse_select(value, file, line);
      have_select = true;
    } else {
      throw LessonError(file, line, "pa:exercise: unknown key '" + k + "' (keys: id ask step block op tensor select)");
    }
  }
  if (!have_id || !have_ask) {
    throw LessonError(file, line, std::string("pa:exercise: missing") + (have_id ? "" : " id") +
                                      (have_ask ? "" : " ask") + " (form: " + kExerciseForm + ")");
  }
  const bool table_lookup = m.ask == ExerciseAsk::physical_block && !m.step &&
                            (m.select.token || m.select.logical_block);
  if (!m.step && !table_lookup) {
    throw LessonError(file, line, "pa:exercise: ask=" + std::string(exercise_ask_name(m.ask)) +
                                      " needs step=STEP (only ask=physical_block with select token= or "
                                      "logical_block= reads the block table without one)");
  }
  if ((m.ask == ExerciseAsk::sectors || m.ask == ExerciseAsk::wavefronts) && !m.select.warp) {
    throw LessonError(file, line, "pa:exercise: ask=" + std::string(exercise_ask_name(m.ask)) +
                                      " needs select warp=W (a memory request is one warp's)");
  }
  return m;
}

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
      no_question("'" + std::string(trim(line).substr(0, 40)) + "' at line " + std::to_string(lineno()));
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
      const bool exercise = directive_tokens(t).front() == "pa:exercise";
      if (!closed) {
        throw LessonError(file_, start, std::string(exercise ? "pa:exercise" : "pa:step") +
                                            " marker comment is not closed with -->");
      }
      if (exercise) {
        ExerciseMarker m = parse_exercise(t, file_, start);
        if (const auto it = exercise_lines_.find(m.id); it != exercise_lines_.end()) {
          throw LessonError(file_, start, "pa:exercise: id '" + m.id + "' already used at line " +
                                              std::to_string(it->second) + " (ids are unique in a lesson)");
        }
        exercise_lines_.emplace(m.id, start);
        pending_exercise_ = std::move(m);
      } else {
        pending_.push_back(parse_marker(t, file_, start));
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
    bool first = true;
    while (i_ < lines_.size() && is_table_row(lines_[i_])) {
      if (!(b.rows.size() == 1 && is_table_delimiter(lines_[i_]))) {
        b.rows.push_back(table_cells(lines_[i_]));
      }
      first = false;
      ++i_;
    }
    (void)first;
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

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw LessonError(path, 0, "is a directory, not a file");
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

Document parse_lesson(std::string_view text, const std::string& file) {
  if (text.size() > kMaxLessonBytes) {
    throw LessonError(file, 0, "input is " + std::to_string(text.size()) + " bytes; at most " +
                                   std::to_string(kMaxLessonBytes) + " accepted");
  }
  return BlockParser(text, file).run();
}

Document load_lesson(const std::string& path) { return parse_lesson(read_file(path), path); }

// ---- lesson list ------------------------------------------------------------------
std::vector<LessonEntry> list_lessons(const std::string& dir) {
  namespace fs = std::filesystem;
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

// ---- anchors ----------------------------------------------------------------------
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

std::optional<AnchorRange> find_anchor(const std::string& path, std::string_view name) {
  for (auto& a : scan_anchors(read_file(path), path))
    if (a.name == name) return a;
  return std::nullopt;
}

std::optional<AnchorRange> find_anchor_in_dir(const std::string& dir, std::string_view name) {
  namespace fs = std::filesystem;
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
