// Measured figures in the lessons and the README: every number quoted from a
// benchmark file is written as a citation (a Markdown link whose text is the
// figure and whose target names the file and the value in it), and this test
// checks each one against that file, at the file's precision. The convention
// is described in lessons/README.md ("Measured figures"); in short:
//
//   [156.7 us](../assets/bench/nvidia-h100.json#rows:kernel=v1,dtype=fp16,seqs=8,context=4096:median_us)
//   [2985 GB/s](../assets/bench/nvidia-h100.json#copy_gbps)
//   [30.0x](../assets/bench/nvidia-h100.json#cascade:dtype=fp16:speedup)
//   [16](../assets/bench/nvidia-h100.json#rows:kernel=optimized,dtype=fp16,seqs=1,context=4096:plan.splits)
//   [139.9 us](../trace/results/h100/stage_times_b0a9dbf.txt#run:stage=qk,seqs=8:median_ms)
//   [13.504 us](../assets/timelines/nvidia-h200/summary.json#timelines:file=opt_1x4096:window_us)
//
// It also checks that every pa-bench file cited or named anywhere in the
// lessons and the README is the current one: the file the README's results
// table is generated from (scripts/bench_table.py writes "raw data: `FILE`").
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/lessons/lesson.hpp"
#include "pa/lessons/markers.hpp"
#include "strict_json.hpp"

using namespace pa::lesson;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = fs::path(PA_LESSONS_DIR).parent_path();

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The figure files are read with the tests' strict JSON reader, which keeps
// each number's literal (the literal's digits are the file's precision).
using Json = pa::test::JsonValue;

// ---- a pa-lab run log: runs start with "== pa-lab run --flag value ..." -------
struct LogRun {
  std::map<std::string, std::string> flags;   // "stage" -> "qk"
  std::map<std::string, std::string> fields;  // "median_ms" -> "0.1399"
  int line = 0;
};

std::vector<LogRun> parse_log(const std::string& text) {
  std::vector<LogRun> runs;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  const std::regex time_re(R"(^time:\s+median\s+([0-9.]+)\s+ms\b)");
  const std::regex traffic_re(R"(->\s+([0-9.]+)\s+GB/s\s+=\s+([0-9.]+)%.*\(([0-9.]+)\s+GB/s)");
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("== ", 0) == 0) {
      runs.emplace_back();
      runs.back().line = n;
      if (line.rfind("== pa-lab run ", 0) != 0) continue;  // another tool: no flags, never matches a filter
      std::istringstream words(line.substr(3));
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      for (std::size_t i = 0; i < w.size(); ++i) {
        if (w[i].rfind("--", 0) != 0) continue;
        const bool has_value = i + 1 < w.size() && w[i + 1].rfind("--", 0) != 0;
        runs.back().flags[w[i].substr(2)] = has_value ? w[i + 1] : "";
      }
      continue;
    }
    if (runs.empty()) continue;
    std::smatch m;
    if (std::regex_search(line, m, time_re) && !runs.back().fields.count("median_ms")) {
      runs.back().fields["median_ms"] = m[1];
    } else if (line.rfind("traffic:", 0) == 0 && std::regex_search(line, m, traffic_re) &&
               !runs.back().fields.count("gbps")) {
      runs.back().fields["gbps"] = m[1];
      runs.back().fields["pct_copy"] = m[2];
      runs.back().fields["copy_gbps"] = m[3];
    }
  }
  return runs;
}

// ---- the cited value ------------------------------------------------------------
struct Cited {
  std::string literal;  // the number as the file writes it
  std::string field;    // its name (decides the unit)
};

std::vector<std::pair<std::string, std::string>> parse_filters(const std::string& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const KeyValue& kv : split_key_values(s)) {
    if (!kv.ok) throw std::runtime_error("filter '" + std::string(kv.item) + "' is not KEY=VALUE");
    out.emplace_back(kv.key, kv.value);
  }
  return out;
}

