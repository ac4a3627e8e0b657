// Timeline file format (trace/FORMAT.md, "Timeline files"): a synthetic
// timeline survives write and read with every field equal, and the reader
// refuses every corrupt, truncated, foreign or wrong-version file with a
// TimelineFormatError that names what is wrong and where.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

#include "pa/core/atomic_file.hpp"
#include "pa/trace/timeline_file.hpp"
#include "pa/trace/trace_file.hpp"
#include "timeline_samples.hpp"
#include "trace_samples.hpp"

using namespace pa;
using namespace pa::trace;
using namespace pa::trace::testing;
using Catch::Matchers::ContainsSubstring;

namespace {

using Bytes = std::vector<std::uint8_t>;

std::string error_of(const Bytes& b) {
  try {
    parse_timeline(b.data(), b.size());
  } catch (const TimelineFormatError& e) {
    return e.what();
  }
  return "(accepted)";
}

// Little-endian fields of `width` bytes, read and written in place.
std::uint64_t peek(const Bytes& b, std::size_t at, int width) {
  std::uint64_t v = 0;
  for (int i = 0; i < width; ++i) v |= std::uint64_t{b.at(at + i)} << (8 * i);
  return v;
}
void poke(Bytes& b, std::size_t at, int width, std::uint64_t v) {
  for (int i = 0; i < width; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
Bytes with(const Bytes& good, std::size_t at, int width, std::uint64_t v) {
  Bytes b = good;
  poke(b, at, width, v);
  return b;
}
Bytes le(int width, std::uint64_t v) {
  Bytes r(static_cast<std::size_t>(width));
  poke(r, 0, width, v);
  return r;
}

// One corruption: `bytes` written over a good file at `at`, the checksum made
// right again (so that the reader reaches the field itself), and what the
// error must say. Returns how many patches it checked.
struct Patch {
  const char* what;
  std::size_t at;
  Bytes bytes;
  std::vector<std::string> says;
};
int check_patches(const Bytes& good, const std::vector<Patch>& patches) {
  int ran = 0;
  for (const Patch& c : patches) {
    Bytes b = good;
    std::copy(c.bytes.begin(), c.bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(c.at));
    fix_checksum(b);
    const std::string e = error_of(b);
    INFO(c.what << ": " << e);
    CHECK_THAT(e, ContainsSubstring("timeline file: "));
    for (const std::string& s : c.says) CHECK_THAT(e, ContainsSubstring(s));
    ++ran;
  }
  return ran;
}

// Where the fields are (FORMAT.md): the payload starts at 24; after the run
// header (56 + 4 S bytes, then the source and revision texts) come the
// timeline's own fields; after the payload the span count, the spans.
struct Layout {
  std::size_t seqs_at, source_at, revision_at, extra_at, launch_len_at, count_at, spans_at;
};
Layout layout_of(const Bytes& b) {
  Layout l{};
  l.seqs_at = 24 + 52;
  l.source_at = l.seqs_at + 4 + 4 * peek(b, l.seqs_at, 4);
  l.revision_at = l.source_at + 4 + peek(b, l.source_at, 4);
  l.extra_at = l.revision_at + 4 + peek(b, l.revision_at, 4);
  l.launch_len_at = l.extra_at + 40;
  l.count_at = 24 + peek(b, 20, 4);
  l.spans_at = l.count_at + 8;
  return l;
}

std::filesystem::path temp_dir() {
  auto p = std::filesystem::temp_directory_path() / ("pa_timeline_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p;
}

Bytes read_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}

void check_same_header(const TimelineHeader& a, const TimelineHeader& b) {
  CHECK(a.stage == b.stage);
  CHECK(a.spec.dtype == b.spec.dtype);
  CHECK(a.spec.head_size == b.spec.head_size);
  CHECK(a.spec.block_size == b.spec.block_size);
  CHECK(a.spec.num_threads == b.spec.num_threads);
  CHECK(a.spec.num_heads == b.spec.num_heads);
  CHECK(a.spec.num_kv_heads == b.spec.num_kv_heads);
  CHECK(a.spec.context_lens == b.spec.context_lens);
  CHECK(a.spec.partition_size == b.spec.partition_size);
  CHECK(a.spec.shared_prefix_len == b.spec.shared_prefix_len);
  CHECK(a.spec.extra_q_stride == b.spec.extra_q_stride);
  CHECK(a.spec.spare_blocks == b.spec.spare_blocks);
  CHECK(a.spec.nan_tails == b.spec.nan_tails);
  CHECK(a.spec.seed == b.spec.seed);
  CHECK(a.spec.logit_spread == b.spec.logit_spread);
  CHECK(a.source == b.source);
  CHECK(a.revision == b.revision);
  CHECK(a.launch == b.launch);
  CHECK(a.sm_count == b.sm_count);
  CHECK(a.sm_clock_khz == b.sm_clock_khz);
  CHECK(a.globaltimer_resolution_ns == b.globaltimer_resolution_ns);
  CHECK(a.untimed_ns == b.untimed_ns);
  CHECK(a.timed_ns == b.timed_ns);
  CHECK(a.dropped_spans == b.dropped_spans);
}

}  // namespace

TEST_CASE("timeline round trip: every header field and every span field survive write and read", "[trace][timeline]") {
  TimelineData d = sample_timeline(300);  // every phase and kernel role, several SMs, blocks and warps
  d.header.dropped_spans = 17;           // a tracer that overflowed: kept and reported
  d.header.spec.nan_tails = false;
  d.header.spec.extra_q_stride = 8;
  d.header.spec.spare_blocks = 5;
  d.header.spec.logit_spread = 2.5f;
  const auto path = (temp_dir() / "round.patl").string();
  write_timeline(path, d);
  const TimelineData r = read_timeline(path);
  check_same_header(d.header, r.header);
  REQUIRE(r.spans.size() == d.spans.size());
  int compared = 0;
  for (std::size_t i = 0; i < d.spans.size(); ++i) {
    const Span &a = d.spans[i], &b = r.spans[i];
    INFO("span " << i);
    CHECK(a.t_begin_ns == b.t_begin_ns);
    CHECK(a.t_end_ns == b.t_end_ns);
    CHECK(a.clk_begin == b.clk_begin);
    CHECK(a.clk_end == b.clk_end);
    CHECK(a.block == b.block);
    CHECK(a.sm == b.sm);
    CHECK(a.warp == b.warp);
    CHECK(a.stage == b.stage);
    CHECK(a.phase == b.phase);
    CHECK(a.kernel == b.kernel);
    CHECK(a.reserved == b.reserved);
    CHECK(a.iter == b.iter);
    CHECK(same_span(a, b));
    ++compared;
  }
  CHECK(compared == 300);
  // The file is the serialization, and serializing what was read gives it back.
  CHECK(read_bytes(path) == serialize_timeline(d));
  CHECK(serialize_timeline(r) == serialize_timeline(d));
  // Every phase and role occurred (the sample covers them all).
  std::vector<int> phases(static_cast<int>(Phase::count_)), roles(static_cast<int>(KernelRole::count_));
  for (const Span& s : r.spans) {
    ++phases[static_cast<int>(s.phase)];
    ++roles[static_cast<int>(s.kernel)];
  }
  for (int n : phases) CHECK(n > 0);
  for (int n : roles) CHECK(n > 0);

  SECTION("an empty timeline and unknown clocks round-trip too") {
    TimelineData e = sample_timeline(0);
    e.header.sm_count = e.header.sm_clock_khz = e.header.globaltimer_resolution_ns = 0;
    e.header.untimed_ns = e.header.timed_ns = 0;
    e.header.launch.clear();
    write_timeline(path, e);
    const TimelineData re = read_timeline(path);
    check_same_header(e.header, re.header);
    CHECK(re.spans.empty());
  }
  std::filesystem::remove_all(temp_dir());
}

TEST_CASE("timeline reader: foreign, wrong-version and wrongly framed files", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(3));
  REQUIRE(error_of(good) == "(accepted)");
  struct Case {
    const char* what;
    Bytes bytes;
    std::vector<std::string> says;
  };
  std::vector<Case> cases;
  cases.push_back({"empty", {}, {"timeline file: empty", "PALTIMEL"}});
  cases.push_back(
      {"a PNG", {0x89, 'P', 'N', 'G', 13, 10, 26, 10, 0, 0, 0, 13},
       {"not a pa-lab timeline", "bad magic at byte offset 0"}});
  cases.push_back({"a trace file", serialize_trace(sample_trace(2)), {"not a pa-lab timeline", "PALTIMEL"}});
  cases.push_back({"version 2", with(good, 8, 4, 2), {"unsupported version 2 (accepted: 1) at byte offset 8"}});
  cases.push_back({"version 0", with(good, 8, 4, 0), {"unsupported version 0 (accepted: 1) at byte offset 8"}});
  cases.push_back({"big-endian mark", with(good, 12, 4, 0x04030201u), {"byte order mark at byte offset 12"}});
  cases.push_back(
      {"a trace's record size", with(good, 16, 4, 72), {"span record size 72 at byte offset 16 (accepted: 48)"}});
  cases.push_back({"a smaller span", with(good, 16, 4, 40), {"span record size 40 at byte offset 16 (accepted: 48)"}});
  cases.push_back({"a flipped checksum bit", with(good, good.size() - 1, 1, good.back() ^ 1u),
                   {"checksum mismatch at byte offset " + std::to_string(good.size() - 8)}});
  Bytes longer = good;
  longer.push_back(0);
  cases.push_back({"a trailing byte", longer, {"size mismatch", "trailing bytes"}});
  int ran = 0;
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string e = error_of(c.bytes);
    for (const std::string& s : c.says) CHECK_THAT(e, ContainsSubstring(s));
    ++ran;
  }
  CHECK(ran == 10);
}

