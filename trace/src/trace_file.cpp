// Trace file writer and reader. The layout is documented in trace/FORMAT.md;
// every field is serialized explicitly in little-endian order (never a raw
// struct dump), so files are portable and the reader can check each field.
//
// Reader discipline: every length or count read from the file is bounded by
// the bytes actually present before anything is allocated from it, every enum
// and field is range-checked, and every failure is a TraceFormatError.
#include "pa/trace/trace_file.hpp"

#include "pa/core/atomic_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <unistd.h>

#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/merge.hpp"

#ifndef PA_SOURCE_REVISION
#define PA_SOURCE_REVISION "unknown"
#endif

namespace pa::trace {

const char* build_revision() { return PA_SOURCE_REVISION; }

namespace {

constexpr std::uint32_t kByteOrderMark = 0x01020304u;
constexpr std::size_t kPrefixBytes = 24;   // magic, version, bom, record size, header length
constexpr std::size_t kFixedHeaderBytes = 4 + 9 * 4 + 8 + 4 + 4;  // up to and with num_seqs
constexpr std::size_t kMaxHeaderBytes = 1u << 24;  // 16 MiB: ~4M sequences, far beyond any lab problem
constexpr int kMaxSeqs = 1 << 20;
constexpr int kMaxContextLen = 1 << 24;
constexpr int kMaxHeads = 1 << 16;
constexpr int kMaxExtraStride = 1 << 20;
constexpr int kMaxSpareBlocks = 1 << 20;
constexpr int kMaxAccessBytes = 4096;

[[noreturn]] void fail(const std::string& what) { throw TraceFormatError("trace file: " + what); }

// FNV-1a, 64 bit: simple, no table, good enough to catch corruption (not tampering).
std::uint64_t fnv1a64(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

class Writer {
 public:
  std::vector<std::uint8_t> buf;
  void u8(std::uint8_t v) { buf.push_back(v); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i32(std::int32_t v) { put(static_cast<std::uint32_t>(v), 4); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  void f32(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u32(u);
  }
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
};

// Bounds-checked little-endian cursor over [p, p + n).
class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return n_ - pos_; }
  void need(std::size_t k, const char* what) const {
    if (k > left()) {
      fail(std::string("truncated: ") + what + " needs " + std::to_string(k) + " bytes at offset " +
           std::to_string(pos_) + ", only " + std::to_string(left()) + " left");
    }
  }
  std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(get(1, what)); }
  std::uint16_t u16(const char* what) { return static_cast<std::uint16_t>(get(2, what)); }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(get(4, what)); }
  std::uint64_t u64(const char* what) { return get(8, what); }
  std::int32_t i32(const char* what) { return static_cast<std::int32_t>(u32(what)); }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(u64(what)); }
  float f32(const char* what) {
    const std::uint32_t u = u32(what);
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const std::uint8_t* take(std::size_t k, const char* what) {
    need(k, what);
    const std::uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }

 private:
  std::uint64_t get(int k, const char* what) {
    need(static_cast<std::size_t>(k), what);
    std::uint64_t v = 0;
    for (int i = 0; i < k; ++i) v |= static_cast<std::uint64_t>(p_[pos_ + i]) << (8 * i);
    pos_ += static_cast<std::size_t>(k);
    return v;
  }
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

void check_range(long long v, long long lo, long long hi, const std::string& what) {
  if (v < lo || v > hi) {
    fail(what + " = " + std::to_string(v) + " is out of range (accepted: " + std::to_string(lo) +
         " .. " + std::to_string(hi) + ")");
  }
}

void check_text(const std::string& s, const char* what) {
  if (s.size() > kTraceMaxStringBytes) {
    fail(std::string(what) + " is " + std::to_string(s.size()) + " bytes (accepted: at most " +
         std::to_string(kTraceMaxStringBytes) + ")");
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      fail(std::string(what) + " contains control byte " + std::to_string(c) +
           " (accepted: printable text)");
    }
  }
}

void validate_header(const TraceHeader& h) {
  const ProblemSpec& s = h.spec;
  if (!is_valid(h.stage)) {
    fail("stage value " + std::to_string(static_cast<int>(h.stage)) + " is not a stage (accepted: 1 .. 8)");
  }
  const auto dt = static_cast<unsigned>(s.dtype);
  if (dt > 2) fail("dtype value " + std::to_string(dt) + " is not a dtype (accepted: 0=fp32, 1=fp16, 2=bf16)");
  check_range(s.num_heads, 1, kMaxHeads, "num_heads");
  check_range(s.num_kv_heads, 1, s.num_heads, "num_kv_heads");
  check_range(static_cast<long long>(s.context_lens.size()), 1, kMaxSeqs, "number of sequences");
  int min_ctx = kMaxContextLen;
  for (std::size_t i = 0; i < s.context_lens.size(); ++i) {
    check_range(s.context_lens[i], 1, kMaxContextLen, "context_lens[" + std::to_string(i) + "]");
    min_ctx = std::min(min_ctx, s.context_lens[i]);
  }
  check_range(s.partition_size, 0, kMaxContextLen, "partition_size");
  check_range(s.shared_prefix_len, 0, min_ctx, "shared_prefix_len");
  check_range(s.extra_q_stride, 0, kMaxExtraStride, "extra_q_stride");
  check_range(s.spare_blocks, 0, kMaxSpareBlocks, "spare_blocks");
  if (!std::isfinite(s.logit_spread)) fail("logit_spread is not finite");
  // The format's own bounds above; the problem's rules (supported head,
  // block and thread counts, GQA divisibility, partition and prefix
  // multiples) are ProblemSpec::validate's, once. Every field may be in range
  // and the problem still too large for any reader to build (the viewer builds
  // its reference values and host model from the header): validate refuses
  // that too, naming the limit, before anything is allocated from it.
  try {
    s.validate();
  } catch (const ProblemError& e) {
    fail(e.what());
  }
  check_text(h.source, "source");
  check_text(h.revision, "revision");
}

struct EventBounds {
  int num_warps, num_seqs, num_heads, num_kv_heads, max_partitions, head_size;
  long long max_tokens, max_blocks, pool_blocks;
  Stage stage = Stage::q_to_smem;  // the header's: which block labels it may hold
};

EventBounds bounds_of(const ProblemSpec& s, Stage stage) {
  EventBounds b{};
  int max_ctx = 0;
  for (int c : s.context_lens) max_ctx = std::max(max_ctx, c);
  b.num_warps = s.num_threads / kWarpSize;
  b.num_seqs = static_cast<int>(s.context_lens.size());
  b.num_heads = s.num_heads;
  b.num_kv_heads = s.num_kv_heads;
  b.max_partitions = num_partitions(max_ctx, s.partition_size);
  b.head_size = s.head_size;
  b.max_blocks = ceil_div(max_ctx, s.block_size);
  // Kernels may touch the padding tokens of a sequence's last block.
  b.max_tokens = b.max_blocks * s.block_size;
  // The pool never holds more than every sequence's blocks plus the spare ones.
  b.pool_blocks = b.max_blocks * b.num_seqs + s.spare_blocks;
  b.stage = stage;
  // Stage 8: partition = the split; a split holds at least one block.
  if (stage == Stage::optimized) b.max_partitions = static_cast<int>(std::max<long long>(1, b.max_blocks));
  return b;
}

void validate_event(const Event& e, const EventBounds& b, std::size_t index) {
  const std::string at = "event " + std::to_string(index) + ": ";
  auto bad_enum = [&](const char* name, int v) {
    fail(at + name + " value " + std::to_string(v) + " is not a valid " + name);
  };
  if (!is_valid(e.stage)) bad_enum("stage", static_cast<int>(e.stage));
  if (!is_valid(e.step)) bad_enum("step", static_cast<int>(e.step));
  if (!is_valid(e.op)) bad_enum("op", static_cast<int>(e.op));
  if (!is_valid(e.tensor)) bad_enum("tensor", static_cast<int>(e.tensor));
  // The merge kernel (stage 7) runs 256-thread blocks (MergeGrid, merge.hpp).
  const int warps = b.stage == Stage::cascade_merge && e.partition == kMergeBlock
                        ? std::max(b.num_warps, MergeGrid::kThreads / kWarpSize)
                        : b.num_warps;
  check_range(e.warp, 0, warps - 1, at + "warp");
  check_range(e.lane, 0, kWarpSize - 1, at + "lane");
  check_range(e.seq, 0, b.num_seqs - 1, at + "seq");
  check_range(e.head, 0, b.num_heads - 1, at + "head");
  // A partition index, or a block label (pa/index/events.hpp): stage 6 traces
  // hold the reduce block, stage 7 traces every label.
  const bool label = (b.stage == Stage::v2_partition && e.partition == kReduceBlock) ||
                     (b.stage == Stage::cascade_merge &&
                      (e.partition == kReduceBlock || e.partition == kPrefixReduceBlock ||
                       e.partition == kMergeBlock || is_prefix_block(e.partition)));
  if (!label) {
    check_range(e.partition, 0, b.max_partitions - 1, at + "partition");
  }
  check_range(e.kv_head, -1, b.num_kv_heads - 1, at + "kv_head");
  check_range(e.iter, -1, std::numeric_limits<std::int32_t>::max(), at + "iter");
  check_range(e.epoch, 0, std::numeric_limits<std::int32_t>::max(), at + "epoch");
  check_range(e.seq_in_thread, 0, std::numeric_limits<std::int32_t>::max(), at + "seq_in_thread");
  check_range(e.token, -1, b.max_tokens - 1, at + "token");
  check_range(e.logical_block, -1, b.max_blocks - 1, at + "logical_block");
  check_range(e.physical_block, -1, b.pool_blocks - 1, at + "physical_block");
  check_range(e.dim_begin, -1, b.head_size - 1, at + "dim_begin");
  check_range(e.dim_count, 0, b.head_size, at + "dim_count");
  if (e.dim_begin >= 0) check_range(e.dim_begin + e.dim_count, 0, b.head_size, at + "dim_begin + dim_count");
  // Every shuffle names its source lane (the replay orders it after that
  // lane's earlier events); no other op has one.
  if (e.op == Op::shuffle) check_range(e.src_lane, 0, kWarpSize - 1, at + "src_lane of a shuffle");
  else check_range(e.src_lane, -1, -1, at + "src_lane (only shuffles have one)");
  check_range(e.lane_iter, -1, 127, at + "lane_iter");
  check_range(e.byte_offset, -1, std::numeric_limits<std::int64_t>::max(), at + "byte_offset");
  check_range(e.bytes, 0, kMaxAccessBytes, at + "bytes");
}

void write_event(Writer& w, const Event& e) {
  const std::size_t start = w.buf.size();
  w.u8(static_cast<std::uint8_t>(e.stage));
  w.u8(static_cast<std::uint8_t>(e.step));
  w.u8(static_cast<std::uint8_t>(e.op));
  w.u8(static_cast<std::uint8_t>(e.tensor));
  w.u16(e.warp);
  w.u16(e.lane);
  for (std::int32_t v : {e.seq, e.head, e.partition, e.kv_head, e.iter, e.epoch, e.seq_in_thread, e.token,
                         e.logical_block, e.physical_block, e.dim_begin}) {
    w.i32(v);
  }
  w.u16(static_cast<std::uint16_t>(e.dim_count));
  w.u8(static_cast<std::uint8_t>(e.src_lane));
  w.u8(static_cast<std::uint8_t>(e.lane_iter));
  w.i64(e.byte_offset);
  w.i32(e.bytes);
  w.f32(e.value);
  (void)start;
}

Event read_event(Reader& r) {
  Event e{};
  e.stage = static_cast<Stage>(r.u8("event"));
  e.step = static_cast<Step>(r.u8("event"));
  e.op = static_cast<Op>(r.u8("event"));
  e.tensor = static_cast<Tensor>(r.u8("event"));
  e.warp = r.u16("event");
  e.lane = r.u16("event");
  for (std::int32_t* f : {&e.seq, &e.head, &e.partition, &e.kv_head, &e.iter, &e.epoch, &e.seq_in_thread,
                          &e.token, &e.logical_block, &e.physical_block, &e.dim_begin}) {
    *f = r.i32("event");
  }
  e.dim_count = static_cast<std::int16_t>(r.u16("event"));
  e.src_lane = static_cast<std::int8_t>(r.u8("event"));
  e.lane_iter = static_cast<std::int8_t>(r.u8("event"));
  e.byte_offset = r.i64("event");
  e.bytes = r.i32("event");
  e.value = r.f32("event");
  return e;
}

}  // namespace

