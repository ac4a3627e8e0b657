// Stage 7 across devices: the attention states of N shards merged into one
// (context parallelism, pa/index/shard.hpp).
//
// What it adds to stage 7's merge. A long context split over N devices
// leaves each device with the state (out, lse) of its own pages; the state
// of the whole context is their merge. Two ways to get every device there,
// each a pair of (exchange, kernel):
//   1. gather, then fold: an all-gather gives every device all N states,
//      shard-major (ShardedStateGeometry), and merge_shards_kernel folds them
//      in shard order with the two-state merge's own weights (merge_weights,
//      attention_state.cuh): acc = merge(...merge(merge(s0, s1), s2)...).
//      A fixed order, the same arithmetic as a chain of merge_states_kernel
//      launches: the result does not depend on which device computes it, or
//      on whether the shards ran on one device or on N.
//   2. sums: with M = max over shards of lse (an all-reduce max first),
//        out = sum_s e^(lse_s - M) out_s / sum_s e^(lse_s - M),
//        lse = M + log(sum_s e^(lse_s - M)),
//      so the merge is a sum across devices: weigh_state_kernel writes this
//      device's weighted state, an all-reduce sum adds them, and
//      normalize_sums_kernel divides. The all-reduce moves 2 (N-1)/N of a
//      state per device where the all-gather moves N-1 states, but the order
//      of the sum is the collective's own, not fixed here.
// The exchanges themselves are NCCL's (kernels/src/context_parallel_nccl.cpp).
//
// Thread mapping: that of the two-state merge (pa/index/merge.hpp's
// MergeGrid): one thread per 4 consecutive floats of a state row (float4
// loads and stores), 256 threads per block, grid-stride. A zero-weight state
// (lse -inf: a shard that holds none of a sequence's tokens) is never read.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "07_cascade_merge.cuh"
#include "pa/index/merge.hpp"
#include "pa/index/shard.hpp"

namespace pa::kernels {

// LESSON-BEGIN(cascade_merge.merge_shards)
// Fold of N shard states in shard order; out_lse optional. source_seq (may
// be null) says where shard s keeps sequence q's state: row source_seq[s *
// num_seqs + q] of its own num_seqs, or nowhere (-1: the empty state, not
// read). A multi-level cascade's levels are shards in this sense: each level
// holds its states in its own order (its groups' members side by side) and a
// request whose group there is empty has none.
template <class OutT>
__global__ void merge_shards_kernel(const float* __restrict__ states_out, const float* __restrict__ states_lse,
                                    ShardedStateGeometry g, const int* __restrict__ source_seq, OutT* __restrict__ out,
                                    float* __restrict__ out_lse) {
  const std::int64_t rows = g.rows_per_shard();
  const int heads = g.state.num_heads;
  // Shard s's row holding this row's state, or -1.
  auto source_row = [&](int s, std::int64_t row) -> std::int64_t {
    if (source_seq == nullptr) return row;
    const int q = source_seq[s * g.num_seqs + static_cast<int>(row / heads)];
    return q < 0 ? -1 : static_cast<std::int64_t>(q) * heads + row % heads;
  };
  for_each_state_vector(rows, g.state.head_size, [&](std::int64_t row, int d, int) {
    const std::int64_t off = g.state.row_elem_offset(row, d);
    // Shard 0's state as it is (an empty one is never read), then the others
    // merged in: exactly the chain merge(merge(s0, s1), s2)..., even in the
    // sign of a zero, which merging into an empty start would turn to +0.
    const std::int64_t r0 = source_row(0, row);
    float lse = r0 < 0 ? -INFINITY : states_lse[r0];
    float4 acc = lse == -INFINITY ? make_float4(0.f, 0.f, 0.f, 0.f) : load4(states_out + g.state.row_elem_offset(r0, d));
    for (int s = 1; s < g.num_shards; ++s) {
      const std::int64_t rs = source_row(s, row);
      const MergeWeights w = merge_weights(lse, rs < 0 ? -INFINITY : states_lse[s * rows + rs]);
      float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
      if (w.wa > 0.f) r = scaled4(w.wa, acc);
      if (w.wb > 0.f)
        r = fma4(w.wb, load4(states_out + s * g.out_elems_per_shard() + g.state.row_elem_offset(rs, d)), r);
      acc = r;
      lse = w.lse;
    }
    store4(out + off, acc);
    if (d == 0 && out_lse != nullptr) out_lse[row] = lse;
  });
}
// LESSON-END(cascade_merge.merge_shards)

// LESSON-BEGIN(cascade_merge.state_sums)
// This device's state weighed by e^(lse - M): the summands of the merge.
__global__ void weigh_state_kernel(const float* __restrict__ state_out, const float* __restrict__ state_lse,
                                   const float* __restrict__ max_lse, float* __restrict__ sums, std::int64_t rows,
                                   int head_size) {
  for_each_state_vector(rows, head_size, [&](std::int64_t row, int d, int) {
    const float w = SoftmaxStats<>{state_lse[row], 1.f}.sum_at(max_lse[row]);
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (w > 0.f) r = scaled4(w, load4(state_out + row * head_size + d));
    store4(sums + row * head_size + d, r);
    if (d == 0) sums[rows * head_size + row] = w;
  });
}

// The summed weighted states of all devices, normalized: the merged state.
template <class OutT>
__global__ void normalize_sums_kernel(const float* __restrict__ sums, const float* __restrict__ max_lse,
                                      OutT* __restrict__ out, float* __restrict__ out_lse, std::int64_t rows,
                                      int head_size) {
  for_each_state_vector(rows, head_size, [&](std::int64_t row, int d, int) {
    const float w = sums[rows * head_size + row];  // >= 1 where any shard has tokens: e^0 for the largest
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (w > 0.f) r = scaled4(1.f / w, load4(sums + row * head_size + d));
    store4(out + row * head_size + d, r);
    if (d == 0 && out_lse != nullptr) out_lse[row] = SoftmaxStats<>{max_lse[row], w}.lse();
  });
}
// LESSON-END(cascade_merge.state_sums)

// Waits for the host: see launch_wait_host_flag (pa/kernels/shard_merge.hpp).
__global__ void wait_host_flag_kernel(const volatile int* flag, int value, unsigned long long timeout_ns,
                                      volatile int* timed_out) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    if (*flag == value) return;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < timeout_ns);
  *timed_out = 1;
}

}  // namespace pa::kernels
