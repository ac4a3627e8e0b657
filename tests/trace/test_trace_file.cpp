// Trace file format: round trip, atomic write, and a reader that rejects
// every truncated, corrupt or foreign file with a TraceFormatError.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <csignal>
#include <cstdio>
#include <iterator>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string>

#include "pa/core/timeline.hpp"
#include "pa/index/events.hpp"
#include "pa/trace/trace_file.hpp"
#include "trace_samples.hpp"

using namespace pa;
using namespace pa::trace;
using namespace pa::trace::testing;
using Catch::Matchers::ContainsSubstring;

namespace {

std::string parse_error(const std::vector<std::uint8_t>& b) {
  try {
    parse_trace(b.data(), b.size());
  } catch (const TraceFormatError& e) {
    return e.what();
  }
  return "";
}

void put_u32(std::vector<std::uint8_t>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<std::uint8_t>& b, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.at(at + i) = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get_u32(const std::vector<std::uint8_t>& b, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t{b[at + i]} << (8 * i);
  return v;
}
// Offsets from FORMAT.md.
constexpr std::size_t kHeaderLenAt = 20, kPayloadAt = 24;
std::size_t count_at(const std::vector<std::uint8_t>& b) { return kPayloadAt + get_u32(b, kHeaderLenAt); }
std::size_t event_at(const std::vector<std::uint8_t>& b, int i) { return count_at(b) + 8 + 72 * i; }

std::filesystem::path temp_dir() {
  auto p = std::filesystem::temp_directory_path() / ("pa_trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE("enum names round trip", "[trace][event]") {
  for (int v = 1; v <= 8; ++v) {
    auto s = static_cast<Stage>(v);
    REQUIRE(stage_from_string(to_string(s)) == s);
  }
  for (int v = 0; v < static_cast<int>(Step::count_); ++v) {
    auto s = static_cast<Step>(v);
    REQUIRE(step_from_string(to_string(s)) == s);
  }
  for (int v = 0; v <= static_cast<int>(Op::atomic); ++v) REQUIRE(op_from_string(to_string(Op(v))) == Op(v));
  for (int v = 0; v <= static_cast<int>(Tensor::kv_last_page_len); ++v)
    REQUIRE(tensor_from_string(to_string(Tensor(v))) == Tensor(v));
  CHECK(std::string(to_string(Stage::qk)) == "qk");
  CHECK(std::string(to_string(Step::k_load)) == "k_load");
  CHECK_FALSE(stage_from_string("QK"));
  CHECK_FALSE(is_valid(static_cast<Stage>(0)));
  CHECK_FALSE(is_valid(static_cast<Step>(Step::count_)));
  CHECK_FALSE(is_valid(static_cast<Op>(10)));
  CHECK_FALSE(is_valid(static_cast<Tensor>(27)));
}

TEST_CASE("timeline enum names round trip", "[trace][timeline]") {
  int phases = 0, roles = 0;
  for (int v = 0; v < static_cast<int>(Phase::count_); ++v, ++phases)
    REQUIRE(phase_from_string(to_string(static_cast<Phase>(v))) == static_cast<Phase>(v));
  for (int v = 0; v < static_cast<int>(KernelRole::count_); ++v, ++roles)
    REQUIRE(kernel_role_from_string(to_string(static_cast<KernelRole>(v))) == static_cast<KernelRole>(v));
  CHECK(phases == 26);
  CHECK(roles == 6);
  CHECK(std::string(to_string(Phase::opt_qk_mma)) == "opt_qk_mma");
  CHECK(std::string(to_string(static_cast<Phase>(Phase::count_))) == "invalid_phase");
  CHECK_FALSE(phase_from_string("invalid_phase"));
  CHECK_FALSE(kernel_role_from_string("Main"));
}

TEST_CASE("trace round trip in memory and on disk", "[trace][file]") {
  TraceData d = sample_trace(7);
  d.header.spec.nan_tails = false;
  d.header.spec.extra_q_stride = 5;
  // The header keeps ALiBi and an fp8 cache with its scales: a reader rebuilds the same problem.
  d.header.spec.alibi = true;
  d.header.spec.kv_dtype = KvDType::fp8_e5m2;
  d.header.spec.k_scale = 0.125f;
  d.header.spec.v_scale = 0.0f;  // from the data
  d.header.spec.page_table = PageTableForm::csr;  // the cache form: CSR tables (flag bit 4)
  const auto bytes = serialize_trace(d);
  CHECK(bytes.size() == kPayloadAt + get_u32(bytes, kHeaderLenAt) + 8 + 7 * 72 + 8);
  for (const auto& back : {parse_trace(bytes.data(), bytes.size()), [&] {
         const auto path = (temp_dir() / "rt.patrace").string();
         write_trace(path, d);
         for (const auto& e : std::filesystem::directory_iterator(temp_dir()))  // no temporary file left
           CHECK(e.path().filename().string().rfind("rt.patrace.tmp", 0) == std::string::npos);
         return read_trace(path);
       }()}) {
    const ProblemSpec& a = d.header.spec;
    const ProblemSpec& b = back.header.spec;
    CHECK(b.dtype == a.dtype);
    CHECK(b.head_size == a.head_size);
    CHECK(b.block_size == a.block_size);
    CHECK(b.num_threads == a.num_threads);
    CHECK(b.num_heads == a.num_heads);
    CHECK(b.num_kv_heads == a.num_kv_heads);
    CHECK(b.context_lens == a.context_lens);
    CHECK(b.partition_size == a.partition_size);
    CHECK(b.shared_prefix_len == a.shared_prefix_len);
    CHECK(b.extra_q_stride == a.extra_q_stride);
    CHECK(b.spare_blocks == a.spare_blocks);
    CHECK(b.nan_tails == a.nan_tails);
    CHECK(b.alibi == a.alibi);
    CHECK(b.kv_dtype == a.kv_dtype);
    CHECK(b.k_scale == a.k_scale);
    CHECK(b.v_scale == a.v_scale);
    CHECK(b.kv_layout == a.kv_layout);
    CHECK(b.page_table == PageTableForm::csr);
    CHECK(b.seed == a.seed);
    CHECK(b.logit_spread == a.logit_spread);
    CHECK(back.header.stage == d.header.stage);
    CHECK(back.header.source == d.header.source);
    CHECK(back.header.revision == d.header.revision);
    REQUIRE(back.events.size() == d.events.size());
    for (std::size_t i = 0; i < d.events.size(); ++i) CHECK(same_event(back.events[i], d.events[i]));
  }  // The token-row layouts (bits 2-3; 16-bit caches only).
  int layouts = 0;
  for (const KvLayout l : {KvLayout::nhd, KvLayout::hnd}) {
    TraceData t = sample_trace(3);
    t.header.spec.kv_layout = l;
    const auto b2 = serialize_trace(t);
    CHECK(b2[kPayloadAt + 2] == ((t.header.spec.nan_tails ? 1 : 0) | (t.header.spec.alibi ? 2 : 0) |
                                  (static_cast<int>(l) << 2)));
    CHECK(parse_trace(b2.data(), b2.size()).header.spec.kv_layout == l);
    ++layouts;
  }
  CHECK(layouts == 2);
}

TEST_CASE("the file is little-endian and starts with the documented prefix", "[trace][file]") {
  const auto b = serialize_trace(sample_trace(1));
  CHECK(std::string(b.begin(), b.begin() + 8) == "PALTRACE");
  CHECK(get_u32(b, 8) == 2);            // version
  CHECK(get_u32(b, 12) == 0x01020304);  // byte order mark
  CHECK(b[12] == 0x04);
  CHECK(get_u32(b, 16) == 72);  // event record size
  const std::size_t e0 = event_at(b, 0);
  CHECK(b[e0] == static_cast<std::uint8_t>(Stage::qk));
  CHECK(b[e0 + 1] == static_cast<std::uint8_t>(Step::k_load));
  // byte_offset at record offset 56, little-endian: sample event 0 has 8.
  CHECK(b[e0 + 56] == 8);
}

TEST_CASE("every truncation of a small trace is rejected", "[trace][file][corrupt]") {
  const auto full = serialize_trace(sample_trace(3));
  for (std::size_t n = 0; n < full.size(); ++n) {
    std::vector<std::uint8_t> b(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    INFO("length " << n << " of " << full.size());
    REQUIRE_FALSE(parse_error(b).empty());
    // Without the checksum gate too: truncation is caught structurally.
    REQUIRE_THROWS_AS(parse_trace_unchecked_for_fuzzing(b.data(), b.size()), TraceFormatError);
  }
  auto longer = full;
  longer.push_back(0);
  CHECK_THAT(parse_error(longer), ContainsSubstring("size mismatch"));
}

TEST_CASE("every single bit flip is rejected", "[trace][file][corrupt]") {
  const auto full = serialize_trace(sample_trace(3));
  for (std::size_t i = 0; i < full.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto b = full;
      b[i] ^= static_cast<std::uint8_t>(1u << bit);
      INFO("byte " << i << " bit " << bit);
      REQUIRE_FALSE(parse_error(b).empty());
    }
  }
}

TEST_CASE("foreign and corrupt files give clear errors", "[trace][file][corrupt]") {
  const auto good = serialize_trace(sample_trace(3));

  SECTION("empty and foreign") {
    CHECK_THAT(parse_error({}), ContainsSubstring("empty"));
    std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', 13, 10, 26, 10, 0, 0, 0, 13};
    CHECK_THAT(parse_error(png), ContainsSubstring("bad magic"));
    auto b = good;
    b[0] = 'X';
    CHECK_THAT(parse_error(b), ContainsSubstring("bad magic"));
    CHECK_THAT(parse_error({'P', 'A', 'L'}), ContainsSubstring("truncated"));
  }
  SECTION("version, byte order, record size") {
    auto b = good;
    put_u32(b, 8, 3);
    CHECK_THAT(parse_error(b), ContainsSubstring("unsupported version 3 (accepted: 2)"));
    // A file of the first version: the reader says why and what to do.
    b = good;
    put_u32(b, 8, 1);
    CHECK_THAT(parse_error(b), ContainsSubstring("shuffle masks as loop iterations"));
    CHECK_THAT(parse_error(b), ContainsSubstring("pa-lab trace"));
    b = good;
    put_u32(b, 12, 0x04030201);
    CHECK_THAT(parse_error(b), ContainsSubstring("byte order"));
    b = good;
    put_u32(b, 16, 64);
    CHECK_THAT(parse_error(b), ContainsSubstring("record size 64"));
  }
  SECTION("huge counts never allocate") {
    for (std::uint64_t n : {std::uint64_t{4}, std::uint64_t{1} << 32, ~std::uint64_t{0}, std::uint64_t{1} << 61}) {
      auto b = good;
      put_u64(b, count_at(b), n);
      fix_checksum(b);
      INFO("count " << n);
      CHECK_THAT(parse_error(b), ContainsSubstring("event count"));
    }
    auto b = good;
    put_u32(b, kHeaderLenAt, 0xffffffffu);
    fix_checksum(b);
    CHECK_THAT(parse_error(b), ContainsSubstring("header length"));
    b = good;
    put_u32(b, kPayloadAt + 52, 0x7fffffff);  // number of sequences
    fix_checksum(b);
    CHECK_THAT(parse_error(b), ContainsSubstring("number of sequences"));
    b = good;
    put_u32(b, kPayloadAt + 56 + 4 * 2, 0xfffffff0u);  // source length
    fix_checksum(b);
    CHECK_THAT(parse_error(b), ContainsSubstring("string length"));
  }
  SECTION("checksum") {
    auto b = good;
    b[event_at(b, 1) + 20] ^= 1;  // a plausible field change
    CHECK_THAT(parse_error(b), ContainsSubstring("checksum"));
  }
  SECTION("bad enum values and field ranges, with a valid checksum") {
    struct Case { std::size_t rec_off; std::uint8_t width; std::uint64_t value; const char* msg; };
    const Case cases[] = {
        {0, 1, 0, "stage value 0"},       {0, 1, 9, "stage value 9"},
        {1, 1, 28, "step value 28"},      {1, 1, 255, "step value 255"},
        {2, 1, 10, "op value 10"},        {3, 1, 27, "tensor value 27"},
        {4, 2, 4, "warp"},                {6, 2, 32, "lane"},
        {8, 4, 2, "seq"},                 {8, 4, 0xffffffff, "seq"},
        {12, 4, 4, "head"},               {16, 4, 1, "partition"},
        {20, 4, 2, "kv_head"},            {24, 4, 0xfffffffe, "iter"},
        {28, 4, 0xffffffff, "epoch"},     {32, 4, 0x80000000, "seq_in_thread"},
        {36, 4, 32, "token"},             {40, 4, 2, "logical_block"},
        {44, 4, 1000, "physical_block"},  {48, 4, 128, "dim_begin"},
        {52, 2, 129, "dim_count"},        {52, 2, 0xffff, "dim_count"},
        {54, 1, 5, "src_lane (only shuffles"}, {55, 1, 0x80, "lane_iter"},
        {56, 8, 0xfffffffffffffffeull, "byte_offset"}, {64, 4, 1u << 20, "bytes"},
    };
    for (const Case& c : cases) {
      auto b = good;
      const std::size_t at = event_at(b, 0) + c.rec_off;
      for (int i = 0; i < c.width; ++i) b[at + i] = static_cast<std::uint8_t>(c.value >> (8 * i));
      fix_checksum(b);
      INFO("record offset " << c.rec_off << " value " << c.value);
      const std::string err = parse_error(b);
      CHECK_THAT(err, ContainsSubstring(c.msg));
      CHECK_THAT(err, ContainsSubstring("event 0"));
    }
    // dim_begin + dim_count past the head.
    auto b = good;
    put_u32(b, event_at(b, 0) + 48, 126);
    fix_checksum(b);
    CHECK_THAT(parse_error(b), ContainsSubstring("dim_begin + dim_count"));
  }
  SECTION("bad header fields, with a valid checksum") {
    struct Case { std::size_t off; std::uint8_t width; std::uint64_t value; const char* msg; };
    const Case cases[] = {
        {0, 1, 0, "stage"},        {1, 1, 3, "dtype"},          {2, 1, 32, "flags"}, {2, 1, 12, "flags"},
        {3, 1, 3, "kv cache dtype"}, {4, 4, 100, "head_size"},    {8, 4, 64, "block_size"},
        {12, 4, 96, "num_threads"}, {16, 4, 0, "num_heads"},     {20, 4, 3, "num_kv_heads"},
        {24, 4, 100, "partition_size"}, {28, 4, 16, "shared_prefix_len"},
        {32, 4, 0xffffffff, "extra_q_stride"}, {36, 4, 0x80000000, "spare_blocks"},
        {48, 4, 0x7f800000, "logit_spread"}, {56, 4, 0, "context_lens[0]"},
    };
    for (const Case& c : cases) {
      auto b = good;
      for (int i = 0; i < c.width; ++i) b[kPayloadAt + c.off + i] = static_cast<std::uint8_t>(c.value >> (8 * i));
      fix_checksum(b);
      INFO("header offset " << c.off);
      CHECK_THAT(parse_error(b), ContainsSubstring(c.msg));
    }
    auto b = good;
    b[kPayloadAt + 56 + 8 + 4] = 0x07;  // a control byte in the source string
    fix_checksum(b);
    CHECK_THAT(parse_error(b), ContainsSubstring("control byte"));
  }
}

TEST_CASE("the writer is atomic and refuses invalid data", "[trace][file]") {
  const auto dir = temp_dir();
  SECTION("missing directory: error, no file") {
    const auto path = (dir / "no_such_dir" / "t.patrace").string();
    CHECK_THROWS_WITH(write_trace(path, sample_trace(2)), ContainsSubstring("no_such_dir"));
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK_FALSE(std::filesystem::exists(dir / "no_such_dir"));
  }
  SECTION("invalid data: error, the old file is kept") {
    const auto path = (dir / "keep.patrace").string();
    write_trace(path, sample_trace(2));
    TraceData bad = sample_trace(2);
    bad.events[1].lane = 40;
    CHECK_THROWS_AS(write_trace(path, bad), TraceFormatError);
    CHECK(read_trace(path).events.size() == 2);
    bad = sample_trace(2);
    bad.header.source = std::string(300, 'g');
    CHECK_THROWS_AS(write_trace(path, bad), TraceFormatError);
  }
  SECTION("a write the system refuses: error, the old file is kept, no temporary file") {
    const auto path = (dir / "kept.patrace").string();
    write_trace(path, sample_trace(2));
    const std::size_t entries = std::distance(std::filesystem::directory_iterator(dir), {});
    // RLIMIT_FSIZE: write(2) fails with EFBIG past 16 bytes (SIGXFSZ ignored).
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved;
    small.rlim_cur = 16;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string error;
    try {
      write_trace(path, sample_trace(5));
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    CHECK_THAT(error, ContainsSubstring(path) && ContainsSubstring("File too large"));
    CHECK(read_trace(path).events.size() == 2);
    CHECK(static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), {})) == entries);
  }
  SECTION("reading a missing file or a directory") {
    CHECK_THROWS_AS(read_trace((dir / "missing.patrace").string()), TraceFormatError);
    CHECK_THROWS_AS(read_trace(dir.string()), TraceFormatError);
  }
  CHECK(std::string(build_revision()).size() > 0);
}

TEST_CASE("hostile files: refused before anything is allocated from them, the limit named", "[trace][file][corrupt]") {
  SECTION("a header whose problem, every field in range, would not fit in memory") {
    auto b = serialize_trace(sample_trace(3));
    const std::size_t hp = kPayloadAt;  // header payload: FORMAT.md's field order
    put_u32(b, hp + 16, 65536);         // num_heads (the most the format allows)
    put_u32(b, hp + 20, 65536);         // num_kv_heads
    const std::uint32_t nseq = get_u32(b, hp + 52);
    for (std::uint32_t i = 0; i < nseq; ++i) put_u32(b, hp + 56 + 4 * i, 1u << 24);  // the longest context
    fix_checksum(b);
    const std::string e = parse_error(b);
    INFO(e);
    CHECK_THAT(e, ContainsSubstring("host memory") && ContainsSubstring("at most") &&
                      ContainsSubstring("half of this machine's memory"));
  }
  const auto dir = temp_dir();
  const auto read_error = [](const std::string& path) {
    try {
      read_trace(path);
    } catch (const TraceFormatError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SECTION("a file larger than the readers accept (sparse: no disk used)") {
    const auto path = (dir / "huge.patrace").string();
    std::filesystem::remove(path);
    { std::ofstream(path) << "PALTRACE"; }
    std::filesystem::resize_file(path, kTraceMaxFileBytes + 1);
    const std::string e = read_error(path);
    INFO(e);
    CHECK_THAT(e, ContainsSubstring(std::to_string(kTraceMaxFileBytes + 1) + " bytes") &&
                      ContainsSubstring("kTraceMaxFileBytes"));
    CHECK_THROWS_AS(check_trace_file(path), TraceFormatError);
    std::filesystem::remove(path);
  }
  SECTION("endless or blocking inputs: a device, a pipe") {
    CHECK_THAT(read_error("/dev/zero"), ContainsSubstring("not a regular file"));
    const auto fifo = (dir / "pipe.patrace").string();
    std::filesystem::remove(fifo);
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(read_error(fifo), ContainsSubstring("not a regular file"));  // opening it would block
    std::filesystem::remove(fifo);
  }
}

TEST_CASE("block labels: accepted in stage 6 / 7 traces only", "[trace][file]") {
  auto with = [](Stage stage, int partition, int warp) {
    TraceData d = sample_trace(1);
    d.header.stage = stage;
    d.events[0].stage = stage;
    d.events[0].partition = partition;
    d.events[0].warp = static_cast<std::uint16_t>(warp);
    return d;
  };
  auto ok = [](const TraceData& d) {
    try {
      const auto b = serialize_trace(d);
      const TraceData back = parse_trace(b.data(), b.size());
      return back.events.size() == 1 && back.events[0].partition == d.events[0].partition;
    } catch (const TraceFormatError&) {
      return false;
    }
  };
  CHECK(ok(with(Stage::v2_partition, kReduceBlock, 0)));
  CHECK_FALSE(ok(with(Stage::v2_partition, kMergeBlock, 0)));
  CHECK_FALSE(ok(with(Stage::qk, kReduceBlock, 0)));
  for (int label : {kReduceBlock, kPrefixReduceBlock, kMergeBlock, kPrefixBlockBase, kPrefixBlockBase + 7})
    CHECK(ok(with(Stage::cascade_merge, label, 0)));
  CHECK_FALSE(ok(with(Stage::cascade_merge, -4, 0)));
  // The merge kernel's 256-thread blocks: warps 0..7, for label -3 only.
  CHECK(ok(with(Stage::cascade_merge, kMergeBlock, 7)));
  CHECK_FALSE(ok(with(Stage::cascade_merge, kMergeBlock, 8)));
  CHECK_FALSE(ok(with(Stage::cascade_merge, kReduceBlock, 7)));
}
