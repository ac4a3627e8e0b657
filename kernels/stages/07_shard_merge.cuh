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
//      07_cascade_merge.cuh): acc = merge(...merge(merge(s0, s1), s2)...).
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

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// LESSON-BEGIN(cascade_merge.merge_shards)
// Fold of N shard states in shard order; out_lse optional.
template <class OutT>
__global__ void merge_shards_kernel(const float* __restrict__ states_out, const float* __restrict__ states_lse,
                                    ShardedStateGeometry g, OutT* __restrict__ out, float* __restrict__ out_lse) {
  const int vecs_per_row = g.state.head_size / 4;
  const std::int64_t rows = g.rows_per_shard(), total = rows * vecs_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / vecs_per_row;
    const int d = MergeGrid::elem_of(i, vecs_per_row);
    const std::int64_t off = g.state.row_elem_offset(row, d);
    // Shard 0's state as it is (an empty one is never read), then the others
    // merged in: exactly the chain merge(merge(s0, s1), s2)..., even in the
    // sign of a zero, which merging into an empty start would turn to +0.
    float lse = states_lse[row];
    float4 acc = lse == -INFINITY ? make_float4(0.f, 0.f, 0.f, 0.f) : load4(states_out + off);
    for (int s = 1; s < g.num_shards; ++s) {
      const MergeWeights w = merge_weights(lse, states_lse[s * rows + row]);
      float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
      if (w.wa > 0.f) {
        r.x = w.wa * acc.x;
        r.y = w.wa * acc.y;
        r.z = w.wa * acc.z;
        r.w = w.wa * acc.w;
      }
      if (w.wb > 0.f) {
        const float4 x = load4(states_out + s * g.out_elems_per_shard() + off);
        r.x = fmaf(w.wb, x.x, r.x);
        r.y = fmaf(w.wb, x.y, r.y);
        r.z = fmaf(w.wb, x.z, r.z);
        r.w = fmaf(w.wb, x.w, r.w);
      }
      acc = r;
      lse = w.lse;
    }
    store4(out + off, acc);
    if (d == 0 && out_lse != nullptr) out_lse[row] = lse;
  }
}
// LESSON-END(cascade_merge.merge_shards)

// LESSON-BEGIN(cascade_merge.state_sums)
// This device's state weighed by e^(lse - M): the summands of the merge.
__global__ void weigh_state_kernel(const float* __restrict__ state_out, const float* __restrict__ state_lse,
                                   const float* __restrict__ max_lse, float* __restrict__ sums, std::int64_t rows,
                                   int head_size) {
  const int vecs_per_row = head_size / 4;
  const std::int64_t total = rows * vecs_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / vecs_per_row;
    const int d = MergeGrid::elem_of(i, vecs_per_row);
    const float l = state_lse[row];
    const float w = l == -INFINITY ? 0.f : __expf(l - max_lse[row]);
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (w > 0.f) {
      const float4 x = load4(state_out + row * head_size + d);
      r.x = w * x.x;
      r.y = w * x.y;
      r.z = w * x.z;
      r.w = w * x.w;
    }
    store4(sums + row * head_size + d, r);
    if (d == 0) sums[rows * head_size + row] = w;
  }
}

// The summed weighted states of all devices, normalized: the merged state.
template <class OutT>
__global__ void normalize_sums_kernel(const float* __restrict__ sums, const float* __restrict__ max_lse,
                                      OutT* __restrict__ out, float* __restrict__ out_lse, std::int64_t rows,
                                      int head_size) {
  const int vecs_per_row = head_size / 4;
  const std::int64_t total = rows * vecs_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / vecs_per_row;
    const int d = MergeGrid::elem_of(i, vecs_per_row);
    const float w = sums[rows * head_size + row];  // >= 1 where any shard has tokens: e^0 for the largest
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (w > 0.f) {
      const float4 x = load4(sums + row * head_size + d);
      const float inv = 1.f / w;
      r.x = x.x * inv;
      r.y = x.y * inv;
      r.z = x.z * inv;
      r.w = x.w * inv;
    }
    store4(out + row * head_size + d, r);
    if (d == 0 && out_lse != nullptr) out_lse[row] = w > 0.f ? max_lse[row] + __logf(w) : -INFINITY;
  }
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