// "splits=16 split_blocks=16 ..." -> the value of one key.
std::optional<std::string> plan_value(const std::string& plan, const std::string& key) {
  std::istringstream words(plan);
  for (std::string w; words >> w;)
    if (w.rfind(key + "=", 0) == 0) return w.substr(key.size() + 1);
  return std::nullopt;
}

// A loaded benchmark file, either kind.
struct Source {
  bool is_json = false;
  Json json;
  std::vector<LogRun> runs;
};

const Source& load_source(const fs::path& p) {
  static std::map<std::string, std::unique_ptr<Source>> cache;
  const std::string key = fs::weakly_canonical(p).string();
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  auto src = std::make_unique<Source>();
  const std::string text = read_text(p);
  if (p.extension() == ".json") {
    src->is_json = true;
    src->json = pa::test::StrictJson::parse(text);
  } else {
    src->runs = parse_log(text);
  }
  return *cache.emplace(key, std::move(src)).first->second;
}

// Evaluate a fragment against a source. Throws std::runtime_error saying what is wrong.
Cited evaluate(const Source& src, const std::string& fragment) {
  const std::size_t c1 = fragment.find(':');
  if (c1 == std::string::npos) {  // a top-level field
    if (!src.is_json) throw std::runtime_error("a pa-lab log has no top-level fields; use run:FLAG=VALUE,...:FIELD");
    const Json* v = src.json.find(fragment);
    if (!v || v->kind != Json::number) throw std::runtime_error("no top-level number '" + fragment + "'");
    return {v->text, fragment};
  }
  const std::size_t c2 = fragment.find(':', c1 + 1);
  if (c2 == std::string::npos) throw std::runtime_error("expected ARRAY:KEY=VALUE,...:FIELD");
  const std::string array = fragment.substr(0, c1);
  const auto filters = parse_filters(fragment.substr(c1 + 1, c2 - c1 - 1));
  const std::string field = fragment.substr(c2 + 1);

  if (!src.is_json) {
    if (array != "run") throw std::runtime_error("a pa-lab log is cited as run:FLAG=VALUE,...:FIELD");
    const LogRun* hit = nullptr;
    int hits = 0;
    for (const auto& r : src.runs) {
      bool ok = !r.flags.empty();
      for (const auto& [k, v] : filters) {
        auto f = r.flags.find(k);
        ok = ok && f != r.flags.end() && f->second == v;
      }
      if (ok) {
        hit = &r;
        ++hits;
      }
    }
    if (hits != 1)
      throw std::runtime_error("the filters match " + std::to_string(hits) + " runs (need exactly 1)");
    auto f = hit->fields.find(field);
    if (f == hit->fields.end())
      throw std::runtime_error("run at line " + std::to_string(hit->line) + " has no field '" + field +
                               "' (fields: median_ms gbps pct_copy copy_gbps)");
    return {f->second, field};
  }

  const Json* arr = src.json.find(array);
  if (!arr || arr->kind != Json::array) throw std::runtime_error("no array '" + array + "'");
  const Json* hit = nullptr;
  int hits = 0;
  for (const auto& item : arr->items) {
    bool ok = true;
    for (const auto& [k, v] : filters) {
      const Json* m = item.find(k);
      ok = ok && m && (m->kind == Json::string || m->kind == Json::number) && m->text == v;
    }
    if (ok) {
      hit = &item;
      ++hits;
    }
  }
  if (hits != 1)
    throw std::runtime_error("the filters match " + std::to_string(hits) + " elements of '" + array +
                             "' (need exactly 1: add keys)");
  if (field.rfind("plan.", 0) == 0) {
    const Json* plan = hit->find("plan");
    auto v = plan ? plan_value(plan->text, field.substr(5)) : std::nullopt;
    if (!v) throw std::runtime_error("the element's plan has no '" + field.substr(5) + "='");
    return {*v, field};
  }
  const Json* v = hit->find(field);
  if (!v || v->kind != Json::number) throw std::runtime_error("the element has no number '" + field + "'");
  return {v->text, field};
}