void validate_trace(const TraceData& data) {
  validate_header(data.header);
  const EventBounds b = bounds_of(data.header.spec, data.header.stage);
  for (std::size_t i = 0; i < data.events.size(); ++i) validate_event(data.events[i], b, i);
}

std::vector<std::uint8_t> serialize_trace(const TraceData& data) {
  validate_trace(data);
  const TraceHeader& h = data.header;
  const ProblemSpec& s = h.spec;

  Writer hw;  // header payload
  hw.u8(static_cast<std::uint8_t>(h.stage));
  hw.u8(static_cast<std::uint8_t>(s.dtype));
  hw.u8(s.nan_tails ? 1 : 0);  // flags: bit 0 = nan_tails
  hw.u8(0);                    // reserved
  for (int v : {s.head_size, s.block_size, s.num_threads, s.num_heads, s.num_kv_heads, s.partition_size,
                s.shared_prefix_len, s.extra_q_stride, s.spare_blocks}) {
    hw.i32(v);
  }
  hw.u64(s.seed);
  hw.f32(s.logit_spread);
  hw.u32(static_cast<std::uint32_t>(s.context_lens.size()));
  for (int c : s.context_lens) hw.i32(c);
  hw.u32(static_cast<std::uint32_t>(h.source.size()));
  hw.bytes(h.source.data(), h.source.size());
  hw.u32(static_cast<std::uint32_t>(h.revision.size()));
  hw.bytes(h.revision.data(), h.revision.size());

  Writer w;
  w.buf.reserve(kPrefixBytes + hw.buf.size() + 16 + data.events.size() * kTraceEventBytes);
  w.bytes(kTraceMagic, sizeof kTraceMagic);
  w.u32(kTraceVersion);
  w.u32(kByteOrderMark);
  w.u32(kTraceEventBytes);
  w.u32(static_cast<std::uint32_t>(hw.buf.size()));
  w.bytes(hw.buf.data(), hw.buf.size());
  w.u64(data.events.size());
  for (const Event& e : data.events) write_event(w, e);
  w.u64(fnv1a64(w.buf.data(), w.buf.size()));
  return std::move(w.buf);
}

