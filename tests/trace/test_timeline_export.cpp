// Timeline -> Chrome trace-event JSON (pa/trace/timeline_export.hpp): the
// output is valid JSON (a strict reader, tests/support/strict_json.hpp), has
// one complete event per span and the process and thread metadata Perfetto
// names its tracks with, exact ts and dur for hand-made spans, escaped texts,
// and is streamed in pieces and written by write-then-rename.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include "pa/core/atomic_file.hpp"
#include "pa/trace/timeline_export.hpp"
#include "strict_json.hpp"
#include "timeline_samples.hpp"

using namespace pa;
using namespace pa::trace;
using namespace pa::trace::testing;
using pa::test::JsonValue;
using pa::test::StrictJson;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr std::uint64_t kT0 = 1'000'000'123;

Span hand_span(std::uint16_t sm, std::uint32_t block, std::uint16_t warp, KernelRole kernel, Phase phase,
               std::int32_t iter, std::uint64_t begin, std::uint64_t end, std::uint64_t cycles) {
  Span s{};
  s.sm = sm;
  s.block = block;
  s.warp = warp;
  s.kernel = kernel;
  s.phase = phase;
  s.stage = Stage::v2_partition;
  s.iter = iter;
  s.t_begin_ns = kT0 + begin;
  s.t_end_ns = kT0 + end;
  s.clk_begin = 777;
  s.clk_end = 777 + cycles;
  return s;
}

// A "1234.567" microsecond literal back to nanoseconds, exactly.
std::uint64_t ns_of(const std::string& micros) {
  const std::size_t dot = micros.find('.');
  REQUIRE(dot != std::string::npos);
  REQUIRE(micros.size() - dot == 4);
  return std::stoull(micros.substr(0, dot)) * 1000 + std::stoull(micros.substr(dot + 1));
}

std::vector<const JsonValue*> events_of(const JsonValue& doc, const char* ph) {
  std::vector<const JsonValue*> r;
  for (const JsonValue& e : doc.at("traceEvents").items)
    if (e.at("ph").text == ph) r.push_back(&e);
  return r;
}

