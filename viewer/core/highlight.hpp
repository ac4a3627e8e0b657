// Highlight and filter sets: what a selected thread, warp or memory element
// touches and when; the memory requests of a replay step with their 32-byte
// sectors and L2 requests (global) or bank wavefronts (shared) against the
// ideal; the colour of each thread.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <span>
#include <string>
#include <vector>

#include "core/config_info.hpp"
#include "core/trace_index.hpp"
#include "pa/core/event.hpp"
#include "pa/core/timeline.hpp"

namespace pa::viewer {

// What the learner clicked.
struct Focus {
  enum class Kind { none, thread, warp, element };
  Kind kind = Kind::none;
  int warp = -1, lane = -1;
  trace::Tensor tensor = trace::Tensor::none;  // element
  std::int64_t byte_begin = -1;                // element: first byte
  int bytes = 0;                               // element: its width

  static Focus thread(int w, int l) { Focus f; f.kind = Kind::thread; f.warp = w; f.lane = l; return f; }
  static Focus whole_warp(int w) { Focus f; f.kind = Kind::warp; f.warp = w; return f; }
  static Focus element(trace::Tensor t, std::int64_t byte, int width) {
    Focus f; f.kind = Kind::element; f.tensor = t; f.byte_begin = byte; f.bytes = width; return f;
  }
  bool active() const { return kind != Kind::none; }
  // Does the event belong to the focus (thread/warp: issued by it; element: touches it)?
  bool matches(const trace::Event& e) const;
  std::string describe() const;
};

// Byte ranges [a, a+na) and [b, b+nb) overlap.
inline bool overlaps(std::int64_t a, std::int64_t na, std::int64_t b, std::int64_t nb) {
  return a < b + nb && b < a + na;
}
bool touches(const trace::Event& e, trace::Tensor t, std::int64_t byte_begin, int bytes);

// One access to the focus, for "who touches it and when".
struct Touch {
  int step = 0;
  int warp = 0, lane = 0;
  trace::Step what = trace::Step::q_load;
  trace::Op op = trace::Op::compute;
};
// Every event of block b touching the element, in step order. O(events).
std::vector<Touch> who_touches(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b,
                               trace::Tensor t, std::int64_t byte_begin, int bytes);
// For each 4-byte word of a shared-memory tensor (word w = bytes [4w, 4w+4)
// from the tensor's byte 0), the first replay step of block b that stores to
// it; -1 for a word never stored. The shared-memory panel tints the words
// stored before the current step, as the KV panel tints earlier loads. The
// vector ends at the last word stored. O(events of the block).
std::vector<int> first_store_steps(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b, trace::Tensor t);
// The head dims that the shared_store events of tensor t in step k of block
// b wrote into the word at byte (bytes [byte, byte + 4)): the lowest and the
// highest, from events whose dims are contiguous in their bytes (dim_count x
// elem_bytes == bytes); nullopt when none did. With first_store_steps' step,
// what the word holds. O(events of the step).
std::optional<std::pair<int, int>> stored_dims(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b, int k,
                                               trace::Tensor t, std::int64_t byte, int elem_bytes);
// The steps of block b in which the thread (lane -1: any lane of the warp) is active.
std::vector<int> steps_of_thread(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b,
                                 int warp, int lane);

// KV-cache elements covered by an event (k_cache / v_cache), decoded from its
// byte range with the cache layout's inverse: g and kv_elem_bytes are the
// cache's (ConfigInfo::cache and ::kv_elem_bytes: an fp8 cache has 1-byte
// elements and x = 16 whatever the query dtype; nhd and hnd keep K and V in
// one tensor, the event's tensor says which half). Calls f(Coords) for each.
template <class F>
void for_each_kv_element(const trace::Event& e, const KvLayoutGeometry& g, int kv_elem_bytes, F&& f) {
  if (e.byte_offset < 0 || e.bytes <= 0 || kv_elem_bytes <= 0) return;
  if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) return;
  const std::int64_t first = e.byte_offset / kv_elem_bytes;
  const std::int64_t last = (e.byte_offset + e.bytes - 1) / kv_elem_bytes;
  for (std::int64_t o = first; o <= last; ++o)
    f(e.tensor == trace::Tensor::k_cache ? g.k_coords(o) : g.v_coords(o));
}

// One warp-wide memory instruction of a step: the events of one warp that
// are the same instruction (same occurrence within the step).
struct Request {
  int warp = 0;
  trace::Op op = trace::Op::compute;
  trace::Tensor tensor = trace::Tensor::none;
  int lanes = 0;
  int access_bytes = 0;          // per lane (of the first event)
  std::int64_t bytes = 0;        // unique bytes touched
  int sectors = 0;               // global: distinct 32-byte sectors
  int ideal_sectors = 0;         // ceil(unique bytes / 32)
  int l2_requests = 0;           // global: requests to L2 (up to one 128-byte line each)
  int ideal_l2_requests = 0;     // ceil(unique bytes / 128)
  int wavefronts = 0;            // shared: bank wavefronts
  int ideal_wavefronts = 0;      // per active phase: max(1, ceil(unique bytes / 128))
  std::vector<std::uint32_t> events;  // indices into the trace's events
  // cp.async reads global memory (its byte_offset is the global side) and an
  // atomic is a global read-modify-write: both are measured in sectors.
  bool global() const {
    return op == trace::Op::global_load || op == trace::Op::global_store || op == trace::Op::async_copy ||
           op == trace::Op::atomic;
  }
  bool shared() const { return op == trace::Op::shared_load || op == trace::Op::shared_store; }
};