// Decimal places of a literal ("156.736" -> 3, "1.67772e+07" -> -2, "132" -> 0).
int literal_decimals(const std::string& lit) {
  std::size_t e = lit.find_first_of("eE");
  const std::string mant = lit.substr(0, e);
  const std::size_t dot = mant.find('.');
  int d = dot == std::string::npos ? 0 : static_cast<int>(mant.size() - dot - 1);
  if (e != std::string::npos) d -= std::atoi(lit.c_str() + e + 1);
  return d;
}

// The unit a field's values are in, as a power of ten of the base unit of its
// family (time in seconds, bytes, GB/s, percent, times, a count).
struct Unit {
  std::string family;
  int exp10 = 0;
};

Unit field_unit(const std::string& field) {
  auto ends = [&](const std::string& s) {
    return field.size() >= s.size() && field.compare(field.size() - s.size(), s.size(), s) == 0;
  };
  if (ends("_us")) return {"time", -6};
  if (ends("_ms")) return {"time", -3};
  if (ends("gbps")) return {"bandwidth", 0};
  if (field.rfind("pct_", 0) == 0 || ends("_pct")) return {"percent", 0};  // pct_copy, pct_floor
  if (field == "speedup") return {"ratio", 0};
  if (ends("bytes") || ends("_bytes_each_way")) return {"bytes", 0};
  return {"count", 0};
}

struct Figure {
  std::string number;  // as written
  Unit unit;
};

// "156.7 us" / "1.62 ms" / "2985 GB/s" / "82%" / "30.0x" / "16.8 MB" / "16".
Figure parse_figure(const std::string& text) {
  static const std::regex re(R"(^([0-9]+(?:\.[0-9]+)?)\s*(us|ms|s|GB/s|TB/s|%|x|B|KB|MB|GB|KiB|MiB|GiB)?$)");
  std::smatch m;
  if (!std::regex_match(text, m, re))
    throw std::runtime_error("the link text '" + text +
                             "' is not a figure (a number, then optionally us ms s GB/s TB/s % x B KB MB GB)");
  const std::string u = m[2];
  static const std::map<std::string, Unit> units = {
      {"us", {"time", -6}},       {"ms", {"time", -3}},  {"s", {"time", 0}},     {"GB/s", {"bandwidth", 0}},
      {"TB/s", {"bandwidth", 3}}, {"%", {"percent", 0}}, {"x", {"ratio", 0}},    {"B", {"bytes", 0}},
      {"KB", {"bytes", 3}},       {"MB", {"bytes", 6}},  {"GB", {"bytes", 9}},   {"", {"count", 0}}};
  if (u == "KiB" || u == "MiB" || u == "GiB")
    throw std::runtime_error("binary units (KiB, MiB, GiB) are derived in the text, not cited: use KB, MB, GB");
  return {m[1], units.at(u)};
}

// Empty if the figure matches the cited value, else why not.
std::string compare(const std::string& figure_text, const Cited& c) {
  const Figure f = parse_figure(figure_text);
  const Unit fu = field_unit(c.field);
  // A bare number may quote a count, a ratio or a percent without its sign.
  const bool unitless_ok = f.unit.family == "count" && (fu.family == "count" || fu.family == "ratio");
  if (f.unit.family != fu.family && !unitless_ok)
    return "the figure is a " + f.unit.family + " but '" + c.field + "' is a " + fu.family;
  const int shift = fu.exp10 - (unitless_ok ? 0 : f.unit.exp10);  // file value * 10^shift = figure
  const int fig_dec = literal_decimals(f.number);
  const int file_dec = literal_decimals(c.literal) - shift;  // decimals the file gives, in the figure's unit
  if (fig_dec > file_dec)
    return "the figure has " + std::to_string(fig_dec) + " decimals; the file gives " + std::to_string(file_dec) +
           " (value " + c.literal + ")";
  const long double v = std::strtold(c.literal.c_str(), nullptr) * std::pow(10.0L, shift);
  const long double x = std::strtold(f.number.c_str(), nullptr);
  const long double half = 0.5L * std::pow(10.0L, -fig_dec);
  if (std::fabs(v - x) > half * (1 + 1e-9L)) {
    std::ostringstream os;
    os.precision(10);
    os << "the file says " << c.literal << " (" << c.field << "), which is " << v << " in the figure's unit, not "
       << f.number;
    return os.str();
  }
  return {};
}