TEST_CASE("timeline reader: every truncation is refused", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(4));
  const Layout l = layout_of(good);
  int in_header = 0, in_spans = 0;
  for (std::size_t n = 0; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string e = error_of(cut);
    INFO(n << " bytes: " << e);
    const bool named = e.find("truncated") != std::string::npos || e.find("empty") != std::string::npos ||
                       e.find("size mismatch") != std::string::npos;
    CHECK(named);
    (n < l.spans_at ? in_header : in_spans) += 1;
  }
  CHECK(in_header == static_cast<int>(l.spans_at));
  CHECK(in_spans == 4 * 48 + 8);  // the spans and the checksum
  // A file cut inside its spans says how many spans the count promised.
  const Bytes cut(good.begin(), good.end() - 48);
  CHECK_THAT(error_of(cut), ContainsSubstring("span count 4 at byte offset " + std::to_string(l.count_at) +
                                              " but the file holds at most 3 spans"));
}

TEST_CASE("timeline reader: every single bit flip is refused", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(2));
  std::size_t flips = 0;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      Bytes b = good;
      b[i] ^= static_cast<std::uint8_t>(1u << bit);
      INFO("byte " << i << " bit " << bit);
      CHECK_THROWS_AS(parse_timeline(b.data(), b.size()), TimelineFormatError);
      ++flips;
    }
  }
  CHECK(flips == 8 * good.size());
}

