// Stage 8, optimized: the epilogue steps. After the main loop each warp holds
// the state of its own steps; opt_warp_merge merges the CTA's warps through
// shared memory and either writes the output (one split) or the split's
// state to the workspace; with several splits, the last CTA of a (sequence,
// unit) to arrive merges every split's state (opt_split_merge and its
// steps). opt_decode_kernel (08_optimized.cuh) calls them last.
//
// Thread mapping: the warp merge reads each warp's accumulator fragments
// (lane l: O^T dims l/4 (+8) of each 16-dim tile, heads 2(l%4)+{0,1}); the
// split merge spreads (split, head) items and output elements over all the
// CTA's threads, as each step below says. Both merges are the attention
// state's (attention_state.cuh), in base 2.
#pragma once
#include <cstdint>

#include "08_optimized_cta.cuh"
#include "ptx.cuh"

namespace pa::opt {

// The CTA's warps merged through shared memory; with one split the output
// (or a cascade suffix's state) is written, with several the split's state
// goes to the workspace. Returns whether the CTA wrote the output (one split).
template <class Cfg, class Tracer>
__device__ __forceinline__ bool opt_warp_merge(const OptParams& p, const OptCta<Cfg>& c, OptAccum<Cfg>& acc,
                                               unsigned char* smem_raw, Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  constexpr int HS = Cfg::kHeadSize;
  constexpr int HT = Cfg::kHeadTiles;
  constexpr int kNW = Cfg::kNumWarps;
  const int split = c.split, unit = c.unit, seq = c.seq, warp = c.warp, lane = c.lane, head0 = c.head0, nh = c.nh;
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
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
#pragma unroll
  for (int h = 0; h < HT; ++h)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int g = Cfg::o_head(lane) + e + 8 * h;
      float M = kNegInf;
#pragma unroll
      for (int w = 0; w < kNW; ++w) {
        M = fmaxf(M, stat[Cfg::stat_offset(0, w, g)]);
        PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                             .it(2 * h + e).at(Cfg::stat_smem_byte(0, w, g), 4));
      }
      // (the warp's own max, read again here, is one of the loads above)
      const float f = rescale<LogBase::two>(stat[Cfg::stat_offset(0, warp, g)], M);  // 0 for an idle warp
#pragma unroll
      for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
        red[Cfg::red_offset(warp, g, Cfg::o_dim(dt, lane))] = o[dt][h][e] * f;
        PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                             .it(2 * h + e).dims(Cfg::o_dim(dt, lane), 1)
                             .at(Cfg::red_smem_byte(warp, g, Cfg::o_dim(dt, lane)), 4));
        red[Cfg::red_offset(warp, g, Cfg::o_dim(dt, lane) + 8)] = o[dt][h][2 + e] * f;
        PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                             .it(2 * h + e).dims(Cfg::o_dim(dt, lane) + 8, 1)
                             .at(Cfg::red_smem_byte(warp, g, Cfg::o_dim(dt, lane) + 8), 4));
      }
    }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  T* out = static_cast<T*>(p.out);
  const bool single = gridDim.x == 1;
  for (int i = threadIdx.x; i < nh * HS; i += Cfg::kNumThreads) {
    const int g = i / HS, d = i % HS;
    const int it_t = (i - static_cast<int>(threadIdx.x)) / Cfg::kNumThreads;  // traced iteration
    float M = kNegInf;
#pragma unroll
    for (int w = 0; w < kNW; ++w) {
      M = fmaxf(M, stat[Cfg::stat_offset(0, w, g)]);
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                           .it(it_t).at(Cfg::stat_smem_byte(0, w, g), 4));
    }
    float acc = 0.f, L = 0.f;
