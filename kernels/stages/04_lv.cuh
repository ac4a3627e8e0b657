// Stage 4, lv: probabilities times V, accumulated per thread, per warp.
//
// What it adds to stage 3: the second walk over the KV blocks (same warp ->
// block assignment as QK), V vec loads (16 bytes: kVVecSize consecutive tokens
// of one head dimension, the V layout's innermost axis), the matching
// probabilities read from shared memory, per-thread float accumulators for
// the V rows (head dims) the thread owns, and the shuffle reduction of the
// lanes that share a row.
//
// Thread mapping: in a block, kNumVVecsPerRow lanes cover one V row (one head
// dim, block_size tokens): lane loads tokens [lv_token_in_block(lane), +kVVecSize)
// of rows lv_row(lane, i) = lane / kNumVVecsPerRow + i * kNumRowsPerIter,
// i = 0..kNumRowsPerThread-1 (rows >= head_size idle). After the loop the
// kNumVVecsPerRow lanes of a row are reduced into the first (lv_row_owner), so
// each warp holds one partial output over the blocks it walked. Row i's V vec
// is i * kLvRowStep elements after row 0's (one address per block), and only
// the range's last block tests its tokens (the others' loop has no test).
//
// Token rows (the nhd and hnd layouts; lv_accumulate_token_rows): a token's V
// is one contiguous row, so the 16-byte V vec is x consecutive head dims of
// one token instead. Lane l loads chunk lv_chunk(l) of tokens lv_row_token(l,
// s), s = 0 .. kLvTokenSteps-1: kLvLanesPerToken lanes read a token's whole
// row (256 bytes at head 128: 8 full sectors), kLvTokensPerIter tokens per
// load instruction, and each lane accumulates its chunk's x dims as its rows
// (lv_row(l, i) = chunk * x + i). A lane issues its block's loads together,
// then uses those of the range's tokens. After the loop the lanes of one chunk,
// kLvLanesPerToken apart, are reduced into the first token's lane, which owns
// the rows, so the reduction across warps and the store below serve both
// mappings unchanged.
//
// fp8 cache (config.hpp): a V vec is min(16, block size) one-byte elements,
// a whole block row for blocks of 8 and 16, half a row for 32, and each
// loaded vec is dequantized (dequant, common.cuh: code to float, times
// v_scale) before it meets the probabilities.
//
// Range: like qk_logits, takes a PartitionRange (V2 calls it per partition).
// The later kernels run stages 3-4 as one call, softmax_times_v, and write
// their rows with this stage's row-owner store, store_owned_rows.
//
// Observable output (stage 4 kernel): per-warp partial outputs
// [seq][head][warp][head_size] (StageOutGeometry::partial_offset): warp w's
// sum over its blocks of prob * V (probabilities already normalized).
#pragma once
#include <type_traits>

#include "03_softmax.cuh"

namespace pa::kernels {

template <class Cfg>
struct RowAcc {
  float v[Cfg::kNumRowsPerThread];
};

// Step lv (vLLM's layout): acc rows += sum over this warp's tokens of prob * V.
// Events, per warp iteration n (iter = n), every thread, in this order:
//   block_table_load (load_physical_block, 02_qk.cuh)
//   logit_load  shared_load logits, only if the lane's first token token0 = token_of(lblock,
//               lv_token_in_block(lane)) < r.token_end: token0, byte_offset
//               logits_smem_byte(token0 - r.token_begin), bytes = 4 * (valid tokens of the vec)
//   then for each valid row i (lv_row_valid(lv_row(lane, i))), in order of i:
//     v_load     global_load v_cache, token0, dims [row, 1), byte_offset = v_offset(phys, kv_head,
//                row, lv_token_in_block(lane)) * cache elem bytes (kKvBytes), bytes kVVecBytes (also
//                past the context: the load happens, those tokens are zeroed)
//     dequant    compute (fp8 cache only), token0, dims [row, 1)
//     accumulate compute, token0, dims [row, 1)
// After the loop (lv_reduce_rows): for each valid row i, for mask = kNumVVecsPerRow/2 .. 1:
//     accumulate shuffle, iter = i, dims [row, 1), src lane ^ mask (masks: lv_reduce_rows; none when
//                kNumVVecsPerRow == 1)
template <class Cfg, class Tracer>
__device__ __forceinline__ void lv_accumulate(const KvElem<Cfg>* __restrict__ v_cache, const CacheGeometry& cg,
                                              float v_scale, const int* __restrict__ block_tables,
                                              const SeqPages& pages, const PartitionRange& r,
                                              const ThreadCtx<Cfg>& c, const SharedV1<Cfg>& sm,
                                              RowAcc<Cfg>& acc, Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  using T = KvElem<Cfg>;
  constexpr int kN = Cfg::kVVecSize;
#pragma unroll
  for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) acc.v[i] = 0.f;