TEST_CASE("timeline reader: counts and lengths too large for the file", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(3));
  const Layout l = layout_of(good);
  const std::string count_at = " at byte offset " + std::to_string(l.count_at);
  const std::vector<Patch> patches = {
      {"span count 2^63", l.count_at, le(8, std::uint64_t{1} << 63),
       {"span count 9223372036854775808" + count_at + " but the file holds at most 3"}},
      {"span count + 1", l.count_at, le(8, 4), {"span count 4" + count_at + " but the file holds at most 3"}},
      {"span count - 1", l.count_at, le(8, 2), {"size mismatch: 2 spans need a file of"}},
      {"header length 2^31", 20, le(4, std::uint64_t{1} << 31),
       {"header length 2147483648 at byte offset 20 is out of range"}},
      {"header length past the file", 20, le(4, good.size()), {"truncated: header length"}},
      {"header length too short", 20, le(4, 60),
       {"header length 60 at byte offset 20 is out of range (accepted: 108 .."}},
      {"number of sequences 2^30", l.seqs_at, le(4, std::uint64_t{1} << 30),
       {"number of sequences 1073741824 is out of range"}},
      {"source length 2^32-1", l.source_at, le(4, 0xffffffffu), {"string length 4294967295 is out of range"}},
      {"revision length 300", l.revision_at, le(4, 300), {"string length 300 is out of range (accepted: at most"}},
      {"launch length 2^32-1", l.launch_len_at, le(4, 0xffffffffu), {"launch length 4294967295 at byte offset"}},
      {"launch length 1 short", l.launch_len_at, le(4, peek(good, l.launch_len_at, 4) - 1), {"exactly the"}},
  };
  CHECK(check_patches(good, patches) == 11);
}