std::filesystem::path temp_dir() {
  auto p = std::filesystem::temp_directory_path() / ("pa_timeline_json_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p;
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("timeline JSON: hand-made spans give exact ts, dur, tracks, names and args", "[trace][timeline]") {
  TimelineData d = sample_timeline(0);
  d.header.sm_count = 8;
  d.spans = {
      hand_span(3, 2, 1, KernelRole::main, Phase::qk, 0, 0, 1500, 2000),                      // A
      hand_span(3, 2, 1, KernelRole::main, Phase::softmax, 1, 2'000'000, 2'000'999, 1998),    // B
      hand_span(5, 0, 0, KernelRole::reduce, Phase::partition_reduce, -1, 5, 1'234'567'890, 3),  // C
      hand_span(3, 7, 0, KernelRole::main, Phase::partition_store, 2, 999, 1000, 0),          // D
  };
  const std::string json = timeline_json(d);
  const JsonValue doc = StrictJson::parse(json);
  CHECK(doc.at("displayTimeUnit").text == "ns");
  const JsonValue& other = doc.at("otherData");
  CHECK(other.at("time_origin_ns").text == std::to_string(kT0));
  CHECK(other.at("spans").text == "4");
  CHECK(other.at("stage").text == "v2_partition");
  CHECK(other.at("source").text == d.header.source);
  CHECK(other.at("sm_count").text == "8");
  CHECK(other.at("dropped_spans").text == "0");
  CHECK(doc.at("traceEvents").items.size() == 4 + 2 * 2 + 2 * 3);  // spans, 2 SMs, 3 warps

  // Warps sorted by (SM, kernel role, block, warp): tids 1, 2, 3; pid = SM + 1.
  struct Want {
    const char* name;
    const char* cat;
    const char* ts;
    const char* dur;
    const char* pid;
    const char* tid;
    const char* block;
    const char* warp;
    const char* iter;
    const char* cycles;
  };
  const std::vector<Want> want = {
      {"qk", "v2_partition,main", "0.000", "1.500", "4", "1", "2", "1", "0", "2000"},
      {"softmax", "v2_partition,main", "2000.000", "0.999", "4", "1", "2", "1", "1", "1998"},
      {"partition_reduce", "v2_partition,reduce", "0.005", "1234567.885", "6", "3", "0", "0", "-1", "3"},
      {"partition_store", "v2_partition,main", "0.999", "0.001", "4", "2", "7", "0", "2", "0"},
  };
  const auto xs = events_of(doc, "X");
  REQUIRE(xs.size() == want.size());
  int checked = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const JsonValue& e = *xs[i];
    const Want& w = want[i];
    INFO("span " << i);
    CHECK(e.at("name").text == w.name);
    CHECK(e.at("cat").text == w.cat);
    CHECK(e.at("ts").text == w.ts);
    CHECK(e.at("dur").text == w.dur);
    CHECK(e.at("pid").text == w.pid);
    CHECK(e.at("tid").text == w.tid);
    const JsonValue& a = e.at("args");
    CHECK(a.members.size() == 4);
    CHECK(a.at("block").text == w.block);
    CHECK(a.at("warp").text == w.warp);
    CHECK(a.at("iter").text == w.iter);
    CHECK(a.at("cycles").text == w.cycles);
    ++checked;
  }
  CHECK(checked == 4);

  // The metadata: each SM a named, ordered process; each warp a named, ordered thread.
  std::map<std::string, std::string> process_names, thread_names, thread_sort;
  for (const JsonValue* m : events_of(doc, "M")) {
    const std::string key = m->at("pid").text + "/" + m->at("tid").text;
    const std::string& name = m->at("name").text;
    if (name == "process_name") process_names[m->at("pid").text] = m->at("args").at("name").text;
    if (name == "thread_name") thread_names[key] = m->at("args").at("name").text;
    if (name == "thread_sort_index") thread_sort[key] = m->at("args").at("sort_index").text;
    if (name == "process_sort_index") CHECK(m->at("args").at("sort_index").text == m->at("pid").text);
  }
  CHECK(process_names == std::map<std::string, std::string>{{"4", "SM 3"}, {"6", "SM 5"}});
  CHECK(thread_names == std::map<std::string, std::string>{
                            {"4/1", "block 2 warp 1"}, {"4/2", "block 7 warp 0"}, {"6/3", "reduce block 0 warp 0"}});
  CHECK(thread_sort == std::map<std::string, std::string>{{"4/1", "1"}, {"4/2", "2"}, {"6/3", "3"}});
}

TEST_CASE("timeline JSON: one complete event per span, every track named, on a larger timeline", "[trace][timeline]") {
  TimelineData d = sample_timeline(5000);
  const JsonValue doc = StrictJson::parse(timeline_json(d));
  std::set<std::string> named_threads, named_processes;
  for (const JsonValue* m : events_of(doc, "M")) {
    CHECK(m->at("pid").text != "0");  // Perfetto's idle task: never used
    CHECK(m->at("tid").text != "0");
    const std::string track = m->at("pid").text + "/" + m->at("tid").text;
    if (m->at("name").text == "thread_name") CHECK(named_threads.insert(track).second);
    if (m->at("name").text == "process_name") CHECK(named_processes.insert(m->at("pid").text).second);
  }
  const auto xs = events_of(doc, "X");
  REQUIRE(xs.size() == d.spans.size());
  std::uint64_t t0 = d.spans[0].t_begin_ns;
  for (const Span& s : d.spans) t0 = std::min(t0, s.t_begin_ns);
  std::size_t matched = 0;
  std::map<std::string, std::string> thread_of_warp;  // "sm/role/block/warp" -> "pid/tid": one each way
  std::set<std::string> warps_of_thread;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const JsonValue& e = *xs[i];
    const Span& s = d.spans[i];
    INFO("span " << i);
    CHECK(e.at("name").text == to_string(s.phase));
    CHECK(ns_of(e.at("ts").text) == s.t_begin_ns - t0);
    CHECK(ns_of(e.at("dur").text) == s.t_end_ns - s.t_begin_ns);
    CHECK(e.at("pid").text == std::to_string(s.sm + 1));
    const std::string track = e.at("pid").text + "/" + e.at("tid").text;
    CHECK(named_threads.count(track) == 1);
    CHECK(named_processes.count(e.at("pid").text) == 1);
    const std::string warp = std::to_string(s.sm) + "/" + to_string(s.kernel) + "/" + std::to_string(s.block) + "/" +
                             std::to_string(s.warp);
    const auto [it, fresh] = thread_of_warp.emplace(warp, track);
    CHECK(it->second == track);
    if (fresh) CHECK(warps_of_thread.insert(track).second);
    CHECK(e.at("args").at("cycles").text == std::to_string(s.clk_end - s.clk_begin));
    ++matched;
  }
  CHECK(matched == 5000);
  CHECK(named_threads.size() == thread_of_warp.size());
}

TEST_CASE("timeline JSON: texts are escaped, every control character included", "[trace][timeline]") {
  std::string lit;
  append_json_string(lit, "a\"b\\c\nd\te\r\x01\x1f\x7f/é");
  CHECK(lit == "\"a\\\"b\\\\c\\nd\\te\\r\\u0001\\u001f\\u007f/é\"");
  int round_trips = 0;
  for (int c = 0; c < 0x80; ++c) {
    std::string s = "x";
    s += static_cast<char>(c);
    s += 'y';
    std::string j;
    append_json_string(j, s);
    INFO("character " << c);
    CHECK(StrictJson::parse(j).text == s);
    ++round_trips;
  }
  CHECK(round_trips == 128);
  // A GPU name and a launch text with quotes, backslashes and UTF-8 come back unchanged.
  TimelineData d = sample_timeline(3);
  d.header.source = "NVIDIA \"H100\" \\ 80GB – ü";
  d.header.launch = "grid {4,2,3} </script> 'q'";
  const JsonValue doc = StrictJson::parse(timeline_json(d));
  CHECK(doc.at("otherData").at("source").text == d.header.source);
  CHECK(doc.at("otherData").at("launch").text == d.header.launch);
}

TEST_CASE("timeline JSON: streamed in pieces, empty and overflowed timelines", "[trace][timeline]") {
  const TimelineData big = sample_timeline(20000);
  std::vector<std::size_t> pieces;
  std::string joined;
  const TimelineExportStats st = export_timeline_json(big, [&](std::string_view p) {
    pieces.push_back(p.size());
    joined += p;
  });
  CHECK(pieces.size() > 10);
  for (std::size_t n : pieces) CHECK(n < (std::size_t{1} << 16) + 1024);
  CHECK(joined == timeline_json(big));
  CHECK(st.spans == 20000);
  CHECK(st.sms == 5);
  CHECK(st.threads > 0);

  TimelineData empty = sample_timeline(0);
  const JsonValue e = StrictJson::parse(timeline_json(empty));
  CHECK(e.at("traceEvents").items.empty());
  CHECK(e.at("otherData").at("spans").text == "0");

  TimelineData over = sample_timeline(4);
  over.header.dropped_spans = 123456;
  CHECK(StrictJson::parse(timeline_json(over)).at("otherData").at("dropped_spans").text == "123456");

  TimelineData bad = sample_timeline(4);
  bad.spans[2].warp = 99;
  CHECK_THROWS_WITH(timeline_json(bad), ContainsSubstring("span 2: warp = 99"));
}

TEST_CASE("timeline JSON file: written by write-then-rename, the old file kept on failure", "[trace][timeline]") {
  const auto dir = temp_dir();
  const auto path = (dir / "t.json").string();
  const TimelineData d = sample_timeline(50);
  const TimelineExportStats st = write_timeline_json(path, d);
  CHECK(st.spans == 50);
  const std::string written = read_text(path);
  CHECK(written == timeline_json(d));

  TimelineData bad = sample_timeline(5);
  bad.spans[0].kernel = KernelRole::count_;
  CHECK_THROWS_AS(write_timeline_json(path, bad), TimelineFormatError);
  CHECK(read_text(path) == written);
  CHECK_THROWS_AS(write_timeline_json((dir / "missing" / "t.json").string(), d), core::FileWriteError);

  // The streamed write itself: an exception from the producer propagates
  // unchanged, a failed write (here: reading a write-only stream sets its
  // error flag) is a FileWriteError; either way the old file stays.
  CHECK_THROWS_WITH(core::write_file_atomically_streamed(path,
                                                         [](std::FILE* f) {
                                                           std::fputs("{\"half\":", f);
                                                           throw std::runtime_error("producer failed");
                                                         }),
                    "producer failed");
  CHECK(read_text(path) == written);
  CHECK_THROWS_AS(core::write_file_atomically_streamed(path,
                                                       [](std::FILE* f) {
                                                         std::fputs("{}", f);
                                                         (void)std::fgetc(f);
                                                       }),
                  core::FileWriteError);
  CHECK(read_text(path) == written);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);  // no temporary file left behind
  std::filesystem::remove_all(dir);
}
