// Stage 7, cascade_merge: attention states and cascade decoding of sequences
// that share a prefix.
//
// What it adds to stage 6: the attention STATE (out, lse) of a query over a
// token set, lse = log(sum_t exp(logit_t)) in NATURAL log, out normalized over
// the set; the empty set is (0, -inf). Two states over disjoint sets merge into
// the state over their union (attention_state.cuh: the merge of every stage
// from 6 on):
//   m = max(lse_a, lse_b), w_a = exp(lse_a - m), w_b = exp(lse_b - m),
//   out = (w_a out_a + w_b out_b) / (w_a + w_b), lse = m + log(w_a + w_b).
// A V2 partition (out_p, max_p, sum_p) is the state (out_p, max_p + log sum_p).
//
// Cascade: when N sequences share their first P tokens (the same physical
// blocks), decoding each of them over its whole context reads the prefix's
// K/V N times. Here the prefix is attended ONCE for all of them:
//   1. the prefix kernel (07_cascade_prefix_wgmma.cuh on Hopper, the default;
//      07_cascade_prefix_mma.cuh elsewhere): for each KV head, the queries of
//      all N sequences (x the GQA ratio) form a small matrix Q[g x head_size];
//      S = Q K^T and O = softmax(S) V are tensor-core matrix products (wgmma
//      or mma.sync m16n8k16, fp16/bf16 in, fp32 accumulate) over the prefix,
//      split into chunks across thread blocks; each chunk writes a V2-style
//      partition (out normalized in the chunk, max, sum).
//   2. stage 6's reduce kernel merges the chunks into the prefix state.
//   3. each sequence's suffix state over tokens [P, context): stage 8 (its
//      lean pipeline by default) writing the state instead of the output, or
//      stage 6's decode kernel where stage 8 is not built or V2 is asked for.
//   4. the merge kernel (below) merges prefix and suffix states into the output.
// Step 3 runs on a second stream, concurrently with 1-2, joined by an event
// before 4 (07_cascade_pipeline.cuh).
// fp32 has no fp16-style mma: its prefix goes through the stage 6 decode
// kernel per sequence (correct, no sharing).
//
// The prefix kernel's thread mapping is in 07_cascade_prefix_mma.cuh (mma.sync)
// and 07_cascade_prefix_wgmma.cuh (wgmma); the host side is in
// 07_cascade_merge.cu.
//
// The merge kernel: one thread per 4 consecutive output elements of a state
// row (float4 loads/stores), grid-stride; a zero-weight state is never read
// (its out may be anything, even NaN).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "07_cascade_prefix_mma.cuh"
#include "attention_state.cuh"
#include "pa/index/cascade.hpp"
#include "pa/index/merge.hpp"
#include "pa/kernels/cascade_args.hpp"
#include "ptx.cuh"

namespace pa::kernels {

// ---- the merge kernel -----------------------------------------------------
// The two-state merge's weights (merge_weights) and weighted sums (scaled4,
// fma4) are the attention state's (attention_state.cuh).

template <class T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float4*>(p) = v;
  } else {
    Vec<T, 4> o;
    o.e[0] = from_float<T>(v.x);
    o.e[1] = from_float<T>(v.y);
    o.e[2] = from_float<T>(v.z);
    o.e[3] = from_float<T>(v.w);
    store_vec<T, 4>(p, o);
  }
}

// The merge kernels' grid-stride walk over a state's float4 vectors
// (MergeGrid, pa/index/merge.hpp): f(row, d, iter) for each vector of the
// rows x head_size / 4 that this thread owns, d its first element, iter the
// grid-stride iteration.
template <class F>
__device__ __forceinline__ void for_each_state_vector(std::int64_t rows, int head_size, F&& f) {
  const int vecs_per_row = head_size / 4;
  const std::int64_t total = rows * vecs_per_row;
  int it = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x, ++it)
    f(i / vecs_per_row, MergeGrid::elem_of(i, vecs_per_row), it);
}