namespace {
TraceData parse_impl(const std::uint8_t* bytes, std::size_t size, bool verify_checksum) {
  if (bytes == nullptr || size == 0) fail("empty: 0 bytes (a trace starts with \"PALTRACE\")");
  Reader r(bytes, size);
  const std::size_t magic_avail = std::min(size, sizeof kTraceMagic);
  if (std::memcmp(bytes, kTraceMagic, magic_avail) != 0) {
    fail("not a pa-lab trace (bad magic; expected the file to start with \"PALTRACE\")");
  }
  if (size < kPrefixBytes + kFixedHeaderBytes + 4 + 4 + 8 + 8) {
    fail("truncated: " + std::to_string(size) + " bytes is shorter than the smallest possible trace (" +
         std::to_string(kPrefixBytes + kFixedHeaderBytes + 24) + " bytes)");
  }
  r.take(sizeof kTraceMagic, "magic");
  const std::uint32_t version = r.u32("version");
  if (version != kTraceVersion) {
    fail("unsupported version " + std::to_string(version) + " (accepted: " + std::to_string(kTraceVersion) +
         (version == 1 ? "; version 1 stored shuffle masks as loop iterations and no source lanes: record the "
                         "trace again with pa-lab trace)"
                       : ")"));
  }
  const std::uint32_t bom = r.u32("byte order mark");
  if (bom != kByteOrderMark) fail("bad byte order mark (the file is not little-endian or is corrupt)");
  const std::uint32_t rec = r.u32("event record size");
  if (rec != kTraceEventBytes) {
    fail("event record size " + std::to_string(rec) + " (accepted: " + std::to_string(kTraceEventBytes) + ")");
  }
  const std::uint32_t header_len = r.u32("header length");
  if (header_len < kFixedHeaderBytes + 8 || header_len > kMaxHeaderBytes) {
    fail("header length " + std::to_string(header_len) + " is out of range (accepted: " +
         std::to_string(kFixedHeaderBytes + 8) + " .. " + std::to_string(kMaxHeaderBytes) + ")");
  }
  // Header, then the event count and the checksum must still fit.
  if (static_cast<std::uint64_t>(header_len) + 16 > r.left()) {
    fail("truncated: header length " + std::to_string(header_len) + " but only " +
         std::to_string(r.left()) + " bytes follow");
  }
  const std::size_t after_header = r.pos() + header_len;
  // The event count is bounded by the bytes present before anything is allocated.
  Reader cr(bytes, size);
  cr.take(after_header, "header");
  const std::uint64_t count = cr.u64("event count");
  const std::uint64_t room = (size - after_header - 16) / kTraceEventBytes;
  if (count > room) {
    fail("truncated or corrupt: event count " + std::to_string(count) + " but the file holds at most " +
         std::to_string(room) + " events");
  }
  const std::uint64_t expect = after_header + 8 + count * kTraceEventBytes + 8;
  if (expect != size) {
    fail("size mismatch: " + std::to_string(count) + " events need a file of " + std::to_string(expect) +
         " bytes, found " + std::to_string(size) + " (trailing bytes or corrupt count)");
  }
  if (verify_checksum) {
    Reader kr(bytes, size);
    kr.take(size - 8, "body");
    const std::uint64_t stored = kr.u64("checksum");
    const std::uint64_t actual = fnv1a64(bytes, size - 8);
    if (stored != actual) fail("checksum mismatch: the file is corrupt");
  }

  // Header payload: read within its own bounds so a wrong length cannot leak
  // into the events.
  Reader hr(r.take(header_len, "header"), header_len);
  TraceData d;
  TraceHeader& h = d.header;
  ProblemSpec& s = h.spec;
  h.stage = static_cast<Stage>(hr.u8("stage"));
  const std::uint8_t dt = hr.u8("dtype");
  if (dt > 2) fail("dtype value " + std::to_string(dt) + " is not a dtype (accepted: 0=fp32, 1=fp16, 2=bf16)");
  s.dtype = static_cast<DType>(dt);
  const std::uint8_t flags = hr.u8("flags");
  if ((flags & ~1u) != 0) fail("unknown header flags " + std::to_string(flags) + " (accepted: bit 0 = nan_tails)");
  s.nan_tails = (flags & 1u) != 0;
  if (hr.u8("reserved") != 0) fail("reserved header byte is not zero");
  for (int* f : {&s.head_size, &s.block_size, &s.num_threads, &s.num_heads, &s.num_kv_heads, &s.partition_size,
                 &s.shared_prefix_len, &s.extra_q_stride, &s.spare_blocks}) {
    *f = hr.i32("header field");
  }
  s.seed = hr.u64("seed");
  s.logit_spread = hr.f32("logit_spread");
  const std::uint32_t nseq = hr.u32("number of sequences");
  if (nseq == 0 || nseq > static_cast<std::uint32_t>(kMaxSeqs) || nseq > hr.left() / 4) {
    fail("number of sequences " + std::to_string(nseq) + " is out of range (accepted: 1 .. " +
         std::to_string(std::min<std::size_t>(kMaxSeqs, hr.left() / 4)) + " for this header length)");
  }
  s.context_lens.resize(nseq);
  for (auto& c : s.context_lens) c = hr.i32("context length");
  for (std::string* str : {&h.source, &h.revision}) {
    const std::uint32_t n = hr.u32("string length");
    if (n > kTraceMaxStringBytes || n > hr.left()) {
      fail("string length " + std::to_string(n) + " is out of range (accepted: at most " +
           std::to_string(std::min<std::size_t>(kTraceMaxStringBytes, hr.left())) + ")");
    }
    const std::uint8_t* p = hr.take(n, "string");
    str->assign(reinterpret_cast<const char*>(p), n);
  }
  if (hr.left() != 0) {
    fail("header length " + std::to_string(header_len) + " leaves " + std::to_string(hr.left()) +
         " unread bytes (corrupt header)");
  }
  validate_header(h);

  r.u64("event count");
  const EventBounds b = bounds_of(s, h.stage);
  d.events.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    d.events.push_back(read_event(r));
    validate_event(d.events.back(), b, static_cast<std::size_t>(i));
  }
  return d;
}
}  // namespace