// ---- collecting citations from the Markdown --------------------------------------
struct Citation {
  std::string md;     // the Markdown file
  int line = 0;       // its block's line
  std::string text;   // the link text: the figure
  std::string url;    // as written
  fs::path file;      // resolved
  std::string fragment;
};

bool is_benchmark_path(const fs::path& p) {
  const std::string rel = fs::weakly_canonical(p).lexically_relative(fs::weakly_canonical(kRoot)).generic_string();
  return rel.rfind("assets/bench/", 0) == 0 || rel.rfind("trace/results/", 0) == 0 ||
         (rel.rfind("assets/timelines/", 0) == 0 && p.extension() == ".json");  // scripts/timeline_summary.py
}

void collect_spans(const std::string& md, int line, const std::vector<Span>& spans, std::vector<Citation>& out) {
  for (const auto& sp : spans) {
    if (sp.kind != SpanKind::link || sp.url.empty() || sp.url.find("://") != std::string::npos) continue;
    const std::size_t hash = sp.url.find('#');
    const fs::path file = fs::path(md).parent_path() / sp.url.substr(0, hash);
    if (!is_benchmark_path(file)) continue;
    const bool figure = !sp.text.empty() && std::isdigit(static_cast<unsigned char>(sp.text[0]));
    if (!figure && hash == std::string::npos) continue;  // a plain link to the file
    out.push_back({md, line, sp.text, sp.url, file, hash == std::string::npos ? "" : sp.url.substr(hash + 1)});
  }
}

void collect_blocks(const std::string& md, const std::vector<Block>& blocks, std::vector<Citation>& out) {
  for (const auto& b : blocks) {
    collect_spans(md, b.line, b.spans, out);
    for (const auto& row : b.rows)
      for (const auto& cell : row) collect_spans(md, b.line, cell, out);
    collect_blocks(md, b.children, out);
  }
}

std::vector<std::string> markdown_files() {
  std::vector<std::string> files;
  for (const auto& e : list_lessons(PA_LESSONS_DIR)) files.push_back(e.path);
  files.push_back((kRoot / "README.md").string());
  return files;
}

std::vector<Citation> all_citations(const std::string& md) {
  std::vector<Citation> out;
  const Document d = load_lesson(md);
  for (const auto& s : d.sections) {
    collect_spans(md, s.line, s.heading, out);
    collect_blocks(md, s.blocks, out);
  }
  return out;
}

// The files the README's generated results tables name ("raw data: `FILE`"):
// the main table (<!-- results:begin --> .. end) first, then the others
// (<!-- results-NAME:begin -->, scripts/bench_table.py --markers). Plain
// string search: std::regex recurses per character and a table is long.
struct GeneratedBlock {
  std::size_t begin, end;  // [begin, end): from the begin marker to past the end marker
};
std::vector<GeneratedBlock> generated_blocks(const std::string& text) {
  std::vector<GeneratedBlock> out;
  const std::string open = "<!-- results", begin_tail = ":begin -->";
  for (std::size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
    const std::size_t tail = text.find(begin_tail, at);
    const std::size_t eol = text.find('\n', at);
    if (tail == std::string::npos || (eol != std::string::npos && tail > eol)) continue;
    const std::string name = text.substr(at + 5, tail - (at + 5));  // "results" or "results-NAME"
    const std::string end_marker = "<!-- " + name + ":end -->";
    const std::size_t e = text.find(end_marker, tail);
    if (e == std::string::npos) continue;
    out.push_back({at, e + end_marker.size()});
    at = e;
  }
  return out;
}
std::vector<std::string> current_bench_files() {
  const std::string readme = read_text(kRoot / "README.md");
  std::vector<std::string> files;
  static const std::regex file_re(R"(raw data: `(assets/bench/[^`]+\.json)`)");
  for (const GeneratedBlock& b : generated_blocks(readme)) {
    const std::string head = readme.substr(b.begin, std::min<std::size_t>(b.end - b.begin, 600));
    std::smatch m;
    if (std::regex_search(head, m, file_re)) files.push_back(m[1]);
  }
  return files;
}
std::string current_bench_file() {
  const auto files = current_bench_files();
  return files.empty() ? std::string() : files.front();
}
// Generated blocks removed: what the prose around them says.
std::string without_generated_tables(const std::string& text) {
  std::string out;
  std::size_t from = 0;
  for (const GeneratedBlock& b : generated_blocks(text)) {
    out += text.substr(from, b.begin - from);
    from = b.end;
  }
  return out + text.substr(from);
}

