// Stage 8, optimized: the epilogue steps. After the main loop each warp holds
// the state of its own steps; opt_warp_merge merges the CTA's warps through
// shared memory and either writes the output (one split) or the split's
// state to the workspace; with several splits, the last CTA of a (sequence,
// unit) to arrive merges every split's state (opt_split_merge and its
// steps). opt_decode_kernel (08_optimized.cuh) calls them last.
//
// Thread mapping: the warp merge writes each warp's accumulator fragments
// (lane l: O^T dims l/4 (+8) of each 16-dim tile, heads 2(l%4)+{0,1}) to
// shared memory; then, in both merges, thread t owns items t, t +
// kNumThreads, ... of four consecutive dims of one head
// (OptConfig::merge_head, merge_dim) and merges every warp's, then every
// split's, state of them, and writes the item's four outputs with one store
// (opt_store_item). Both merges are the attention state's
// (attention_state.cuh), in base 2.
#pragma once
#include <cstdint>

#include "08_optimized_cta.cuh"
#include "ptx.cuh"

namespace pa::opt {

// An item's result written, the last step of both merges (the warp merge's
// with one split, the split merge's with several): o holds dims d0 .. d0 + 3
// of head g unnormalized, M and L the head's max and exp sum (base 2). The
// four outputs, rounded to T, go out in one 8-byte store, so that the 32
// lanes of a warp, which own consecutive items, write one contiguous run of
// 256 bytes (8 sectors for 256 bytes); for a cascade suffix, the state's four
// floats in one 16-byte store and, from the thread of dim 0, the head's lse.
// The output rows (dense, head_size a multiple of 16) keep every item's
// address a multiple of its width; launch_optimized checks the base
// pointers.
// LESSON-BEGIN(optimized.store_item)
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_store_item(const OptParams& p, const OptCta<Cfg>& c, int k, int g, int d0,
                                               const float (&o)[4], float M, float L, Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  const int seq = c.seq, head = c.head0 + g;
  const float inv_l = 1.f / L;
  if (p.state_out != nullptr) {  // cascade suffix: the state
    *reinterpret_cast<float4*>(p.state_out + p.stg.out_offset(seq, head, d0)) =
        make_float4(o[0] * inv_l, o[1] * inv_l, o[2] * inv_l, o[3] * inv_l);
    if (d0 == 0) p.state_lse[p.stg.lse_offset(seq, head)] = SoftmaxStats<LogBase::two>{M, L}.lse() * kLn2;
    return;
  }
  const std::int64_t off = p.qg.out_offset(seq, head, d0);
  *reinterpret_cast<uint2*>(static_cast<T*>(p.out) + off) =
      make_uint2(ptx::pack2<T>(o[0] * inv_l, o[1] * inv_l), ptx::pack2<T>(o[2] * inv_l, o[3] * inv_l));
  PA_TRACE(tracer, ev(c.tc, Step::out_store, Op::global_store, Tensor::output)
                       .it(k).dims(d0, 4).at(off * Cfg::kElemBytes, 4 * Cfg::kElemBytes).val(o[0] * inv_l));
}
// LESSON-END(optimized.store_item)

// The CTA's warps merged through shared memory; with one split the output
// (or a cascade suffix's state) is written, with several the split's state
// goes to the workspace. Returns whether the CTA wrote the output (one split).
// Each warp publishes its state as it stands (per head its max and exp sum,
// and its unnormalized O^T), so one barrier separates the writes from the
// combination and no warp waits for another's max: the thread that combines
// an item weighs each warp's part by 2^(m_w - M) itself, as the split merge
// does. An item is four consecutive dims of one head (merge_head,
// merge_dim), read from each warp's row with one 16-byte shared load.
template <class Cfg, class Tracer>
__device__ __forceinline__ bool opt_warp_merge(const OptParams& p, const OptCta<Cfg>& c, OptAccum<Cfg>& acc,
                                               unsigned char* smem_raw, Tracer& tracer) {
  constexpr int HT = Cfg::kHeadTiles;
  constexpr int kNW = Cfg::kNumWarps;
  const int split = c.split, unit = c.unit, seq = c.seq, warp = c.warp, lane = c.lane, nh = c.nh;
  const TraceCtx& tc = c.tc;
  const auto& o = acc.o;
  const auto& m_run = acc.m_run;
  const auto& l_run = acc.l_run;
  // LESSON-BEGIN(optimized.warp_merge)
  ptx::cp_async_wait<0>();
  __syncthreads();  // stage memory is now scratch
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  float* red = reinterpret_cast<float*>(smem_raw);
  float* stat = red + cmax(Cfg::kPipeBytes, Cfg::kRedBytes) / 4;
#pragma unroll
  for (int h = 0; h < HT; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(kFull, l, 1);
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(h).src(lane ^ 1));
    l += __shfl_xor_sync(kFull, l, 2);
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(h).src(lane ^ 2));
    if (lane % 4 == 0) {
      stat[Cfg::stat_offset(0, warp, Cfg::qk_row(lane) + 8 * h)] = m_run[h];
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::red_scratch)
                           .it(h).at(Cfg::stat_smem_byte(0, warp, Cfg::qk_row(lane) + 8 * h), 4));
      stat[Cfg::stat_offset(1, warp, Cfg::qk_row(lane) + 8 * h)] = l;
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::red_scratch)
                           .it(h).at(Cfg::stat_smem_byte(1, warp, Cfg::qk_row(lane) + 8 * h), 4));
    }
  }
  // The warp's O^T as it is (rows of kRedPitch floats: the 32 lanes of each
  // store hit 32 different banks).