TraceData parse_trace(const std::uint8_t* bytes, std::size_t size) { return parse_impl(bytes, size, true); }

// For the fuzzer: the same parser without the checksum gate, so mutated
// inputs reach the field validation instead of stopping at the checksum.
TraceData parse_trace_unchecked_for_fuzzing(const std::uint8_t* bytes, std::size_t size) {
  return parse_impl(bytes, size, false);
}

void write_trace(const std::string& path, const TraceData& data) {
  // Serialized (and validated) first, so an invalid trace never touches the disk.
  const std::vector<std::uint8_t> buf = serialize_trace(data);
  core::write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(buf.data()), buf.size()));
}

std::uint64_t check_trace_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) {
    throw TraceFormatError("cannot open trace '" + path + "': " + (ec ? ec.message() : "no such file"));
  }
  if (std::filesystem::is_directory(st)) throw TraceFormatError("trace file '" + path + "' is a directory");
  if (!std::filesystem::is_regular_file(st)) {
    throw TraceFormatError("trace file '" + path + "' is not a regular file (a device, pipe or socket); accepted: a "
                           ".patrace file");
  }
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw TraceFormatError("cannot read the size of trace '" + path + "': " + ec.message());
  if (size > kTraceMaxFileBytes) {
    throw TraceFormatError("trace file '" + path + "' is " + std::to_string(size) + " bytes; accepted: at most " +
                           std::to_string(kTraceMaxFileBytes) + " (kTraceMaxFileBytes, about " +
                           std::to_string(kTraceMaxFileBytes / kTraceEventBytes) + " events)");
  }
  return size;
}

TraceData read_trace(const std::string& path) {
  check_trace_file(path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw TraceFormatError("cannot open trace '" + path + "': " + std::strerror(errno));
  // Read in chunks: the file's own size (not a number inside it) bounds the buffer.
  std::vector<std::uint8_t> buf;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, f);
    buf.insert(buf.end(), chunk, chunk + n);
    if (buf.size() > kTraceMaxFileBytes) {
      std::fclose(f);
      throw TraceFormatError("trace file '" + path + "' grew past " + std::to_string(kTraceMaxFileBytes) +
                             " bytes while being read");
    }
    if (n < sizeof chunk) break;
  }
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) throw TraceFormatError("cannot read trace '" + path + "'");
  try {
    return parse_trace(buf.data(), buf.size());
  } catch (const TraceFormatError& e) {
    throw TraceFormatError("'" + path + "': " + e.what());
  }
}

}  // namespace pa::trace