#pragma unroll
    for (int w = 0; w < kNW; ++w) {
      // (the max read again here is the load above)
      acc += red[Cfg::red_offset(w, g, d)];
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::out_scratch)
                           .it(it_t).dims(d, 1).at(Cfg::red_smem_byte(w, g, d), 4));
      L += stat[Cfg::stat_offset(1, w, g)] * rescale<LogBase::two>(stat[Cfg::stat_offset(0, w, g)], M);
      PA_TRACE(tracer, ev(tc, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                           .it(it_t).at(Cfg::stat_smem_byte(1, w, g), 4));
    }
    if (single && p.state_out != nullptr) {  // cascade suffix: the state
      p.state_out[p.stg.out_offset(seq, head0 + g, d)] = acc / L;
      if (d == 0) p.state_lse[p.stg.lse_offset(seq, head0 + g)] = SoftmaxStats<LogBase::two>{M, L}.lse() * kLn2;
    } else if (single) {
      out[p.qg.out_offset(seq, head0 + g, d)] = static_cast<T>(acc / L);
      PA_TRACE(tracer, ev(tc, Step::out_store, Op::global_store, Tensor::output)
                           .it(it_t).dims(d, 1)
                           .at(p.qg.out_offset(seq, head0 + g, d) * Cfg::kElemBytes, Cfg::kElemBytes)
                           .val(acc / L));
    } else {
      p.ws_out[p.wsg.out_offset(seq, unit, split, g, d)] = acc;
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                           .it(it_t).dims(d, 1).at(p.wsg.out_byte(seq, unit, split, g, d), 4));
      if (d == 0) {
        p.ws_stat[p.wsg.stat_offset(seq, unit, split, 0, g)] = M;
        PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                             .it(it_t).at(p.wsg.stat_byte(seq, unit, split, 0, g), 4));
        p.ws_stat[p.wsg.stat_offset(seq, unit, split, 1, g)] = L;
        PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::workspace)
                             .it(it_t).at(p.wsg.stat_byte(seq, unit, split, 1, g), 4));
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

// The merging CTA's shared memory (the pipeline's, free again), per split and
// head of the unit: the split's max, later its weight, and its exp sum; per
// head: 1/L and log2 L. Byte offsets: opt_merge_*_byte (pa/index/optimized.hpp).
struct OptMergeSmem {
  float* sm_m;   // [n_active][16]: the max, then the weight 2^(m_s - M)
  float* sm_l;   // [n_active][16]: the exp sum
  float* inv_l;  // [16]
  float* lse2;   // [16] (state output only): the base-2 lse, M + log2 L
};

// Where those arrays lie for n_active splits, from the start of the CTA's
// dynamic shared memory (every thread computes the same pointers; nothing is
// read or written).
__device__ __forceinline__ OptMergeSmem opt_merge_smem(unsigned char* smem_raw, int n_active) {
  constexpr int kUH = OptWorkspaceGeometry::kUnitHeads;
  OptMergeSmem s;
  s.sm_m = reinterpret_cast<float*>(smem_raw);
  s.sm_l = s.sm_m + n_active * kUH;
  s.inv_l = s.sm_l + n_active * kUH;
  s.lse2 = s.inv_l + kUH;
  return s;
}

// Stats of every split into shared memory: the (split, head) items i =
// split * nh + head are spread over the CTA's threads (thread t: items t,
// t + kNumThreads, ...); each thread loads its items' max and exp sum from the
// workspace (L2 loads, __ldcg: one load per thread, all in flight) and
// stores them to sm_m and sm_l. A barrier ends the step.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_merge_load_stats(const OptParams& p, const OptCta<Cfg>& c, int n_active,
                                                     const OptMergeSmem& s, Tracer& tracer) {
  constexpr int kUH = OptWorkspaceGeometry::kUnitHeads;
  const int unit = c.unit, seq = c.seq, nh = c.nh;
  const TraceCtx& tc = c.tc;
  float* sm_m = s.sm_m;
  float* sm_l = s.sm_l;
  for (int i = threadIdx.x; i < n_active * nh; i += Cfg::kNumThreads) {
    const int sp = i / nh, g = i % nh;
    const int it_t = (i - static_cast<int>(threadIdx.x)) / Cfg::kNumThreads;  // traced iteration
    sm_m[sp * kUH + g] = __ldcg(p.ws_stat + p.wsg.stat_offset(seq, unit, sp, 0, g));
    PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                         .it(it_t).at(p.wsg.stat_byte(seq, unit, sp, 0, g), 4));
    PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_store, Tensor::red_scratch)
                         .it(it_t).at(opt_merge_m_byte(sp, g), 4));
    sm_l[sp * kUH + g] = __ldcg(p.ws_stat + p.wsg.stat_offset(seq, unit, sp, 1, g));
    PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                         .it(it_t).at(p.wsg.stat_byte(seq, unit, sp, 1, g), 4));
    PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_store, Tensor::red_scratch)
                         .it(it_t).at(opt_merge_l_byte(n_active, sp, g), 4));
  }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
}