TEST_CASE("timeline reader: garbage in the header's texts and numbers", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(3));
  const Layout l = layout_of(good);
  const std::size_t source_text = l.source_at + 4, launch_text = l.launch_len_at + 4;
  const std::string region = "in the header payload, bytes 24 .. " + std::to_string(l.count_at - 1);
  const std::vector<Patch> patches = {
      {"a control byte in the source", source_text + 2, {0x01}, {"source contains control byte 1", region}},
      {"a newline in the launch", launch_text, {'\n'}, {"launch contains control byte 10"}},
      {"DEL in the revision", l.revision_at + 4, {0x7f}, {"revision contains control byte 127"}},
      {"a stray UTF-8 continuation in the source", source_text, {0x80},
       {"source is not UTF-8 (byte 0 of it, value 128"}},
      {"0xff in the launch", launch_text + 3, {0xff}, {"launch is not UTF-8 (byte 3"}},
      {"an overlong '/' in the launch", launch_text, {0xc0, 0xaf}, {"launch is not UTF-8"}},
      {"a surrogate in the source", source_text, {0xed, 0xa0, 0x80}, {"source is not UTF-8"}},
      {"a cut-off sequence at the source's end", l.source_at + 4 + peek(good, l.source_at, 4) - 1, {0xe2},
       {"source is not UTF-8"}},
      {"stage 9", 24, {9}, {"stage value 9 is not a stage", region}},
      {"dtype 7", 25, {7}, {"dtype value 7"}},
      {"head size 100", 28, le(4, 100), {"head_size 100 is not supported"}},
      {"reserved field", l.extra_at + 12, le(4, 1),
       {"reserved header field at byte offset " + std::to_string(l.extra_at + 12)}},
      {"sm_count 70000", l.extra_at, le(4, 70000), {"sm_count = 70000 is out of range (accepted: 0 .. 65536)"}},
      {"sm clock 20 GHz", l.extra_at + 4, le(4, 20'000'000), {"sm_clock_khz = 20000000 is out of range"}},
      {"timer step 2 s", l.extra_at + 8, le(4, 2'000'000'000),
       {"globaltimer_resolution_ns = 2000000000 is out of range"}},
      {"untimed 2^60 ns", l.extra_at + 16, le(8, std::uint64_t{1} << 60),
       {"untimed_ns = 1152921504606846976 is out of range"}},
      {"timed 2^60 ns", l.extra_at + 24, le(8, std::uint64_t{1} << 60), {"timed_ns = 1152921504606846976"}},
      {"dropped 2^50", l.extra_at + 32, le(8, std::uint64_t{1} << 50),
       {"dropped_spans = 1125899906842624 is out of range"}},
  };
  CHECK(check_patches(good, patches) == 18);
}