#pragma unroll
  for (int h = 0; h < HT; ++h)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int g = Cfg::o_head(lane) + e + 8 * h;
#pragma unroll
      for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
        red[Cfg::red_offset(warp, g, Cfg::o_dim(dt, lane))] = o[dt][h][e];
        PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                             .it(2 * h + e).dims(Cfg::o_dim(dt, lane), 1)
                             .at(Cfg::red_smem_byte(warp, g, Cfg::o_dim(dt, lane)), 4));
        red[Cfg::red_offset(warp, g, Cfg::o_dim(dt, lane) + 8)] = o[dt][h][2 + e];
        PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                             .it(2 * h + e).dims(Cfg::o_dim(dt, lane) + 8, 1)
                             .at(Cfg::red_smem_byte(warp, g, Cfg::o_dim(dt, lane) + 8), 4));
      }
    }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  const bool single = gridDim.x == 1;
  for (int q = threadIdx.x, k = 0; q < nh * Cfg::kMergeItemsPerHead; q += Cfg::kNumThreads, ++k) {
    const int g = Cfg::merge_head(q), d0 = Cfg::merge_dim(q, 0);
    float m[kNW];
    float M = kNegInf;
#pragma unroll
    for (int w = 0; w < kNW; ++w) {
      m[w] = stat[Cfg::stat_offset(0, w, g)];
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                           .it(k).at(Cfg::stat_smem_byte(0, w, g), 4));
      M = fmaxf(M, m[w]);
    }
    float L = 0.f;
    float v[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int w = 0; w < kNW; ++w) {
      const float a = rescale<LogBase::two>(m[w], M);  // 0 for an idle warp
      L = fmaf(a, stat[Cfg::stat_offset(1, w, g)], L);
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                           .it(k).at(Cfg::stat_smem_byte(1, w, g), 4));
      const float4 r = *reinterpret_cast<const float4*>(red + Cfg::red_offset(w, g, d0));
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::out_scratch)
                           .it(k).dims(d0, 4).at(Cfg::red_smem_byte(w, g, d0), 16));
      v[0] = fmaf(a, r.x, v[0]);
      v[1] = fmaf(a, r.y, v[1]);
      v[2] = fmaf(a, r.z, v[2]);
      v[3] = fmaf(a, r.w, v[3]);
    }
    if (single) {
      opt_store_item<Cfg>(p, c, k, g, d0, v, M, L, tracer);
    } else {
      *reinterpret_cast<float4*>(p.ws_out + p.wsg.out_offset(seq, unit, split, g, d0)) =
          make_float4(v[0], v[1], v[2], v[3]);
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                           .it(k).dims(d0, 4).at(p.wsg.out_byte(seq, unit, split, g, d0), 16));
      if (d0 == 0) {
        p.ws_stat[p.wsg.stat_offset(seq, unit, split, 0, g)] = M;
        PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                             .it(k).at(p.wsg.stat_byte(seq, unit, split, 0, g), 4));
        p.ws_stat[p.wsg.stat_offset(seq, unit, split, 1, g)] = L;
        PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                             .it(k).at(p.wsg.stat_byte(seq, unit, split, 1, g), 4));
      }
    }
  }
  // LESSON-END(optimized.warp_merge)
  return single;
}

