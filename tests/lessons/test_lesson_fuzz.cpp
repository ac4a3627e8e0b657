// Seeded mutation fuzzing of the lesson parser and the anchor scanner: inputs
// grown from seed lessons (and the real lessons/ files) by byte flips,
// Markdown-token insertions, deletions, duplications and splices. Every input
// must parse or fail with a LessonError; no other exception, no crash (run it
// under ASan/UBSan: PA_SANITIZE=ON), no input slower than a bound (a hang
// guard, not a speed number), and output size linear in the input size.
//
// Budget (environment): PA_FUZZ_SECONDS (default 20; 0 = no time limit),
// PA_FUZZ_ITERS (default 0 = no count limit), PA_FUZZ_SEED (default 20261122).
// The long run is documented in lessons/FUZZING.md.
#include <catch2/catch_test_macros.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "pa/lessons/lesson.hpp"

using namespace pa::lesson;

namespace {

const char* const kTokens[] = {
    "<!--", "-->", "<!-- pa:step stage=qk step=k_load anchor=qk.k_load -->", "pa:step", "stage=", "step=",
    "anchor=", "qk", "k_load", "```", "~~~", "```cpp\n", "`", "``", "*", "**", "_", "__", "[", "]", "](", "(",
    ")", "![", "|", "|---|---|\n", "> ", "- ", "* ", "1. ", "9999999999. ", "# ", "###### ", "####### ",
    "<details>", "</details>", "<summary>", "</summary>", "\n", "\n\n", "\r\n", "\t", "  ", "\\", "---\n",
    "LESSON-BEGIN(", "LESSON-END(", "a.b", "\"", "=", "\0", "\xff", "\xc3\xa9",
    "<!-- pa:exercise id=e ask=lane step=k_load select=token=3 -->\n", "pa:exercise", "ask=", "id=", "select=",
    "warp=0,", "occurrence=", "16) ", "1) ",
};

const char* const kSeeds[] = {
    "# Title\n\nSome *text* with **strong**, `code` and a [link](u).\n",
    "# L\n<!-- pa:step stage=qk step=k_load anchor=qk.k_load -->\n## K\n- a\n  - b\n1. c\n",
    "```cpp\nint x = 1;\n```\n> quote *q*\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    "<details><summary>Answer</summary>\n\nIt is `8`.\n</details>\n---\n",
    "<!-- multi\nline\ncomment -->\ntext\n<!-- pa:step stage=lv step=v_load anchor=lv.v_load -->\n# h\n",
    "// LESSON-BEGIN(a.b)\ncode\n// LESSON-BEGIN(c)\n// LESSON-END(c)\n// LESSON-END(a.b)\n",
    "__a__ _b_ snake_case \\*esc\\* ``a`b`` ![i](p) [x] (y)\n",
    "## Ex\n<!-- pa:exercise id=s ask=sectors step=k_load op=global_load select=warp=0,iter=0,occurrence=0 -->\n"
    "How many?\n\n<!-- pa:exercise id=t ask=physical_block select=seq=0,token=57 -->\n2. Which block?\n"
    "wrapped\n16) not an item\n",
};

struct Budget {
  double seconds = 20;
  std::uint64_t iters = 0;
  std::uint64_t seed = 20261122;
};

Budget budget_from_env() {
  Budget b;
  if (const char* s = std::getenv("PA_FUZZ_SECONDS")) b.seconds = std::atof(s);
  if (const char* s = std::getenv("PA_FUZZ_ITERS")) b.iters = std::strtoull(s, nullptr, 10);
  if (const char* s = std::getenv("PA_FUZZ_SEED")) b.seed = std::strtoull(s, nullptr, 10);
  return b;
}

std::vector<std::string> corpus() {
  std::vector<std::string> c(std::begin(kSeeds), std::end(kSeeds));
#ifdef PA_LESSONS_DIR
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(PA_LESSONS_DIR, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".md") continue;
    std::ifstream in(it->path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    c.push_back(ss.str());
  }
#endif
  return c;
}

std::string mutate(const std::vector<std::string>& pool, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  std::string s = pool[pick(pool.size())];
  const int rounds = 1 + static_cast<int>(pick(8));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(7)) {
      case 0:  // flip a byte
        if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 1: {  // insert a token
        const char* t = kTokens[pick(std::size(kTokens))];
        std::string tok = t[0] == '\0' ? std::string(1, '\0') : std::string(t);
        s.insert(pick(s.size() + 1), tok);
        break;
      }
      case 2:  // delete a range
        if (!s.empty()) {
          const std::size_t b = pick(s.size());
          s.erase(b, 1 + pick(std::min<std::size_t>(s.size() - b, 64)));
        }
        break;
      case 3:  // duplicate a range
        if (!s.empty() && s.size() < 64 * 1024) {
          const std::size_t b = pick(s.size());
          const std::size_t n = 1 + pick(std::min<std::size_t>(s.size() - b, 256));
          s.insert(pick(s.size() + 1), s.substr(b, n));
        }
        break;
      case 4: {  // splice with another corpus entry
        const std::string& o = pool[pick(pool.size())];
        const std::size_t cut = pick(s.size() + 1);
        s = s.substr(0, cut) + o.substr(pick(o.size() + 1));
        break;
      }
      case 5: {  // repeat a token many times (deep/long constructs)
        std::string tok(kTokens[pick(std::size(kTokens))]);
        std::string rep;
        for (std::size_t k = 0, n = 1 + pick(2000); k < n; ++k) rep += tok;
        s.insert(pick(s.size() + 1), rep);
        break;
      }
      default:  // insert random bytes
        for (std::size_t k = 0, n = 1 + pick(8); k < n; ++k)
          s.insert(pick(s.size() + 1), 1, static_cast<char>(rng()));
    }
  }
  if (s.size() > 256 * 1024) s.resize(256 * 1024);
  return s;
}