std::string rel(const fs::path& p) {
  return fs::weakly_canonical(p).lexically_relative(fs::weakly_canonical(kRoot)).generic_string();
}

}  // namespace

TEST_CASE("every figure cited from a benchmark file matches the file", "[lessons][figures]") {
  int checked = 0;
  std::map<std::string, int> per_file;
  for (const auto& md : markdown_files()) {
    for (const auto& c : all_citations(md)) {
      INFO(c.md << ":" << c.line << ": [" << c.text << "](" << c.url << ")");
      if (c.fragment.empty()) {
        FAIL_CHECK("a figure linked to a benchmark file needs a #fragment naming the value (lessons/README.md)");
        continue;
      }
      try {
        const std::string why = compare(c.text, evaluate(load_source(c.file), c.fragment));
        if (!why.empty()) FAIL_CHECK(why);
      } catch (const std::exception& e) {
        FAIL_CHECK(e.what());
      }
      ++checked;
      ++per_file[fs::path(c.md).filename().string()];
    }
  }
  // Not vacuous: the lessons that report benchmark runs cite them.
  for (const char* f : {"00_paged_kv_cache.md", "01_q_to_smem.md", "02_qk.md", "03_softmax.md", "04_lv.md",
                        "05_warp_reduce.md", "06_v2_partition.md", "07_cascade_merge.md", "08_beyond.md", "README.md"}) {
    INFO(f);
    CHECK(per_file[f] >= 1);
  }
  CHECK(checked >= 100);
}

TEST_CASE("the lessons and the README quote the current benchmark files", "[lessons][figures]") {
  const std::vector<std::string> current = current_bench_files();
  auto is_current = [&](const std::string& f) { return std::find(current.begin(), current.end(), f) != current.end(); };
  INFO("current files (the README's generated tables): " << current.size());
  REQUIRE_FALSE(current.empty());
  for (const auto& f : current) {
    INFO(f);
    REQUIRE(fs::exists(kRoot / f));
  }
  // Cited figures.
  for (const auto& md : markdown_files())
    for (const auto& c : all_citations(md)) {
      const std::string r = rel(c.file);
      if (r.rfind("assets/bench/", 0) != 0) continue;
      INFO(c.md << ":" << c.line << ": [" << c.text << "](" << c.url << ")");
      CHECK(is_current(r));
    }
  // Any pa-bench JSON file named in the text (`assets/bench/NAME.json`), outside the generated tables.
  static const std::regex named(R"(assets/bench/[A-Za-z0-9_.-]+\.json)");
  for (const auto& md : markdown_files()) {
    const std::string text = without_generated_tables(read_text(md));
    for (auto it = std::sregex_iterator(text.begin(), text.end(), named); it != std::sregex_iterator(); ++it) {
      INFO(md << ": names " << it->str());
      CHECK(is_current(it->str()));
    }
  }
}