// Several splits: the last CTA of this (sequence, unit) to arrive merges
// every split's state from the workspace into the output. The steps below
// run in this order; opt_split_merge, after them, composes them.
// LESSON-BEGIN(optimized.split_merge)

// Arrival at the counter of this (sequence, unit): every thread waits at the
// barrier and sets n_active (the splits that hold tokens: the arrivals the
// counter counts); thread 0 alone adds 1 to the counter and, in the CTA that
// arrives last, resets it for the next launch; the second barrier hands every
// thread the answer (s_is_last, in shared memory). Returns whether this CTA
// merges.
template <class Cfg, class Tracer>
__device__ __forceinline__ bool opt_split_arrive(const OptParams& p, const OptCta<Cfg>& c, int& s_is_last,
                                                 int& n_active, Tracer& tracer) {
  const int unit = c.unit, seq = c.seq;
  const TraceCtx& tc = c.tc;
  // Last CTA of this (sequence, unit) to arrive merges every split's state.
  // Memory order without a fence in every thread: the barrier orders all of
  // this CTA's state stores before thread 0's arrival, whose acq_rel atomic
  // at GPU scope releases them (release is cumulative) and, in the last CTA,
  // acquires every other split's; the second barrier passes that on to the
  // threads that merge (their loads go to L2: __ldcg).
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  n_active = opt_active_splits(c.ctx, Cfg::kBlockSize, p.split_blocks);
  if (threadIdx.x == 0) {
    int* counter = p.ws_counter + p.wsg.counter_offset(seq, unit);
    const int prev = ptx::atomic_add_acq_rel_gpu(counter, 1);
    // value: 1 for the CTA that arrives last (it merges), 0 for the others.
    PA_TRACE(tracer, ev(tc, Step::split_arrive, Op::atomic, Tensor::counter)
                         .at(p.wsg.counter_byte(seq, unit), 4).val(prev == n_active - 1 ? 1.f : 0.f));
    s_is_last = prev == n_active - 1;
    if (s_is_last) {
      *counter = 0;  // every other split has arrived: ready for the next launch
      PA_TRACE(tracer, ev(tc, Step::split_arrive, Op::global_store, Tensor::counter)
                           .at(p.wsg.counter_byte(seq, unit), 4).val(0.f));
    }
  }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  return s_is_last;
}

// The merge of every split's state, in one pass and without shared memory:
// thread t owns the items q = t, t + kNumThreads, ... (item q: four
// consecutive dims merge_dim(q, 0..3) of head g = merge_head(q), as in the
// warp merge) and merges the splits' states of its dims itself, as stage 7
// merges two states (attention_state.cuh). A round issues the loads of
// opt_merge_round_states states together, one L2 round trip: kS splits of
// each of kB items (per split the head's max m_s and exp sum l_s
// and the item's unnormalized output, one 16-byte load: all L2 loads,
// __ldcg). Then, per item, it moves what it has summed so far to the round's
// new max M and adds each split weighed by 2^(m_s - M):
//   L = sum_s 2^(m_s - M) l_s,  O = (sum_s 2^(m_s - M) O_s) / L.
// The lanes of a warp read consecutive items of each split's output (512
// contiguous bytes for a head of 128) and, within a head, the same m_s and
// l_s (one request). Each item's output (or, for a cascade suffix, its
// state) is then written as the warp merge writes it with one split
// (opt_store_item).
template <class Cfg, int kB, class Tracer>
__device__ __forceinline__ void opt_merge_items(const OptParams& p, const OptCta<Cfg>& c, int n_active,
                                                Tracer& tracer) {
  constexpr int HS = Cfg::kHeadSize;
  constexpr int kS = opt_merge_round_states(Cfg::kMergeSplits, kB) / kB;
  using WS = OptWorkspaceGeometry;
  // Each item's first split of the round addressed once; the other splits,
  // and the sum beside each max, at the workspace's constant strides for
  // this head size: immediate offsets, so no register holds 48 addresses.
  constexpr int kOutStride = WS::out_split_stride(HS);
  const int unit = c.unit, seq = c.seq, n_items = c.nh * Cfg::kMergeItemsPerHead;
  const TraceCtx& tc = c.tc;
  for (int k0 = 0; threadIdx.x + k0 * Cfg::kNumThreads < n_items; k0 += kB) {
    float M[kB], L[kB], o[kB][4];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      M[b] = kNegInf;
      L[b] = 0.f;
      o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.f;
    }
    for (int sp0 = 0; sp0 < n_active; sp0 += kS) {
      float m[kB][kS], l[kB][kS];
      float4 v[kB][kS];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int k = k0 + b, q = threadIdx.x + k * Cfg::kNumThreads;
        const int g = Cfg::merge_head(q), d0 = Cfg::merge_dim(q, 0);
        const float* st = p.ws_stat + p.wsg.stat_offset(seq, unit, sp0, 0, g);
        const float* ov = p.ws_out + p.wsg.out_offset(seq, unit, sp0, g, d0);
#pragma unroll
        for (int u = 0; u < kS; ++u) {
          const int sp = sp0 + u;
          m[b][u] = kNegInf;
          l[b][u] = 0.f;
          v[b][u] = make_float4(0.f, 0.f, 0.f, 0.f);
          if (q < n_items && sp < n_active) {
            m[b][u] = __ldcg(st + u * WS::kStatSplitStride);
            PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).at(p.wsg.stat_byte(seq, unit, sp, 0, g), 4));
            l[b][u] = __ldcg(st + u * WS::kStatSplitStride + WS::kStatSumOffset);
            PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).at(p.wsg.stat_byte(seq, unit, sp, 1, g), 4));
            v[b][u] = __ldcg(reinterpret_cast<const float4*>(ov + u * kOutStride));
            PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).dims(d0, 4).at(p.wsg.out_byte(seq, unit, sp, g, d0), 16));
          }
        }
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        float M_new = M[b];
#pragma unroll
        for (int u = 0; u < kS; ++u) M_new = fmaxf(M_new, m[b][u]);
        // What the earlier rounds summed, moved to the new max (nothing yet
        // in the first round: its sums are 0 and M is -inf).
        const float f = M[b] == kNegInf ? 0.f : rescale<LogBase::two>(M[b], M_new);
        L[b] *= f;