  const int t_in_block = Map::lv_token_in_block(c.lane);
  for (int n = 0, lblock = Map::warp_block(r.block_begin, c.warp, 0); lblock < r.block_end;
       lblock = Map::warp_block(r.block_begin, c.warp, ++n)) {
    const int phys = load_physical_block<Cfg>(block_tables, pages, lblock, n, c, tracer);
    const int token0 = Map::token_of(lblock, t_in_block);

    // LESSON-BEGIN(lv.logit_load)
    // Probabilities of the vec's kVVecSize tokens; tokens past the range count 0.
    const int idx0 = token0 - r.token_begin;
    const int valid = r.token_end - token0;  // >= kN except in the last block
    float p[kN];
    if (valid >= kN) {
#pragma unroll
      for (int e = 0; e < kN; e += 4) {  // kVVecSize is a multiple of 4; logits are 16-byte aligned
        const float4 f = *reinterpret_cast<const float4*>(sm.logits + idx0 + e);
        p[e] = f.x; p[e + 1] = f.y; p[e + 2] = f.z; p[e + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kN; ++e) p[e] = e < valid ? sm.logits[idx0 + e] : 0.f;
    }
    if (valid > 0) {
      PA_TRACE(tracer, ev(c.tc, Step::logit_load, Op::shared_load, Tensor::logits)
                           .it(n).tok(token0).blk(lblock, phys)
                           .at(logits_smem_byte(idx0), 4 * (valid < kN ? valid : kN)));
    }
    // LESSON-END(lv.logit_load)

    // LESSON-BEGIN(lv.v_load)
    // The row loop is compiled twice: tail (std::true_type) only for the
    // range's last block (valid < kN); every other block's vecs lie inside
    // the range, so their loop is loads and FMAs with no test per token
    // (vLLM likewise zeroes only in its last block).
    const std::int64_t v0 =  // row 0's vec; row i's is i * kLvRowStep further (mapping.hpp)
        Map::v_offset(KvLayoutGeometry{KvLayout::vllm, cg}, phys, c.kv_head, Map::lv_row(c.lane, 0), t_in_block);
    auto rows = [&](auto tail) {
#pragma unroll
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(c.lane, i);
        if (Map::lv_row_valid(row)) {
          const std::int64_t off = v0 + i * Map::kLvRowStep;  // = Map::v_offset(.., row, t_in_block)
          const auto loaded = load_vec<T, kN>(v_cache + off);
          PA_TRACE(tracer, ev(c.tc, Step::v_load, Op::global_load, Tensor::v_cache)
                               .it(n).tok(token0).blk(lblock, phys).dims(row, 1)
                               .at(off * Cfg::kKvBytes, Cfg::kVVecBytes));
          const auto v = dequant(loaded, v_scale);  // as loaded, or fp8 codes -> float * v_scale
          if constexpr (is_fp8(Cfg::kKvDType))
            PA_TRACE(tracer, ev(c.tc, Step::dequant, Op::compute, Tensor::none)
                                 .it(n).tok(token0).blk(lblock, phys).dims(row, 1));
          // LESSON-END(lv.v_load)
          // LESSON-BEGIN(lv.accumulate)
          // Past the context the cache holds anything (NaN too), and 0 * NaN = NaN: zero it.
          float s = 0.f;
#pragma unroll
          for (int e = 0; e < kN; ++e) {
            const float x = !tail || e < valid ? to_float(v.e[e]) : 0.f;
            s = fmaf(p[e], x, s);
          }
          acc.v[i] += s;
          PA_TRACE(tracer, ev(c.tc, Step::accumulate, Op::compute, Tensor::none)
                               .it(n).tok(token0).blk(lblock, phys).dims(row, 1));
          // LESSON-END(lv.accumulate)
        }
      }
    };
    if (valid >= kN) rows(std::false_type{});
    else rows(std::true_type{});
  }
}