// A table that cites figures in a column cites every number in that column:
// a typed-over number next to cited ones cannot hide.
TEST_CASE("measured table columns cite every number", "[lessons][figures]") {
  for (const auto& md : markdown_files()) {
    const Document d = load_lesson(md);
    std::vector<const Block*> tables;
    for (const auto& s : d.sections)
      for (const auto& b : s.blocks) {
        if (b.kind == BlockKind::table) tables.push_back(&b);
        for (const auto& c : b.children)
          if (c.kind == BlockKind::table) tables.push_back(&c);
      }
    for (const Block* t : tables) {
      if (t->rows.size() < 2) continue;
      const std::size_t ncol = t->rows[0].size();
      for (std::size_t col = 0; col < ncol; ++col) {
        auto cited = [&](std::size_t r) {
          std::vector<Citation> cs;
          if (col < t->rows[r].size()) collect_spans(md, t->line, t->rows[r][col], cs);
          return !cs.empty();
        };
        bool any = false;
        for (std::size_t r = 1; r < t->rows.size(); ++r) any = any || cited(r);
        if (!any) continue;
        for (std::size_t r = 1; r < t->rows.size(); ++r) {
          if (col >= t->rows[r].size() || cited(r)) continue;
          const std::string cell = plain_text(t->rows[r][col]);
          INFO(md << ":" << t->line << ": table row " << r << ", column '" << plain_text(t->rows[0][col]) << "': '"
                  << cell << "'");
          CHECK(cell.find_first_of("0123456789") == std::string::npos);
        }
      }
    }
  }
}

// The checker itself: a changed digit, false precision, a wrong unit or an
// ambiguous row are all caught.
TEST_CASE("the figure check rejects changed, over-precise and ambiguous figures", "[lessons][figures]") {
  const Source& s = load_source(kRoot / current_bench_file());
  // Find some ok row to build figures from, whatever the current file holds.
  const Json* rows = s.json.find("rows");
  REQUIRE(rows);
  const Json* row = nullptr;
  for (const auto& r : rows->items)
    if (r.find("status") && r.find("status")->text == "ok" && r.find("median_us")) {
      row = &r;
      break;
    }
  REQUIRE(row);
  std::string sel = "rows:";
  for (const char* k : {"kernel", "dtype", "seqs", "heads", "kv_heads", "context", "prefix", "head_size", "block_size"})
    sel += std::string(k) + "=" + row->find(k)->text + ",";
  sel.back() = ':';
  const Cited t = evaluate(s, sel + "median_us");
  const double us = std::strtod(t.literal.c_str(), nullptr);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f us", us);
  CHECK(compare(buf, t).empty());
  std::snprintf(buf, sizeof buf, "%.1f us", us + 0.1);
  CHECK_FALSE(compare(buf, t).empty());  // one digit changed
  std::snprintf(buf, sizeof buf, "%.4f ms", us / 1000);
  CHECK(compare(buf, t).empty());        // another unit, same value
  std::snprintf(buf, sizeof buf, "%.1f ms", us);
  CHECK_FALSE(compare(buf, t).empty());  // the right digits in the wrong unit
  std::snprintf(buf, sizeof buf, "%.*f us", literal_decimals(t.literal) + 1, us);
  CHECK_FALSE(compare(buf, t).empty());  // more digits than the file has
  std::snprintf(buf, sizeof buf, "%.1f GB/s", us);
  CHECK_FALSE(compare(buf, t).empty());  // a time quoted as a bandwidth
  CHECK_THROWS(evaluate(s, "rows:kernel=" + row->find("kernel")->text + ":median_us"));  // many rows match
  CHECK_THROWS(evaluate(s, "rows:kernel=no_such_kernel:median_us"));
  CHECK_THROWS(evaluate(s, "no_such_field"));
  CHECK_THROWS(parse_figure("about 5 us"));
  // The literal's precision: 1.67772e+07 bytes is known to 100 bytes.
  CHECK(literal_decimals("1.67772e+07") == -2);
  CHECK(compare("16.8 MB", {"1.67772e+07", "kv_bytes"}).empty());
  CHECK(compare("16.78 MB", {"1.67772e+07", "kv_bytes"}).empty());
  CHECK_FALSE(compare("16.77 MB", {"1.67772e+07", "kv_bytes"}).empty());
  CHECK_FALSE(compare("16.77720 MB", {"1.67772e+07", "kv_bytes"}).empty());  // finer than 100 bytes
}
