// Inline Markdown: code spans, strong and emphasis, links and images,
// backslash escapes. Written to be total and linear: escapes are resolved
// once, and every closer a span may end at is listed (by position) before
// parsing, so an opener finds its closer by binary search and an unmatched
// one costs O(log n) instead of a rescan of the rest of the paragraph.
#include "inline_spans.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "text.hpp"

namespace pa::lesson {

std::string plain_text(const std::vector<Span>& spans) {
  std::string s;
  for (const auto& sp : spans) s += sp.text;
  return s;
}

namespace detail {
namespace {

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

}  // namespace

std::vector<Span> parse_inline(std::string_view s) { return InlineParser(trim(s)).parse(); }

}  // namespace detail
}  // namespace pa::lesson
