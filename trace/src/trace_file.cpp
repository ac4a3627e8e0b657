// Trace file writer and reader. The layout is documented in trace/FORMAT.md;
// every field is serialized explicitly in little-endian order (never a raw
// struct dump), so files are portable and the reader can check each field.
// The frame (prefix, header length, count, checksum), the problem's encoding
// and the reader's discipline are shared with the timeline files
// (binary_format.hpp); this file adds the event record and its bounds.
#include "pa/trace/trace_file.hpp"

#include <algorithm>
#include <limits>
#include <string>

#include "binary_format.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/merge.hpp"
#include "pa/index/optimized.hpp"

#ifndef PA_SOURCE_REVISION
#define PA_SOURCE_REVISION "unknown"
#endif

namespace pa::trace {

const char* build_revision() { return PA_SOURCE_REVISION; }

namespace {

using binary::check_range;
using binary::fail;
using binary::Reader;
using binary::Writer;

static_assert(kTraceMaxStringBytes == binary::kMaxTextBytes);
constexpr int kMaxAccessBytes = 4096;

std::string version_note(std::uint32_t found) {
  return found == 1 ? "; version 1 stored shuffle masks as loop iterations and no source lanes: record the "
                      "trace again with pa-lab trace"
                    : "";
}

constexpr binary::FileKind kTraceFile{kTraceMagic,
                                      kTraceVersion,
                                      kTraceEventBytes,
                                      binary::kRunHeaderMinBytes,
                                      kTraceMaxFileBytes,
                                      "trace",
                                      "event",
                                      ".patrace",
                                      "kTraceMaxFileBytes",
                                      version_note};

// Every public entry point reports the shared code's errors as trace errors.
template <class F>
decltype(auto) as_trace_error(F&& f) {
  return binary::rethrow_as<TraceFormatError>("trace file: ", std::forward<F>(f));
}

void validate_header(const TraceHeader& h) {
  binary::validate_run_header(h.stage, h.spec, h.source, h.revision);
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
  // Stage 8: partition = the split; a split holds at least one block. Its
  // CTA has its own warp count (opt_num_warps), not the spec's threads.
  if (stage == Stage::optimized) {
    b.max_partitions = static_cast<int>(std::max<long long>(1, b.max_blocks));
    b.num_warps = opt_num_warps(s.head_size, s.block_size, kv_elem_bytes(s.dtype, s.kv_dtype),
                                kv_layout_token_rows(s.kv_layout));
  }
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
  as_trace_error([&] {
    validate_header(data.header);
    const EventBounds b = bounds_of(data.header.spec, data.header.stage);
    for (std::size_t i = 0; i < data.events.size(); ++i) validate_event(data.events[i], b, i);
  });
}

std::vector<std::uint8_t> serialize_trace(const TraceData& data) {
  validate_trace(data);
  const TraceHeader& h = data.header;
  Writer hw;  // header payload
  binary::write_run_header(hw, h.stage, h.spec, h.source, h.revision);
  return binary::frame(kTraceFile, hw.buf, data.events.size(), [&](Writer& w) {
    for (const Event& e : data.events) write_event(w, e);
  });
}

namespace {
TraceData parse_impl(const std::uint8_t* bytes, std::size_t size, bool verify_checksum) {
  binary::Unframed f = binary::unframe(kTraceFile, bytes, size, verify_checksum);
  // The header payload is read within its own bounds, so a wrong length
  // cannot leak into the events.
  TraceData d;
  TraceHeader& h = d.header;
  binary::read_run_header(f.header, h.stage, h.spec, h.source, h.revision);
  if (f.header.left() != 0) {
    fail("header length " + std::to_string(f.header.pos() + f.header.left()) + " leaves " +
         std::to_string(f.header.left()) + " unread bytes (corrupt header)");
  }
  validate_header(h);

  const EventBounds b = bounds_of(h.spec, h.stage);
  d.events.reserve(static_cast<std::size_t>(f.count));
  for (std::uint64_t i = 0; i < f.count; ++i) {
    d.events.push_back(read_event(f.records));
    validate_event(d.events.back(), b, static_cast<std::size_t>(i));
  }
  return d;
}
}  // namespace

TraceData parse_trace(const std::uint8_t* bytes, std::size_t size) {
  return as_trace_error([&] { return parse_impl(bytes, size, true); });
}

// For the fuzzer: the same parser without the checksum gate, so mutated
// inputs reach the field validation instead of stopping at the checksum.
TraceData parse_trace_unchecked_for_fuzzing(const std::uint8_t* bytes, std::size_t size) {
  return as_trace_error([&] { return parse_impl(bytes, size, false); });
}

void write_trace(const std::string& path, const TraceData& data) {
  // Serialized (and validated) first, so an invalid trace never touches the disk.
  binary::write_file(path, serialize_trace(data));
}

std::uint64_t check_trace_file(const std::string& path) {
  return binary::rethrow_as<TraceFormatError>("", [&] { return binary::check_input_file(kTraceFile, path); });
}

TraceData read_trace(const std::string& path) {
  return binary::read_file<TraceFormatError>(kTraceFile, path, parse_trace);
}

}  // namespace pa::trace