TEST_CASE("timeline reader: bad span fields name the span and its byte offset", "[trace][timeline]") {
  const Bytes good = serialize_timeline(sample_timeline(3));
  const Layout l = layout_of(good);
  const std::size_t span1 = l.spans_at + 48;  // the second span
  const std::string where = "span 1 (byte offset " + std::to_string(span1) + "): ";
  // Offsets within the span: FORMAT.md's span table.
  const std::vector<Patch> patches = {
      {"t_end before t_begin", span1 + 8, le(8, 5), {where + "t_end_ns 5 is before t_begin_ns"}},
      {"clk_end before clk_begin", span1 + 24, le(8, 5), {where + "clk_end 5 is before clk_begin"}},
      {"sm past the SM count", span1 + 36, le(2, 5),
       {where + "sm (the header's sm_count bounds it) = 5 is out of range (accepted: 0 .. 4)"}},
      {"warp 32", span1 + 38, le(2, 32), {where + "warp = 32 is out of range (accepted: 0 .. 31)"}},
      {"another stage", span1 + 40, le(1, 5),
       {where + "stage value 5 is not the header's stage (accepted: 6 = v2_partition)"}},
      {"stage 0", span1 + 40, le(1, 0), {where + "stage value 0 is not the header's stage"}},
      {"phase 200", span1 + 41, le(1, 200), {where + "phase = 200 is out of range (accepted: 0 .. 25)"}},
      {"phase count_", span1 + 41, le(1, static_cast<std::uint64_t>(Phase::count_)),
       {where + "phase = 26 is out of range"}},
      {"kernel role 6", span1 + 42, le(1, 6), {where + "kernel role = 6 is out of range (accepted: 0 .. 5)"}},
      {"reserved byte", span1 + 43, le(1, 1), {where + "reserved byte = 1 is out of range (accepted: 0 .. 0)"}},
      {"iter -2", span1 + 44, le(4, 0xfffffffeu), {where + "iter = -2 is out of range (accepted: -1 .."}},
  };
  CHECK(check_patches(good, patches) == 11);
  // Without an SM count (0: unknown) any SM number is accepted.
  TimelineData d = sample_timeline(3);
  d.header.sm_count = 0;
  d.spans[1].sm = 60000;
  CHECK_NOTHROW(validate_timeline(d));
}

TEST_CASE("timeline writer refuses what the reader would, and never loses the old file", "[trace][timeline]") {
  const auto dir = temp_dir();
  const auto path = (dir / "keep.patl").string();
  write_timeline(path, sample_timeline(2));
  const Bytes before = read_bytes(path);
  struct Case {
    const char* what;
    void (*spoil)(TimelineData&);
    const char* says;
  };
  const std::vector<Case> cases = {
      {"a span ending before it begins", [](TimelineData& d) { d.spans[0].t_end_ns = d.spans[0].t_begin_ns - 1; },
       "span 0: t_end_ns"},
      {"a phase out of range", [](TimelineData& d) { d.spans[1].phase = Phase::count_; }, "span 1: phase"},
      {"a source with a control byte", [](TimelineData& d) { d.header.source = "GPU\x1b[0m"; },
       "source contains control byte 27"},
      {"a launch text that is not UTF-8", [](TimelineData& d) { d.header.launch = "grid \xff"; },
       "launch is not UTF-8"},
      {"a launch text of 257 bytes", [](TimelineData& d) { d.header.launch.assign(257, 'x'); }, "launch is 257 bytes"},
      {"an invalid problem", [](TimelineData& d) { d.header.spec.head_size = 100; }, "head_size 100"},
  };
  int ran = 0;
  for (const Case& c : cases) {
    TimelineData d = sample_timeline(2);
    c.spoil(d);
    INFO(c.what);
    CHECK_THROWS_WITH(write_timeline(path, d), ContainsSubstring(c.says) && ContainsSubstring("timeline file: "));
    CHECK_THROWS_AS(validate_timeline(d), TimelineFormatError);
    CHECK(read_bytes(path) == before);
    ++ran;
  }
  CHECK(ran == 6);
  // A folder that does not exist: the write error names the path.
  CHECK_THROWS_AS(write_timeline((dir / "no_such_dir" / "t.patl").string(), sample_timeline(2)), core::FileWriteError);
  // Nothing but the file is left in the folder (no temporary files).
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  CHECK(entries == 1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("read_timeline names the path: missing, a folder, a device, corrupt", "[trace][timeline]") {
  const auto dir = temp_dir();
  auto read_error = [](const std::string& p) {
    try {
      read_timeline(p);
    } catch (const TimelineFormatError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string missing = (dir / "missing.patl").string();
  CHECK_THAT(read_error(missing), ContainsSubstring("cannot open timeline '" + missing + "'"));
  CHECK_THAT(read_error(dir.string()), ContainsSubstring("is a directory"));
  CHECK_THAT(read_error("/dev/zero"), ContainsSubstring("not a regular file") && ContainsSubstring(".patl"));
  const std::string trace = (dir / "a.patrace").string();
  write_trace(trace, sample_trace(2));
  CHECK_THAT(read_error(trace), ContainsSubstring("'" + trace + "': timeline file: not a pa-lab timeline"));
  CHECK(check_timeline_file(trace) == std::filesystem::file_size(trace));
  std::filesystem::remove_all(dir);
}