// Step lv on token rows (nhd, hnd): acc rows (the lane's chunk's x dims) +=
// sum over this warp's tokens of prob * V.
// Events, per warp iteration n (iter = n), every thread, in this order:
//   block_table_load (see load_physical_block)
//   then, lanes whose chunk is inside the row (lv_row_valid(lv_row(lane, 0))) only:
//   for each s = 0..kLvTokenSteps-1, token = token_of(lblock, lv_row_token(lane, s)):
//     v_load      global_load v_cache, token, dims [lv_row(lane, 0), +kVVecSize), byte_offset =
//                 Map::v_offset(layout, phys, kv_head, lv_row(lane, 0), t) * kKvBytes, bytes kVVecBytes
//                 (also past the range: the load happens, the vec is not used)
//   then for each s whose token < r.token_end:
//     logit_load  shared_load logits, token, byte_offset logits_smem_byte(token - r.token_begin), bytes 4
//     accumulate  compute, token, dims [lv_row(lane, 0), +kVVecSize)
// After the loop: lv_reduce_rows (the same contract, with the token-row masks).
template <class Cfg, class Tracer>
__device__ __forceinline__ void lv_accumulate_token_rows(const KvElem<Cfg>* __restrict__ v_cache,
                                                         const KvLayoutGeometry& kv,
                                                         const int* __restrict__ block_tables, const SeqPages& pages,
                                                         const PartitionRange& r, const ThreadCtx<Cfg>& c,
                                                         const SharedV1<Cfg>& sm, RowAcc<Cfg>& acc, Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  using T = KvElem<Cfg>;
  constexpr int kN = Cfg::kVVecSize;  // head dims of one V vec
#pragma unroll
  for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) acc.v[i] = 0.f;
  const int dim0 = Map::lv_row(c.lane, 0);
  const bool in_row = Map::lv_row_valid(dim0);  // lanes past the row's chunks idle
  // Token t's chunk is t token strides past token 0's: one 64-bit address per
  // block, not one per load (computing each from the layout's formula kept
  // kLvTokenSteps addresses live, 122 registers against 72 at head 128).
  const std::int64_t token_stride = kv.token_stride();

  for (int n = 0, lblock = Map::warp_block(r.block_begin, c.warp, 0); lblock < r.block_end;
       lblock = Map::warp_block(r.block_begin, c.warp, ++n)) {
    const int phys = load_physical_block<Cfg>(block_tables, pages, lblock, n, c, tracer);
    if (!in_row) continue;
    const std::int64_t chunk0 = Map::v_offset(kv, phys, c.kv_head, dim0, 0);  // the chunk of the block's token 0
    // LESSON-BEGIN(lv.v_load_token_rows)
    // Every load of the block first, unconditionally (the page holds all its
    // slots), so the kLvTokenSteps loads are in flight together; a load under
    // the branch of its token's use would wait for its data before the next.
    Vec<T, kN> v[Cfg::kLvTokenSteps];
#pragma unroll
    for (int s = 0; s < Cfg::kLvTokenSteps; ++s) {
      const int t = Map::lv_row_token(c.lane, s);
      const std::int64_t off = chunk0 + t * token_stride;  // = Map::v_offset(kv, phys, kv_head, dim0, t)
      v[s] = load_vec<T, kN>(v_cache + off);
      PA_TRACE(tracer, ev(c.tc, Step::v_load, Op::global_load, Tensor::v_cache)
                           .it(n).tok(Map::token_of(lblock, t)).blk(lblock, phys).dims(dim0, kN)
                           .at(off * Cfg::kKvBytes, Cfg::kVVecBytes));
    }
    // LESSON-END(lv.v_load_token_rows)
    // LESSON-BEGIN(lv.accumulate_token_rows)
#pragma unroll
    for (int s = 0; s < Cfg::kLvTokenSteps; ++s) {
      const int token = Map::token_of(lblock, Map::lv_row_token(c.lane, s));
      if (token < r.token_end) {  // past the range the slot holds anything (NaN too): not used
        // LESSON-BEGIN(lv.logit_load_token_rows)
        const float p = sm.logits[token - r.token_begin];
        PA_TRACE(tracer, ev(c.tc, Step::logit_load, Op::shared_load, Tensor::logits)
                             .it(n).tok(token).blk(lblock, phys).at(logits_smem_byte(token - r.token_begin), 4));
        // LESSON-END(lv.logit_load_token_rows)
#pragma unroll
        for (int e = 0; e < kN; ++e) acc.v[e] = fmaf(p, to_float(v[s].e[e]), acc.v[e]);
        PA_TRACE(tracer, ev(c.tc, Step::accumulate, Op::compute, Tensor::none)
                             .it(n).tok(token).blk(lblock, phys).dims(dim0, kN));
      }
    }
    // LESSON-END(lv.accumulate_token_rows)
  }
}

