// Stage 3, softmax: the logits in shared memory become probabilities.
//
// What it adds to stage 2: two block-wide reductions over the logits, the
// maximum (for a numerically safe exp) and the sum of exp(logit - max), each
// done as: per-thread strided pass over logits[] -> warp shuffle reduction
// (xor masks 16, 8, 4, 2, 1) -> lane 0 of each warp writes the warp's value to
// the reduction scratch -> barrier -> lanes < kNumWarps read the kNumWarps
// values and shuffle-reduce them (masks kNumWarps/2 .. 1) -> lane 0's result is
// broadcast to the warp by one more shuffle. Then every probability is
// exp(logit - max) / sum, written back in place.
//
// Thread mapping: block-strided, thread tid owns range-relative tokens
// i = strided_index(tid, k) = tid + 128 k. Reduction scratch red[]:
// red_max_slot(w) = w, red_sum_slot(w) = kNumWarps + w (two regions, so the
// sum's writes never race with the max's reads).
//
// Observable output (stage 3 kernel): probabilities [seq][head][max_context_len]
// (logit_offset), and max and sum [seq][head] (stat_offset; events name them
// part_max / part_sum: they are the statistics V2 stores per partition).
// The (max, sum) pair is SoftmaxStats (attention_state.cuh): the state that
// stages 6-8 merge.
#pragma once
#include "02_qk.cuh"
#include "attention_state.cuh"