// The step's requests, measured by pa::trace::memory_requests (the project's
// one sector/bank model, trace/ANALYSIS.md), ordered by warp.
std::vector<Request> requests_of_step(const std::vector<trace::Event>& ev, std::span<const std::uint32_t> step_events);

// What a replay step does to the attention states of row (seq, head): the
// V2 partitions whose (max, sum, out) it reads or writes (decoded from byte
// offsets with PartitionGeometry, part_* are float), whether it reads or
// writes attention states (cascade state_out / state_lse, split-KV
// workspace) and whether it writes the final output. The partitions panel
// draws its picture from this.
struct StateFlow {
  std::vector<char> part_read, part_written;  // per partition
  int states_read = 0, states_written = 0;    // state/prefix/suffix out+lse and workspace accesses
  int prefix_read = 0, suffix_read = 0;       // cascade merge: which of the two states it reads
  bool output_written = false;
  int counter_atomics = 0;
  bool any() const;
};
StateFlow state_flow(const std::vector<trace::Event>& ev, std::span<const std::uint32_t> step_events,
                     const PartitionGeometry& g, int seq, int head);
// The partition of row (seq, head) that a part_max / part_sum / part_out byte
// offset belongs to; -1 if another row's or not a partition buffer.
int partition_of(const PartitionGeometry& g, trace::Tensor t, std::int64_t byte, int seq, int head);

// Thread colours: hue by lane (neighbouring lanes and thread-group members
// get neighbouring hues), value by warp. RGBA in [0,1].
struct Rgba {
  float r = 0, g = 0, b = 0, a = 1;
};
Rgba thread_color(int warp, int lane, int num_warps);
Rgba tensor_color(trace::Tensor t);
// A timeline phase's colour (the Timeline panel and its legend). Hues by
// what the step does, the same across stages: loads blue, the QK math
// orange, softmax yellow, the LV/PV math green, reductions and merges teal
// to violet, stores and bookkeeping purple or grey; waiting is red. A stage's
// own phases all differ.
Rgba phase_color(trace::Phase p);

// The other colours of the memory and source panels, named once so that the
// panels and their legends (the strips above the KV and shared-memory views,
// the help overlay's table) cannot disagree.
namespace palette {
constexpr Rgba rgb8(int r, int g, int b) { return {r / 255.0f, g / 255.0f, b / 255.0f, 1.0f}; }
inline constexpr Rgba untouched = rgb8(40, 43, 52);      // a KV element no step has loaded yet
inline constexpr Rgba past_context = rgb8(28, 29, 34);   // a KV slot past the sequence's context: masked
inline constexpr float earlier_dim = 0.62f;              // loaded/stored at an earlier step: the tensor's colour, dimmed
inline constexpr Rgba table_read = rgb8(90, 150, 230);   // a block-table entry this step reads
inline constexpr Rgba table_entry = rgb8(45, 50, 62);    // a block-table entry
inline constexpr Rgba table_from_problem = rgb8(38, 41, 50);  // an entry the trace does not read (the problem's)
inline constexpr Rgba table_shared = rgb8(150, 110, 40); // another sequence's entry sharing a physical block
inline constexpr Rgba word_even = rgb8(47, 50, 61), word_odd = rgb8(42, 45, 55);  // alternating bank rows / sectors
inline constexpr Rgba atomic_frame = rgb8(255, 70, 60);  // a word an atomic touches
inline constexpr Rgba own_region = rgb8(95, 80, 30);     // source lines (and lesson bar) of the step's own marker
inline constexpr Rgba enclosing_region = rgb8(40, 58, 88);  // ... of the enclosing region of a step without one
inline constexpr Rgba region_text = rgb8(255, 247, 224);  // the code inside either region
inline constexpr Rgba own_number = rgb8(255, 217, 102), enclosing_number = rgb8(158, 194, 242);  // its line numbers
inline constexpr Rgba own_bar = rgb8(255, 190, 70), enclosing_bar = rgb8(110, 160, 235);
inline constexpr Rgba at_ideal = {0.5f, 0.9f, 0.55f, 1}, over_ideal = {1.0f, 0.55f, 0.4f, 1};  // request costs
inline constexpr Rgba sector_fetched = rgb8(240, 170, 70), sector_skipped = rgb8(55, 58, 68);  // requests' sector bars
}  // namespace palette
// Short names for an access in tables: ld, st, cp.async, atom, mma, shfl, bar, op.
const char* access_verb(trace::Op o);
// Where a tensor lives (the shared-memory and global-buffer views).
bool is_shared_tensor(trace::Tensor t);
bool is_global_buffer(trace::Tensor t);  // global, other than the KV cache, Q and the block table
std::uint32_t to_u32(Rgba c);  // ImGui's IM_COL32 byte order (ABGR)

}  // namespace pa::viewer
