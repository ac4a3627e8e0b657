// A strict JSON reader for tests that check what the lab writes: it accepts
// exactly RFC 8259 JSON (UTF-8 text; no trailing commas, comments, NaN,
// leading zeros, raw control characters or lone surrogates) and returns a
// tree that keeps each number's literal, so a test can compare values
// exactly. Any violation throws std::runtime_error naming the byte offset.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pa::test {

struct JsonValue {
  enum Kind { null, boolean, number, string, array, object } kind = null;
  std::string text;  // number: the literal; string: the decoded value; boolean: "true" / "false"
  std::vector<JsonValue> items;                             // array
  std::vector<std::pair<std::string, JsonValue>> members;  // object, in file order

  // Declared, so that clang with libstdc++ does not ask whether the pair
  // above is default-constructible while JsonValue is still incomplete.
  JsonValue() = default;

  const JsonValue* find(std::string_view key) const {
    for (const auto& [k, v] : members)
      if (k == key) return &v;
    return nullptr;
  }
  const JsonValue& at(std::string_view key) const {
    if (const JsonValue* v = find(key)) return *v;
    throw std::runtime_error("JSON: no member '" + std::string(key) + "'");
  }
};

class StrictJson {
 public:
  static JsonValue parse(std::string_view text) {
    StrictJson p(text);
    JsonValue v = p.value(0);
    p.ws();
    if (p.i_ != p.s_.size()) p.fail("trailing characters after the value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;
  explicit StrictJson(std::string_view s) : s_(s) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("JSON: " + what + " at byte " + std::to_string(i_));
  }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void ws() {
    while (!at_end() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t')) ++i_;
  }
  void expect(char c) {
    ws();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  void literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) fail("unexpected character");
    i_ += word.size();
  }

  JsonValue value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    ws();
    if (at_end()) fail("unexpected end");
    JsonValue v;
    const char c = peek();
    if (c == '{') {
      ++i_;
      v.kind = JsonValue::object;
      ws();
      if (peek() == '}') {
        ++i_;
        return v;
      }
      for (;;) {
        ws();
        std::string key = string();
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      ++i_;
      v.kind = JsonValue::array;
      ws();
      if (peek() == ']') {
        ++i_;
        return v;
      }
      for (;;) {
        v.items.push_back(value(depth + 1));
        ws();
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = JsonValue::string;
      v.text = string();
    } else if (c == 't' || c == 'f') {
      v.kind = JsonValue::boolean;
      v.text = c == 't' ? "true" : "false";
      literal(v.text);
    } else if (c == 'n') {
      literal("null");
    } else {
      v.kind = JsonValue::number;
      v.text = number();
    }
    return v;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  std::string number() {
    const std::size_t b = i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (!at_end() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == d) fail("a digit expected in a number");
      return i_ - d;
    };
    if (peek() == '-') ++i_;
    if (peek() == '0') {
      ++i_;
      if (peek() >= '0' && peek() <= '9') fail("leading zero in a number");
    } else {
      digits();
    }
    if (peek() == '.') {
      ++i_;
      digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      ++i_;
      if (peek() == '+' || peek() == '-') ++i_;
      digits();
    }
    return std::string(s_.substr(b, i_ - b));
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int k = 0; k < 4; ++k, ++i_) {
      const char h = peek();
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<unsigned>(h - 'A' + 10);
      else fail("bad \\u escape");
    }
    return v;
  }

  static void put_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // One UTF-8 sequence copied as it is, after checking it is well formed.
  void utf8_char(std::string& out) {
    const auto c = static_cast<unsigned char>(s_[i_]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (extra < 0 || i_ + extra >= s_.size()) fail("invalid UTF-8");
    unsigned cp = extra == 0 ? c : c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto t = static_cast<unsigned char>(s_[i_ + k]);
      if ((t & 0xc0) != 0x80) fail("invalid UTF-8");
      cp = cp << 6 | (t & 0x3f);
    }
    static constexpr unsigned kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("invalid UTF-8");
    out.append(s_.substr(i_, static_cast<std::size_t>(extra) + 1));
    i_ += static_cast<std::size_t>(extra) + 1;
  }

  std::string string() {
    if (peek() != '"') fail("expected a string");
    ++i_;
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return out;
      }
      if (c < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        utf8_char(out);
        continue;
      }
      ++i_;
      const char e = peek();
      ++i_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) fail("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (s_.substr(i_, 2) != "\\u") fail("high surrogate without its low half");
            i_ += 2;
            const unsigned lo = hex4();
            if (lo < 0xdc00 || lo > 0xdfff) fail("high surrogate without its low half");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          put_utf8(out, cp);
          break;
        }
        default: --i_; fail("bad escape");
      }
    }
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace pa::test