// Events (stage cascade_merge, step merge, block label partition = kMergeBlock,
// seq/head = the row's (row = seq * num_heads + head), kv_head -1, warp/lane of
// threadIdx.x, iter = the grid-stride iteration), per row element vector in order:
// global_load prefix_lse (row*4, value); global_load suffix_lse; compute (value =
// merged lse); global_load prefix_out (dims [d,4), 16 bytes) if its weight > 0;
// global_load suffix_out likewise; global_store output (dims [d,4), 4 elements,
// value = the first); the thread of d == 0: global_store state_lse if out_lse.
// LESSON-BEGIN(cascade_merge.merge)
template <class OutT, class Tracer = NullTracer>
__global__ void merge_states_kernel(const float* __restrict__ a_out, const float* __restrict__ a_lse,
                                    const float* __restrict__ b_out, const float* __restrict__ b_lse,
                                    OutT* __restrict__ out, float* __restrict__ out_lse, std::int64_t rows,
                                    StateGeometry stg, Tracer tracer = {}) {
  PA_TIME_START(tracer);
  for_each_state_vector(rows, stg.head_size, [&](std::int64_t row, int d, int it) {
    const TraceCtx tc{trace::Stage::cascade_merge, static_cast<int>(threadIdx.x) / kWarpSize,
                      static_cast<int>(threadIdx.x) % kWarpSize, static_cast<int>(row / stg.num_heads),
                      static_cast<int>(row % stg.num_heads), kMergeBlock, -1};
    const float la = a_lse[row], lb = b_lse[row];
    PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::prefix_lse).it(it).at(row * 4, 4).val(la));
    PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::suffix_lse).it(it).at(row * 4, 4).val(lb));
    const MergeWeights w = merge_weights(la, lb);
    PA_TRACE(tracer, ev(tc, Step::merge, Op::compute, Tensor::none).it(it).val(w.lse));
    const std::int64_t off = stg.row_elem_offset(row, d);
    float4 r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (w.wa > 0.f) {
      const float4 x = load4(a_out + off);
      r = scaled4(w.wa, x);
      PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::prefix_out)
                           .it(it).dims(d, 4).at(off * 4, 16).val(x.x));
    }
    if (w.wb > 0.f) {
      const float4 x = load4(b_out + off);
      r = fma4(w.wb, x, r);
      PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::suffix_out)
                           .it(it).dims(d, 4).at(off * 4, 16).val(x.x));
    }
    store4(out + off, r);
    PA_TRACE(tracer, ev(tc, Step::merge, Op::global_store, Tensor::output)
                         .it(it).dims(d, 4).at(off * static_cast<std::int64_t>(sizeof(OutT)), 4 * sizeof(OutT))
                         .val(r.x));
    if (d == 0 && out_lse != nullptr) {
      out_lse[row] = w.lse;
      PA_TRACE(tracer, ev(tc, Step::merge, Op::global_store, Tensor::state_lse).it(it).at(row * 4, 4).val(w.lse));
    }
  });
  PA_TIME_PHASE(tracer, trace::Phase::merge, -1);  // a timeline: one span per warp, the whole merge
}
// LESSON-END(cascade_merge.merge)

// Merge launch: 256 threads per block, one thread per 4 output elements, at
// most 65535 blocks (grid-stride beyond): merge_grid (pa/index/merge.hpp).
template <class OutT, class Tracer = NullTracer>
void launch_merge_kernel(const MergeArgs& m, cudaStream_t stream, Tracer tracer = {}) {
  const std::int64_t rows = static_cast<std::int64_t>(m.num_seqs) * m.num_heads;
  const MergeGrid g = merge_grid(rows, m.head_size);
  merge_states_kernel<OutT, Tracer><<<static_cast<unsigned>(g.blocks), MergeGrid::kThreads, 0, stream>>>(
      m.a_out, m.a_lse, m.b_out, m.b_lse, static_cast<OutT*>(m.out), m.out_lse, rows, m.stg, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pa::kernels
