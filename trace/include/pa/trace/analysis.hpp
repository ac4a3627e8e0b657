// Analyses derived from trace events: how well each warp-level memory
// request coalesces (32-byte sectors and L2 requests vs the fewest possible),
// how many shared-memory wavefronts it needs (bank conflicts), per-thread
// access counts, and bytes moved per step. The model is documented in
// trace/ANALYSIS.md and compared with Nsight Compute in trace/NOTES.md.
//
// Request key: the events of one warp that one instruction issues. Lanes of a
// warp execute an instruction together, so two events belong to the same
// request when they come from the same thread block and warp, in the same
// barrier epoch, with the same step, op, tensor, iter and logical block (a
// warp works on one KV block at a time), and they are the same occurrence
// (k-th) of that combination in their own lane's program order (a thread may
// issue several accesses per iter, e.g. one per K vec).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "pa/core/event.hpp"

namespace pa::trace {

inline constexpr int kSectorBytes = 32;
inline constexpr int kLineBytes = 128;  // an L2 request carries up to the 4 sectors of one line
inline constexpr int kSmemBanks = 32;
inline constexpr int kSmemBankBytes = 4;
inline constexpr int kWavefrontBytes = kSmemBanks * kSmemBankBytes;  // 128

struct RequestKey {
  int seq = 0, head = 0, partition = 0;
  int epoch = 0;
  int warp = 0;
  Step step = Step::q_load;
  Op op = Op::global_load;
  Tensor tensor = Tensor::none;
  int iter = 0;
  int logical_block = -1;
  int occurrence = 0;  // k-th event with this key in each lane's program order
  friend auto operator<=>(const RequestKey&, const RequestKey&) = default;
};

struct MemoryRequest {
  RequestKey key;
  bool shared = false;   // shared memory (else global)
  bool store = false;
  int lanes = 0;         // active lanes (events)
  int max_access_bytes = 0;
  std::int64_t bytes_requested = 0;  // sum over lanes
  std::int64_t unique_bytes = 0;     // distinct bytes (broadcasts count once)
  // Global: distinct 32-byte sectors touched (a cp.async: the sectors L2
  // delivers, async_copy_sectors), and the fewest that could hold
  // unique_bytes: ceil(unique_bytes / 32).
  int sectors = 0;
  int ideal_sectors = 0;
  // Global: the requests the SM sends to L2 for them (a cp.async:
  // async_copy_l2_requests; other accesses: global_l2_requests), and the
  // fewest 128-byte lines that could hold unique_bytes: ceil(unique_bytes / 128).
  int l2_requests = 0;
  int ideal_l2_requests = 0;
  // Shared: wavefronts the bank model needs, and the fewest for these bytes
  // (see shared_wavefronts()).
  int wavefronts = 0;
  int ideal_wavefronts = 0;
  std::vector<std::uint32_t> events;  // indices into the analysed event list