// The weights 2^(m_s - M) per (split, head) and 1/L per head: warp w takes
// heads w, w + kNumWarps, ...; for each, its lanes stride over the splits
// (lane l: splits l, l + 32, ...) for the max M (shuffles reduce it), then
// overwrite each split's max in sm_m with its weight and sum the weighted exp
// sums into L (shuffles again); lane 0 stores 1/L to inv_l (and, for a state
// output, log2 L to lse2). A barrier ends the step.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_merge_weights(const OptParams& p, const OptCta<Cfg>& c, int n_active,
                                                  const OptMergeSmem& s, Tracer& tracer) {
  constexpr int kNW = Cfg::kNumWarps;
  constexpr int kUH = OptWorkspaceGeometry::kUnitHeads;
  const int warp = c.warp, lane = c.lane, nh = c.nh;
  const TraceCtx& tc = c.tc;
  float* sm_m = s.sm_m;
  const float* sm_l = s.sm_l;
  float* inv_l = s.inv_l;
  float* lse2 = s.lse2;
  // One warp per head: lanes stride over the splits, shuffles reduce. Events
  // carry the head loop's round (g - warp) / kNW as iter; in the split loops
  // also that loop's iteration sp / 32 as lane_iter (lanes run different
  // counts of it).
  for (int g = warp; g < nh; g += kNW) {
    const int round = (g - warp) / kNW;
    float M = kNegInf;
    for (int sp = lane; sp < n_active; sp += kWarpSize) {
      M = fmaxf(M, sm_m[sp * kUH + g]);
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_load, Tensor::red_scratch)
                           .it(round).lane_it(sp / kWarpSize).at(opt_merge_m_byte(sp, g), 4));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      M = fmaxf(M, __shfl_xor_sync(kFull, M, o));
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shuffle, Tensor::none).it(round).src(lane ^ o));
    }
    float L = 0.f;
    for (int sp = lane; sp < n_active; sp += kWarpSize) {
      const float w = rescale<LogBase::two>(sm_m[sp * kUH + g], M);
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_load, Tensor::red_scratch)
                           .it(round).lane_it(sp / kWarpSize).at(opt_merge_m_byte(sp, g), 4));
      sm_m[sp * kUH + g] = w;  // now the split's weight
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_store, Tensor::red_scratch)
                           .it(round).lane_it(sp / kWarpSize).at(opt_merge_m_byte(sp, g), 4));
      L += w * sm_l[sp * kUH + g];
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_load, Tensor::red_scratch)
                           .it(round).lane_it(sp / kWarpSize).at(opt_merge_l_byte(n_active, sp, g), 4));
    }
#pragma unroll
    for (int o = 16; o > 0; o /= 2) {
      L += __shfl_xor_sync(kFull, L, o);
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shuffle, Tensor::none).it(round).src(lane ^ o));
    }
    if (lane == 0) {
      if (p.state_out != nullptr) lse2[g] = SoftmaxStats<LogBase::two>{M, L}.lse();
      inv_l[g] = 1.f / L;
      PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_store, Tensor::red_scratch)
                           .it(round).at(opt_merge_inv_byte(n_active, g), 4));
    }
  }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
}

