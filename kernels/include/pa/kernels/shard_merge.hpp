// Stage 7's merge across devices (context parallelism, pa/index/shard.hpp):
// the device views and launches of the kernels in kernels/stages/
// 07_shard_merge.cuh. Plain C++ (no CUDA headers): pointers are device
// pointers, `stream` a cudaStream_t (nullptr = default stream). Every launch
// is checked; a bad argument throws std::invalid_argument naming it and what
// is accepted, a CUDA error std::runtime_error.
#pragma once
#include <cstdint>

#include "pa/index/dtype.hpp"
#include "pa/index/shard.hpp"

namespace pa::kernels {

// Fold of N shard states (shard-major, ShardedStateGeometry) in shard order
// 0, 1, ..., N-1: out [num_seqs, num_heads, head_size] in out_dtype, and the
// merged lse when out_lse is set.
struct ShardMergeArgs {
  const float* states_out = nullptr;  // [num_shards][rows][head_size]
  const float* states_lse = nullptr;  // [num_shards][rows]
  ShardedStateGeometry g;
  void* out = nullptr;
  DType out_dtype = DType::f32;
  float* out_lse = nullptr;  // optional
  // Optional [num_shards][num_seqs]: shard s keeps sequence q's state in its
  // row source_seq[s * num_seqs + q] (-1: the empty state, not read); null:
  // in row q. The multi-level cascade's levels use it.
  const int* source_seq = nullptr;
};
void launch_merge_shards(const ShardMergeArgs& a, void* stream = nullptr);

// The merge written as sums, so that a sum across devices (an NCCL
// all-reduce) computes it. With M = the largest lse of a row over all shards:
//   weigh:     sums = [e^(lse - M) out (rows x head_size) | e^(lse - M) (rows)]
//   (the sums of all devices added elementwise)
//   normalize: out = sums_out / sums_w, lse = M + log(sums_w).
struct StateSumArgs {
  const float* state_out = nullptr;  // weigh: this device's state [rows][head_size]
  const float* state_lse = nullptr;  // weigh: [rows]
  const float* max_lse = nullptr;    // both: M per row, the maximum over all shards
  float* sums = nullptr;             // weigh writes, normalize reads: state_sum_elems floats
  void* out = nullptr;               // normalize: [rows][head_size] in out_dtype
  DType out_dtype = DType::f32;
  float* out_lse = nullptr;  // normalize, optional
  std::int64_t rows = 0;     // num_seqs * num_heads
  int head_size = 0;
};
// Floats of the sums buffer: the weighted outputs, then one weight per row.
constexpr std::int64_t state_sum_elems(std::int64_t rows, int head_size) { return rows * (head_size + 1); }
void launch_weigh_state(const StateSumArgs& a, void* stream = nullptr);
void launch_normalize_sums(const StateSumArgs& a, void* stream = nullptr);

// A one-thread kernel that waits until *flag (host memory mapped for the
// device, cudaHostAllocMapped) equals `value`, or `timeout_ns` have passed,
// and then sets *timed_out to 1. Several devices queued behind their own wait
// all start when the host sets the flag, within the microseconds of a PCIe
// read: what lets a multi-device timing start every device together. A
// timeout leaves the queue running (a timing loop never hangs) and says so.
void launch_wait_host_flag(const volatile int* flag, int value, unsigned long long timeout_ns,
                           volatile int* timed_out, void* stream);

}  // namespace pa::kernels