namespace pa::kernels {

// Block-wide reduction of one float per thread (op = max or sum), as above.
// Events (step = step, every thread unless said), iter -1 (no loop; the
// shuffles of a butterfly are successive instructions), src_lane = lane ^ mask:
//   shuffle x5 (masks 16..1)
//   shared_store red_scratch: lane 0 only, byte_offset red_scratch_byte(slot_base + warp), value
//   barrier
//   shared_load red_scratch: lanes < kNumWarps only, byte_offset red_scratch_byte(slot_base + lane), value
//   shuffle x log2(kNumWarps) (masks kNumWarps/2..1)
//   shuffle (broadcast from lane 0: src_lane 0), value = the block's result
template <class Cfg, bool IS_MAX, class Tracer>
__device__ __forceinline__ float block_reduce(float v, float* red, int slot_base, trace::Step step,
                                              const ThreadCtx<Cfg>& c, Tracer& tracer) {
  const float identity = IS_MAX ? -INFINITY : 0.f;
#pragma unroll
  for (int mask = kWarpSize / 2; mask >= 1; mask /= 2) {
    const float o = shfl_xor(v, mask);
    v = IS_MAX ? fmaxf(v, o) : v + o;
    PA_TRACE(tracer, ev(c.tc, step, Op::shuffle, Tensor::none).src(c.lane ^ mask));
  }
  if (c.lane == 0) {
    red[slot_base + c.warp] = v;
    PA_TRACE(tracer, ev(c.tc, step, Op::shared_store, Tensor::red_scratch)
                         .at(red_scratch_byte(slot_base + c.warp), 4).val(v));
  }
  PA_SYNC(tracer, c);
  v = identity;
  if (c.lane < Cfg::kNumWarps) {
    v = red[slot_base + c.lane];
    PA_TRACE(tracer, ev(c.tc, step, Op::shared_load, Tensor::red_scratch)
                         .at(red_scratch_byte(slot_base + c.lane), 4).val(v));
  }
#pragma unroll
  for (int mask = Cfg::kNumWarps / 2; mask >= 1; mask /= 2) {
    const float o = shfl_xor(v, mask);
    v = IS_MAX ? fmaxf(v, o) : v + o;
    PA_TRACE(tracer, ev(c.tc, step, Op::shuffle, Tensor::none).src(c.lane ^ mask));
  }
  v = shfl_from(v, 0);
  PA_TRACE(tracer, ev(c.tc, step, Op::shuffle, Tensor::none).src(0).val(v));
  return v;
}

// Step softmax on logits[0, n) with n = r.token_end - r.token_begin; ends
// with a barrier. Returns the block's max logit and exp sum (every thread).
// Events, in order (k = the strided iteration, token = r.token_begin + i):
//   max_reduce     shared_load logits, iter k, token, byte_offset logits_smem_byte(i), value = logit
//   max_reduce     block_reduce events (red slots 0..kNumWarps-1)
//   exp_sum_reduce shared_load logits then shared_store logits (value = exp(logit - max)), iter k, token
//   exp_sum_reduce block_reduce events (red slots kNumWarps..2 kNumWarps-1)
//   prob_store     shared_load logits then shared_store logits (value = probability), iter k, token
//   barrier
template <class Cfg, class Tracer>
__device__ __forceinline__ SoftmaxStats<> softmax_block(const PartitionRange& r, const ThreadCtx<Cfg>& c,
                                                      SharedV1<Cfg>& sm, Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  const int n = r.token_end - r.token_begin;

  // LESSON-BEGIN(softmax.max_reduce)
  float m = -INFINITY;
  for (int k = 0, i = Map::strided_index(c.tid, 0); i < n; i = Map::strided_index(c.tid, ++k)) {
    const float l = sm.logits[i];
    PA_TRACE(tracer, ev(c.tc, Step::max_reduce, Op::shared_load, Tensor::logits)
                         .it(k).tok(r.token_begin + i).at(logits_smem_byte(i), 4).val(l));
    m = fmaxf(m, l);
  }
  m = block_reduce<Cfg, true>(m, sm.red, Map::red_max_slot(0), Step::max_reduce, c, tracer);
  // LESSON-END(softmax.max_reduce)

  // LESSON-BEGIN(softmax.exp_sum_reduce)
  float s = 0.f;
  for (int k = 0, i = Map::strided_index(c.tid, 0); i < n; i = Map::strided_index(c.tid, ++k)) {
    const float l = sm.logits[i];
    PA_TRACE(tracer, ev(c.tc, Step::exp_sum_reduce, Op::shared_load, Tensor::logits)
                         .it(k).tok(r.token_begin + i).at(logits_smem_byte(i), 4).val(l));
    const float e = expf(l - m);  // accurate expf: the kernel is memory bound
    sm.logits[i] = e;
    PA_TRACE(tracer, ev(c.tc, Step::exp_sum_reduce, Op::shared_store, Tensor::logits)
                         .it(k).tok(r.token_begin + i).at(logits_smem_byte(i), 4).val(e));
    s += e;
  }
  s = block_reduce<Cfg, false>(s, sm.red, Map::red_sum_slot(0), Step::exp_sum_reduce, c, tracer);
  // LESSON-END(softmax.exp_sum_reduce)

  // LESSON-BEGIN(softmax.prob_store)
  // s >= 1: the max logit contributes exp(0) = 1, so no epsilon is needed.
  const float inv_sum = 1.f / s;
  for (int k = 0, i = Map::strided_index(c.tid, 0); i < n; i = Map::strided_index(c.tid, ++k)) {
    const float e = sm.logits[i];
    PA_TRACE(tracer, ev(c.tc, Step::prob_store, Op::shared_load, Tensor::logits)
                         .it(k).tok(r.token_begin + i).at(logits_smem_byte(i), 4).val(e));
    const float p = e * inv_sum;
    sm.logits[i] = p;
    PA_TRACE(tracer, ev(c.tc, Step::prob_store, Op::shared_store, Tensor::logits)
                         .it(k).tok(r.token_begin + i).at(logits_smem_byte(i), 4).val(p));
  }
  PA_SYNC(tracer, c);
  // LESSON-END(softmax.prob_store)
  return {m, s};
}

// Stage 3 kernel: stages 1-2, the softmax, then probabilities, max and sum.
// Output events: store_logits_row (02_qk.cuh), then thread 0 only:
// global_store part_max (byte_offset stat_offset * 4, value max) and
// global_store part_sum (same offset, value sum), step stage_output.
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage3_softmax_kernel(StageArgs a, Tracer tracer) {
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::softmax, a.num_heads, a.num_kv_heads);
  auto sm = shared_v1<Cfg>();
  const PartitionRange r = v1_logits<Cfg>(a, c, sm, tracer).r;  // stages 1-2 (02_qk.cuh)
  const SoftmaxStats<> st = softmax_block<Cfg>(r, c, sm, tracer);
  store_logits_row<Cfg>(sm.logits, r, a.stage_out, a.sg, c, tracer);
  if (c.tid == 0) {
    const std::int64_t off = a.sg.stat_offset(c.seq, c.head);
    a.stage_max[off] = st.max;
    PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::global_store, Tensor::part_max).at(off * 4, 4).val(st.max));
    a.stage_sum[off] = st.sum;
    PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::global_store, Tensor::part_sum).at(off * 4, 4).val(st.sum));
  }
}

}  // namespace pa::kernels