#pragma unroll
        for (int e = 0; e < 4; ++e) o[b][e] *= f;
#pragma unroll
        for (int u = 0; u < kS; ++u) {
          if (sp0 + u < n_active) {
            const float w = rescale<LogBase::two>(m[b][u], M_new);
            L[b] = fmaf(w, l[b][u], L[b]);
            o[b][0] = fmaf(w, v[b][u].x, o[b][0]);
            o[b][1] = fmaf(w, v[b][u].y, o[b][1]);
            o[b][2] = fmaf(w, v[b][u].z, o[b][2]);
            o[b][3] = fmaf(w, v[b][u].w, o[b][3]);
          }
        }
        M[b] = M_new;
      }
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int k = k0 + b, q = threadIdx.x + k * Cfg::kNumThreads;
      if (q < n_items) opt_store_item<Cfg>(p, c, k, Cfg::merge_head(q), Cfg::merge_dim(q, 0), o[b], M[b], L[b], tracer);
    }
  }
}

// The batch (kB above) that merges this unit's items in fewer round trips
// (opt_merge_batch): 1 wherever the splits fill a round by themselves, the
// instance's largest batch (8 at head 256) for few splits of a large state
// (16 heads of 256 dims, 2 splits: two round trips, not eight).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_merge_states(const OptParams& p, const OptCta<Cfg>& c, int n_active,
                                                 Tracer& tracer) {
  constexpr int kMax = opt_merge_max_batch(Cfg::kHeadSize, Cfg::kNumThreads, Cfg::kMergeSplits);
  const int items = ceil_div(c.nh * Cfg::kMergeItemsPerHead, Cfg::kNumThreads);
  if constexpr (kMax > 1) {
    if (opt_merge_batch(items, n_active, Cfg::kMergeSplits, kMax) == kMax)
      return opt_merge_items<Cfg, kMax>(p, c, n_active, tracer);
  }
  opt_merge_items<Cfg, 1>(p, c, n_active, tracer);
}

// The split merge: the arrival (every CTA but the last ends here), then the
// last CTA's merge of every split's state (L2 latency, not HBM bandwidth, is
// what this costs: one round trip per kMergeSplits splits).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_split_merge(const OptParams& p, const OptCta<Cfg>& c, int& s_is_last,
                                                Tracer& tracer) {
  int n_active = 0;  // set by the arrival: the splits that hold tokens
  const bool merges = opt_split_arrive<Cfg>(p, c, s_is_last, n_active, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_split_arrive, -1);
  if (!merges) return;
  opt_merge_states<Cfg>(p, c, n_active, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_merge_states, -1);
}
// LESSON-END(optimized.split_merge)

}  // namespace pa::opt