  // ideal / actual, in (0, 1]; 1 = fully coalesced / conflict-free.
  double efficiency() const;
};

// Groups the memory events (global and shared loads/stores with bytes > 0)
// into warp-level requests and measures each. Events need not be sorted.
std::vector<MemoryRequest> memory_requests(std::span<const Event> events);

// The request of one event index (e.g. the thread a learner clicked), or
// nullptr; `requests` must come from memory_requests(events).
const MemoryRequest* request_of(const std::vector<MemoryRequest>& requests, std::uint32_t event_index);

// The bank model for one shared-memory request, given each lane's
// (lane, byte offset, width): the warp is split into phases by access width
// (<= 4 B: 1 phase of 32 lanes; 8 B: 2 phases of 16 lanes; 16 B: 4 phases of
// 8 lanes: a phase moves at most 128 bytes); within a phase, the accesses to
// one bank that fall in different 4-byte words are serialized, the same word
// is broadcast. Wavefronts = sum over phases of the worst bank's distinct
// words. Ideal = sum over active phases of max(1, ceil(unique bytes / 128)).
struct LaneAccess {
  int lane;
  std::int64_t byte_offset;
  int bytes;
};
struct WavefrontCount {
  int wavefronts = 0, ideal = 0;
};
WavefrontCount shared_wavefronts(std::span<const LaneAccess> accesses);

// Distinct 32-byte sectors of a set of byte ranges.
int global_sectors(std::span<const LaneAccess> accesses);

// The L2 requests of one warp's ordinary global loads or stores: one per
// distinct 128-byte line touched (an L1 request to L2 carries up to the four
// sectors of one line). The textbook model, not measured in this lab: it
// assumes no access hits in L1.
int global_l2_requests(std::span<const LaneAccess> accesses);

// One warp's cp.async, lane by lane: the global bytes read and the shared
// byte they land at (-1: unknown). Where the bytes land decides how L2 serves
// them (measured on an H100, kernels/NOTES.md, cascade change 20); a piece is
// the part of one lane's copy inside one 32-byte source sector.
struct CopyAccess {
  std::int64_t global_offset;
  int bytes;
  std::int64_t shared_offset;
};
// The sectors L2 delivers: a source sector whose pieces all land in one
// 32-byte span of shared memory is delivered once; otherwise each piece is
// delivered as a whole sector of its own.
int async_copy_sectors(std::span<const CopyAccess> copies);
// The requests L2 receives, per 128-byte source line: one when all its pieces
// land in one 128-byte span of shared memory (in any order inside it);
// otherwise, per sector of the line, one when the sector's pieces land in one
// 32-byte span, else one per piece. A copy whose destination is unknown counts
// as landing whole, in both functions (its source sectors and lines alone).
int async_copy_l2_requests(std::span<const CopyAccess> copies);

// For every event index, the index of its request in `requests`, or -1 (not
// a memory event). O(events): what a viewer should use per frame.
std::vector<int> request_index_of_events(const std::vector<MemoryRequest>& requests, std::size_t num_events);

// Per-thread access counts (one entry per thread that has events).
struct ThreadCounts {
  int seq = 0, head = 0, partition = 0, warp = 0, lane = 0;
  int global_loads = 0, global_stores = 0, shared_loads = 0, shared_stores = 0;
  int shuffles = 0, barriers = 0, computes = 0;
  std::int64_t global_load_bytes = 0, global_store_bytes = 0;
  std::int64_t shared_load_bytes = 0, shared_store_bytes = 0;
};
std::vector<ThreadCounts> per_thread_counts(std::span<const Event> events);

// Traffic per (stage, step, op, tensor): events, bytes, requests, sectors, L2
// requests and wavefronts (requests from memory_requests()).
struct StepTraffic {
  Stage stage = Stage::q_to_smem;
  Step step = Step::q_load;
  Op op = Op::global_load;
  Tensor tensor = Tensor::none;
  std::int64_t events = 0, bytes = 0, unique_bytes = 0;
  std::int64_t requests = 0;
  std::int64_t sectors = 0, ideal_sectors = 0;
  std::int64_t l2_requests = 0, ideal_l2_requests = 0;
  std::int64_t wavefronts = 0, ideal_wavefronts = 0;
};
std::vector<StepTraffic> traffic_by_step(std::span<const Event> events,
                                         const std::vector<MemoryRequest>& requests);

// Totals over a whole trace.
struct TrafficTotals {
  std::int64_t global_load_bytes = 0, global_store_bytes = 0;
  std::int64_t shared_load_bytes = 0, shared_store_bytes = 0;
  // Loads and stores together:
  std::int64_t global_requests = 0, global_sectors = 0, global_ideal_sectors = 0;
  std::int64_t global_l2_requests = 0, global_ideal_l2_requests = 0;
  std::int64_t shared_requests = 0, shared_wavefronts = 0, shared_ideal_wavefronts = 0;
  // Split by direction (what Nsight Compute reports per op):
  std::int64_t global_load_requests = 0, global_load_sectors = 0, global_load_l2_requests = 0;
  std::int64_t global_store_requests = 0, global_store_sectors = 0, global_store_l2_requests = 0;
  std::int64_t shared_load_requests = 0, shared_load_wavefronts = 0;
  std::int64_t shared_store_requests = 0, shared_store_wavefronts = 0;
};
TrafficTotals traffic_totals(std::span<const Event> events, const std::vector<MemoryRequest>& requests);

bool is_memory_event(const Event& e);

}  // namespace pa::trace