// The weighted sum over the splits and the store: thread t owns the
// (head, dim) items i = head * HS + dim = t, t + kNumThreads, ... (kItems of
// them; those past nh * HS idle); split by split it loads its items' partial
// outputs from the workspace (L2) and adds them times the split's weight from
// sm_m, then stores each item times 1/L to the output (or, for a cascade
// suffix, the state; the thread of dim 0 also writes the head's lse).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_merge_sum_store(const OptParams& p, const OptCta<Cfg>& c, int n_active,
                                                    const OptMergeSmem& s, Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  constexpr int HS = Cfg::kHeadSize;
  constexpr int kUH = OptWorkspaceGeometry::kUnitHeads;
  const int unit = c.unit, seq = c.seq, head0 = c.head0, nh = c.nh;
  const TraceCtx& tc = c.tc;
  const float* sm_m = s.sm_m;
  const float* inv_l = s.inv_l;
  const float* lse2 = s.lse2;
  T* out = static_cast<T*>(p.out);
  constexpr int kItems = Cfg::kMaxUnitHeads * HS / Cfg::kNumThreads;
  static_assert(kItems * Cfg::kNumThreads == Cfg::kMaxUnitHeads * HS, "items must tile the threads");
  // kU splits' loads issued together: about 32 L2 loads in flight per thread.
  constexpr int kU = cmax(1, 32 / kItems);
  float acc[kItems];
  int gi[kItems];
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    acc[it] = 0.f;
    gi[it] = (threadIdx.x + it * Cfg::kNumThreads) / HS;
  }
  const int n_items = nh * HS;
  const float* part0 = p.ws_out + p.wsg.out_offset(seq, unit, 0, 0, 0);
  const std::int64_t split_stride = p.wsg.split_stride();
  int sp = 0;
  for (; sp + kU <= n_active; sp += kU) {
    float v[kU][kItems];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int it = 0; it < kItems; ++it) {
        const int i = threadIdx.x + it * Cfg::kNumThreads;
        v[u][it] = i < n_items ? __ldcg(part0 + (sp + u) * split_stride + i) : 0.f;
        if (i < n_items)
          PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                               .it(sp + u).dims(i % HS, 1).at(p.wsg.out_byte(seq, unit, sp + u, i / HS, i % HS), 4));
      }
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int it = 0; it < kItems; ++it) {
        acc[it] += sm_m[(sp + u) * kUH + gi[it]] * v[u][it];
        PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_load, Tensor::red_scratch)
                             .it(sp + u).at(opt_merge_m_byte(sp + u, gi[it]), 4));
      }
  }
  for (; sp < n_active; ++sp) {
#pragma unroll
    for (int it = 0; it < kItems; ++it) {
      const int i = threadIdx.x + it * Cfg::kNumThreads;
      if (i < n_items) {
        acc[it] += sm_m[sp * kUH + gi[it]] * __ldcg(part0 + sp * split_stride + i);
        PA_TRACE(tracer, ev(tc, Step::merge, Op::shared_load, Tensor::red_scratch)
                             .it(sp).at(opt_merge_m_byte(sp, gi[it]), 4));
        PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::workspace)
                             .it(sp).dims(i % HS, 1).at(p.wsg.out_byte(seq, unit, sp, i / HS, i % HS), 4));
      }
    }
  }
#pragma unroll
  for (int it = 0; it < kItems; ++it) {
    const int i = threadIdx.x + it * Cfg::kNumThreads;
    if (i < n_items) {
      const int g = gi[it], d = i % HS;
      if (p.state_out != nullptr) {  // cascade suffix: the state
        p.state_out[p.stg.out_offset(seq, head0 + g, d)] = acc[it] * inv_l[g];
        if (d == 0) p.state_lse[p.stg.lse_offset(seq, head0 + g)] = lse2[g] * kLn2;
        continue;
      }
      out[p.qg.out_offset(seq, head0 + g, d)] = static_cast<T>(acc[it] * inv_l[g]);
      // The 1/L read belongs to the output store: as a merge step its item
      // number would read as a split number (the loops above).
      PA_TRACE(tracer, ev(tc, Step::out_store, Op::shared_load, Tensor::red_scratch)
                           .it(it).at(opt_merge_inv_byte(n_active, g), 4));
      PA_TRACE(tracer, ev(tc, Step::out_store, Op::global_store, Tensor::output)
                           .it(it).dims(d, 1)
                           .at(p.qg.out_offset(seq, head0 + g, d) * Cfg::kElemBytes, Cfg::kElemBytes)
                           .val(acc[it] * inv_l[g]));
    }
  }
}

// The split merge, step by step: the arrival (every CTA but the last ends
// here); then, in the last CTA, the stats of every split into shared memory
// (one load per thread, all in flight), the weights 2^(m_s - M) per (split,
// head), and the weighted sum with every thread's loads of one split issued
// together (L2 latency, not HBM bandwidth, is what this phase costs).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_split_merge(const OptParams& p, const OptCta<Cfg>& c, unsigned char* smem_raw,
                                                int& s_is_last, Tracer& tracer) {
  int n_active = 0;  // set by the arrival: the splits that hold tokens
  const bool merges = opt_split_arrive<Cfg>(p, c, s_is_last, n_active, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_split_arrive, -1);
  if (!merges) return;
  const OptMergeSmem s = opt_merge_smem(smem_raw, n_active);
  opt_merge_load_stats<Cfg>(p, c, n_active, s, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_merge_load_stats, -1);
  opt_merge_weights<Cfg>(p, c, n_active, s, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_merge_weights, -1);
  opt_merge_sum_store<Cfg>(p, c, n_active, s, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_merge_sum_store, -1);
}
// LESSON-END(optimized.split_merge)

}  // namespace pa::opt