// The lanes that accumulated the same rows (vLLM's layout: adjacent, xor
// masks < kNumVVecsPerRow; token rows: one chunk's lanes, kLvLanesPerToken
// apart) are reduced into the row owner. Every lane shuffles every row (a
// shuffle needs the whole warp); events only for valid rows.
template <class Cfg, class Tracer>
__device__ __forceinline__ void lv_reduce_rows(RowAcc<Cfg>& acc, const ThreadCtx<Cfg>& c, Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  // LESSON-BEGIN(lv.row_reduce)
#pragma unroll
  for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
    const int row = Map::lv_row(c.lane, i);
#pragma unroll
    for (int mask = Map::kLvReduceMaskHigh; mask >= Map::kLvReduceMaskLow; mask /= 2) {
      acc.v[i] += shfl_xor(acc.v[i], mask);
      if (Map::lv_row_valid(row)) {
        PA_TRACE(tracer, ev(c.tc, Step::accumulate, Op::shuffle, Tensor::none).it(i).dims(row, 1).src(c.lane ^ mask));
      }
    }
  }
  // LESSON-END(lv.row_reduce)
}

// Steps softmax and lv as every v1-style kernel runs them on range r: the
// logits become probabilities (softmax_block), then acc = this warp's sum of
// prob * V rows (lv_accumulate, or lv_accumulate_token_rows for nhd / hnd),
// reduced into the row owners (lv_reduce_rows).
// Returns the softmax's max and exp sum (V2 stores them per partition).
// Events: softmax_block's (03_softmax.cuh), lv_accumulate's, lv_reduce_rows'.
template <class Cfg, class Tracer>
__device__ __forceinline__ SoftmaxStats<> softmax_times_v(const StageArgs& a, const PartitionRange& r,
                                                        const SeqPages& pages, const ThreadCtx<Cfg>& c,
                                                        SharedV1<Cfg>& sm, RowAcc<Cfg>& acc, Tracer& tracer) {
  const SoftmaxStats<> st = softmax_block<Cfg>(r, c, sm, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::softmax, -1);
  const auto* v_cache = static_cast<const KvElem<Cfg>*>(a.v_cache);
  if constexpr (Cfg::kTokenRows)
    lv_accumulate_token_rows<Cfg>(v_cache, KvLayoutGeometry{a.kv_layout, a.cg}, a.block_tables, pages, r, c, sm, acc,
                                  tracer);
  else
    lv_accumulate<Cfg>(v_cache, a.cg, a.v_scale, a.block_tables, pages, r, c, sm, acc, tracer);
  lv_reduce_rows<Cfg>(acc, c, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::lv, -1);
  return st;
}

// The row owners' store: if this warp stores (stage 4: every warp; after
// warp_tree_reduce: warp 0), each row-owner lane (lv_row_owner) writes its
// valid rows i, in order of i, as T to dst[dst_offset(row)].
// Events: step `step`, global_store `tensor`, iter = i, dims [row, 1),
// byte_offset = dst_offset(row) * sizeof(T), bytes sizeof(T), value = the
// row's float (before rounding to T).
template <class Cfg, class T, class Offset, class Tracer>
__device__ __forceinline__ void store_owned_rows(bool warp_stores, T* __restrict__ dst, Offset dst_offset, Step step,
                                                 Tensor tensor, const RowAcc<Cfg>& acc, const ThreadCtx<Cfg>& c,
                                                 Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  constexpr int kBytes = static_cast<int>(sizeof(T));
  if (warp_stores && Map::lv_row_owner(c.lane)) {
#pragma unroll
    for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
      const int row = Map::lv_row(c.lane, i);
      if (Map::lv_row_valid(row)) {
        const std::int64_t off = dst_offset(row);
        dst[off] = from_float<T>(acc.v[i]);
        PA_TRACE(tracer, ev(c.tc, step, Op::global_store, tensor)
                             .it(i).dims(row, 1).at(off * kBytes, kBytes).val(acc.v[i]));
      }
    }
  }
}

// Stage 4 kernel: stages 1-3, then LV; each warp's partial rows written by
// their owners. Output events (step stage_output): row-owner lanes, each valid
// row i (iter = i): global_store stage_out, dims [row, 1), byte_offset =
// partial_offset(seq, head, warp, row) * 4, bytes 4, value.
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage4_lv_kernel(StageArgs a, Tracer tracer) {
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::lv, a.num_heads, a.num_kv_heads);
  auto sm = shared_v1<Cfg>();
  const V1Range v = v1_logits<Cfg>(a, c, sm, tracer);  // stages 1-2 (02_qk.cuh)
  RowAcc<Cfg> acc;
  softmax_times_v<Cfg>(a, v.r, v.pages, c, sm, acc, tracer);  // stages 3-4
  store_owned_rows<Cfg>(true, a.stage_out,
                        [&](int row) { return a.sg.partial_offset(c.seq, c.head, c.warp, row); },
                        Step::stage_output, Tensor::stage_out, acc, c, tracer);
}

}  // namespace pa::kernels