std::size_t spans_bytes(const std::vector<Span>& v) {
  std::size_t n = v.size() * sizeof(Span);
  for (const auto& s : v) n += s.text.size() + s.url.size();
  return n;
}
std::size_t block_bytes(const Block& b) {
  std::size_t n = sizeof(Block) + spans_bytes(b.spans) + b.code.size() + b.info.size() + b.language.size();
  for (const auto& r : b.rows)
    for (const auto& c : r) n += sizeof(c) + spans_bytes(c);
  for (const auto& c : b.children) n += block_bytes(c);
  return n;
}

// An exercise block holds its marker and exactly one question after it;
// other blocks hold no marker.
void check_exercise(const Block& b) {
  REQUIRE((b.kind == BlockKind::exercise) == b.exercise.has_value());
  if (b.kind != BlockKind::exercise) return;
  REQUIRE(!b.exercise->id.empty());
  REQUIRE(b.exercise->line == b.line);
  REQUIRE(b.children.size() == 1);
  const Block& q = b.children[0];
  REQUIRE((q.kind == BlockKind::paragraph || q.kind == BlockKind::bullet_item || q.kind == BlockKind::numbered_item));
  REQUIRE(q.line > b.line);
  REQUIRE((b.exercise->step.has_value() || b.exercise->ask == ExerciseAsk::physical_block));
}

// Structural invariants of any successful parse.
void check_document(const Document& d, const std::string& input) {
  int lines = 1;
  for (char c : input) lines += c == '\n';
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < d.sections.size(); ++i) {
    const auto& s = d.sections[i];
    REQUIRE(s.level >= 0);
    REQUIRE(s.level <= 6);
    REQUIRE((s.level == 0) == (i == 0 && s.line == 0));
    REQUIRE(s.line <= lines);
    bytes += sizeof(Section) + spans_bytes(s.heading);
    for (const auto& m : s.markers) {
      REQUIRE(m.line >= 1);
      REQUIRE(m.line <= s.line);
      REQUIRE(!m.anchor.empty());
    }
    for (const auto& b : s.blocks) {
      REQUIRE(b.line >= 1);
      REQUIRE(b.line <= lines);
      REQUIRE(b.indent >= 0);
      REQUIRE(b.indent <= 8);
      for (const auto& c : b.children) REQUIRE(c.kind != BlockKind::details);
      check_exercise(b);
      for (const auto& c : b.children) check_exercise(c);
      bytes += block_bytes(b);
    }
  }
  std::size_t exercises = 0;
  for (const auto& sec : d.sections)
    for (const auto& b : sec.blocks) {
      exercises += b.kind == BlockKind::exercise;
      for (const auto& c : b.children) exercises += c.kind == BlockKind::exercise;
    }
  REQUIRE(d.exercises().size() == exercises);
  // Memory linear in the input: at most ~100 bytes of document per input byte.
  REQUIRE(bytes <= 100 * input.size() + 4096);
}

}  // namespace

TEST_CASE("lesson parser survives seeded mutations", "[lesson][fuzz]") {
  const Budget budget = budget_from_env();
  const auto pool = corpus();
  std::mt19937_64 rng(budget.seed);
  const auto t0 = std::chrono::steady_clock::now();
  std::uint64_t n = 0, parsed = 0, rejected = 0, anchors_ok = 0, with_exercises = 0;
  double worst_ms = 0;
  std::size_t worst_size = 0;
  while (true) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (budget.seconds > 0 && elapsed >= budget.seconds) break;
    if (budget.iters > 0 && n >= budget.iters) break;
    const std::string input = mutate(pool, rng);
    const auto a = std::chrono::steady_clock::now();
    try {
      Document d = parse_lesson(input, "fuzz.md");
      ++parsed;
      with_exercises += !d.exercises().empty();
      check_document(d, input);
    } catch (const LessonError& e) {
      ++rejected;
      REQUIRE(e.line() >= 0);
      REQUIRE(std::string(e.what()).rfind("fuzz.md:", 0) == 0);
    }
    try {
      auto ranges = scan_anchors(input, "fuzz.cuh");
      for (const auto& r : ranges) REQUIRE(r.begin_line < r.end_line);
      ++anchors_ok;
    } catch (const LessonError&) {
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    if (ms > worst_ms) {
      worst_ms = ms;
      worst_size = input.size();
    }
    // Hang guard: a 256 KiB input parses in a few ms; a second means a runaway loop.
    if (ms > 2000) {
      FAIL("input " << n << " (seed " << budget.seed << ", " << input.size() << " bytes) took " << ms << " ms");
    }
    ++n;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WARN("fuzz: seed " << budget.seed << ", " << n << " inputs in " << secs << " s (" << parsed << " parsed, "
                     << rejected << " rejected with LessonError, " << anchors_ok << " anchor scans clean, "
                     << with_exercises << " parsed with exercises); slowest " << worst_ms << " ms at " << worst_size
                     << " bytes");
  CHECK(n > 0);
  // The mutations reach the exercise markers (the seeds and lessons have them).
  if (n >= 1000) CHECK(with_exercises > 0);
}

TEST_CASE("pathological inputs stay linear", "[lesson]") {
  // Unmatched openers and long runs: each would be quadratic with naive rescans.
  for (const char* tok : {"*a", "[", "`", "**x", "_y", "![", "``", "<!--", "> ", "- ", "|", "# ", "```\n", "\\"}) {
    std::string s;
    while (s.size() < 512 * 1024) s += tok;
    const auto a = std::chrono::steady_clock::now();
    try {
      parse_lesson(s, "p.md");
    } catch (const LessonError&) {
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
    INFO("token '" << tok << "': " << ms << " ms");
    CHECK(ms < 3000);
  }
}
