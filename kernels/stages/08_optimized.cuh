// Stage 8: the optimized decode kernel. What it adds to stages 1-7:
//
//  * GQA: one CTA serves a KV head and ALL the query heads of its group (up to
//    16 per CTA), so every K/V byte is read from memory once, not once per
//    query head (vLLM v1/v2 read it group-size times).
//  * Loads in flight: each warp runs its own kStages-deep cp.async pipeline of
//    whole (block, kv head) K and V tiles (16-byte LDGSTS.BYPASS, contiguous
//    4 KB tiles for head 128 / block 16) into shared memory, so about 64 KB per
//    CTA (two of its ~96 KB pipeline's three stages; two CTAs per SM where the
//    grid has them) is always on its way from HBM. The copies carry no L2
//    prefetch hint: the warp reads every byte of a tile anyway, so a 256-byte
//    prefetch brings no new byte and only adds L2 work (12.5% more sectors
//    asked of L2 for the same DRAM bytes); on an H200, where L2 and not DRAM
//    is the limit, the hint cost 4-5% of the time.
//  * Tensor cores: QK (S = Q K^T, the unit's query heads are the m rows, padded
//    to 16) and PV (O^T = V^T P^T, head dims are the m rows, so no padding in
//    the accumulators) run as mma.m16n8k16 with fp32 accumulation, fed by
//    ldmatrix from swizzled shared memory: fp16 and bf16 take the same path and
//    the same time, and the arithmetic stays far from the memory time.
//  * Split-KV chosen by the host (plan_optimized) from the SM count, the
//    kernel's occupancy and the problem; the per-split states (unnormalized O,
//    max, sum in base 2) are merged by the last CTA of each (sequence, unit) to
//    arrive (arrival counter), so there is one launch.
//  * ALiBi (when the launch has slopes): each lane's S rows get their head's
//    slope once (opt_alibi_slopes), and the bias joins each logit in the
//    online softmax, already in base 2.
//  * fp8 caches (Cfg::kFp8): the pipeline copies the one-byte codes, 32
//    tokens a step (as many bytes as a 16-token fp16 step); the
//    mma fragments come from 4-byte shared loads converted to fp16 by one
//    cvt per two codes (opt_qk_mma_fp8, opt_pv_mma_fp8), exactly, since every
//    fp8 value is an fp16 value. Both products run in fp16 for bf16 queries
//    too: Q is rescaled once per head by a power of two into fp16's range
//    (opt_q_to_fp16), which keeps its bf16 bits. The scales never touch an element: k_scale
//    joins the softmax scale (S = k_scale * Q . codes) and v_scale multiplies
//    the output once (opt_v_scale), because both enter linearly.
//  * KV layouts (Cfg::kTokenRows): vLLM's cache (K [x-chunk][token][x] and V
//    [dim][token] per page and kv head) or a token-row cache, NHD or HND
//    (each token's head dims contiguous, K and V halves of one page tensor).
//    Either way a cp.async moves 16 bytes (x elements: the widest copy), and a
//    warp's 32 copies read 512 contiguous bytes (vLLM and HND: a run of the
//    4 KB tile; NHD, head 128 in 16 bits: two 256-byte token rows
//    kv_heads * 256 bytes apart) and write them to shared memory in the same
//    order, swizzled inside 128-byte lines: copies whose lanes scatter over
//    lines run as one request per lane and halve the bandwidth. QK's ldmatrix
//    reads K rows (token, dim chunk) in either order; PV reads token-row V
//    with ldmatrix.trans.
//  * Page tables: padded [seqs, max_blocks] rows, or CSR (kv_indptr gives the
//    row, kv_last_page_len the last page's tokens; an empty row gets zeros).
//
// Thread mapping (pa/index/optimized.hpp has every formula):
//   grid (splits, units, seqs); kNumWarps warps (4; 8 where an fp8 step is
//   4 KB, head 64: opt_num_warps); warp w handles steps w, w + kNumWarps, ... of its
//   split; a step = 16 tokens (one block of 16, two of 8) or one block of 32
//   (fp8 cache: 32 tokens, two blocks of 16 or one of 32).
//   In a step, lane l holds S for heads l/4 (+8) and tokens 2(l%4)+{0,1} of
//   each 8-token n-tile (fp8: tokens s_token(nt, 2(l%4)+{0,1})), and O^T for
//   dims l/4 (+8) of each 16-dim tile and heads 2(l%4)+{0,1}.
//   Epilogue: warps merge through shared memory; one CTA per split writes its
//   state to the workspace and the last one merges the splits.
//
// Files: the parameters and per-CTA types are in 08_optimized_cta.cuh, the
// main-loop steps and the kernel below, the epilogue steps (warp merge, split
// merge) in 08_optimized_epilogue.cuh, the host side in 08_optimized.cu.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "08_optimized_cta.cuh"
#include "08_optimized_epilogue.cuh"
#include "pa/index/alibi.hpp"
#include "pa/index/cascade.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/optimized.hpp"
#include "pa/index/tracer.hpp"
#include "ptx.cuh"

namespace pa::opt {


// ---------------------------------------------------------------- the steps
// Each step of the kernel is a function below, in the order the kernel runs
// them (opt_decode_kernel at the end composes them); the host model
// (trace/src/host_model_optimized.cpp) has the same steps.

// Prologue: which blocks and heads this CTA works on, the first block-table
// window (tbl: lane l holds the physical block of step l / BPS of the window)
// and the context length. false: nothing to do (a split past a short
// sequence; a sequence, or a cascade suffix, with no token: split 0 writes
// its empty state, or zeros as its output).
template <class Cfg, class Tracer>
__device__ __forceinline__ bool opt_prologue(const OptParams& p, OptCta<Cfg>& c, int& tbl, Tracer& tracer) {
  constexpr int HS = Cfg::kHeadSize;
  constexpr int BS = Cfg::kBlockSize;
  constexpr int BPS = Cfg::kBlocksPerStep;
  using T = typename OptElem<Cfg::kDType>::T;
  const int split = blockIdx.x, unit = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int blk_begin = split * p.split_blocks;
  // Trace identity of the CTA: head = the unit's first query head, partition = the split.
  const TraceCtx tc{trace::Stage::optimized, warp, lane, seq, opt_unit_first_head(unit, p.head_chunks, p.group),
                    split, opt_unit_kv_head(unit, p.head_chunks)};
  // The sequence's row of the page table: its first entry and how many
  // entries it has. Padded: row seq of [seqs, max_blocks_per_seq], known
  // without a load. CSR: indices[indptr[seq] .. indptr[seq + 1]), one
  // dependent load before the window.
  const bool csr = p.kv_indptr != nullptr;
  std::int64_t row;
  int row_len;
  if (csr) {
    row = __ldg(p.kv_indptr + seq);
    row_len = __ldg(p.kv_indptr + seq + 1) - row;
    PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at(seq * 4, 4));
    PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at((seq + 1) * 4, 4));
  } else {
    row = p.btg.offset(seq, 0);
    row_len = p.btg.max_blocks_per_seq;
  }
  // First block-table window loaded before the context length is known (the
  // entries exist up to the row's length; validity is decided below), so the
  // two dependent DRAM round trips of a short launch overlap.
  auto table_index = [&](int lb) { return row + p.first_block + lb; };
  {
    const int lb = Cfg::step_block(blk_begin, warp, lane / BPS, lane % BPS);
    if (lb < row_len - p.first_block) {
      tbl = __ldg(p.block_tables + table_index(lb));
      PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::block_table)
                           .it(0).blk(lb, tbl).at(table_index(lb) * 4, 4));
    }
  }
  const int seq_len = csr ? CsrPageTable::seq_len_of(row_len, row_len > 0 ? __ldg(p.kv_last_page_len + seq) : 0, BS)
                          : p.context_lens[seq];
  const int ctx = seq_len - p.first_block * BS;  // tokens of the attended range
  if (!csr)
    PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::context_lens)
                         .at(context_len_offset(seq) * 4, 4));
  else if (row_len > 0)
    PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::kv_last_page_len).at(seq * 4, 4));
  const int nblocks = ceil_div(ctx, BS);
  if (ctx <= 0) {
    // No token to attend: a cascade suffix with none past the prefix gets
    // the empty state (lse -inf, out 0), which the merge weighs 0; an empty
    // sequence of a CSR table gets zeros. Written by split 0.
    if (split == 0) {
      const int nh0 = opt_unit_num_heads(unit, p.head_chunks, p.group);
      const int h0 = opt_unit_first_head(unit, p.head_chunks, p.group);
      for (int i = threadIdx.x; i < nh0 * HS; i += Cfg::kNumThreads) {
        if (p.state_out != nullptr) {
          p.state_out[p.stg.out_offset(seq, h0 + i / HS, i % HS)] = 0.f;
          if (i % HS == 0) p.state_lse[p.stg.lse_offset(seq, h0 + i / HS)] = kNegInf;
        } else {
          static_cast<T*>(p.out)[p.qg.out_offset(seq, h0 + i / HS, i % HS)] = static_cast<T>(0.f);
        }
      }
    }
    return false;
  }
  if (blk_begin >= nblocks) return false;  // this sequence is shorter than the grid's splits
  const int blk_end = cmin(nblocks, blk_begin + p.split_blocks);
  const int tok_limit = cmin(ctx, blk_end * BS);
  const int nsteps = ceil_div(blk_end - blk_begin, BPS);
  const int kvh = opt_unit_kv_head(unit, p.head_chunks);
  const int head0 = opt_unit_first_head(unit, p.head_chunks, p.group);
  const int nh = opt_unit_num_heads(unit, p.head_chunks, p.group);
  c = OptCta<Cfg>{split, unit, seq, warp, lane, blk_begin, blk_end, ctx, tok_limit, nsteps, kvh, head0, nh, tc};
  return true;
}

// Q of the unit's heads straight into mma A fragments (registers), once.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_q_frags(const OptParams& p, const OptCta<Cfg>& c,
                                            std::uint32_t (&qf)[Cfg::kQkKSteps][4], Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  constexpr int HT = Cfg::kHeadTiles;
  const int seq = c.seq, lane = c.lane, head0 = c.head0, nh = c.nh;
  const TraceCtx& tc = c.tc;
  const T* __restrict__ qptr = static_cast<const T*>(p.q);
  // LESSON-BEGIN(optimized.q_frag)
#pragma unroll
  for (int ks = 0; ks < Cfg::kQkKSteps; ++ks) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int g = Cfg::q_frag_head(lane, r);
      std::uint32_t v = 0;
      if ((HT == 2 || (r & 1) == 0) && g < nh) {
        const int d = Cfg::q_frag_dim(lane, ks, r);
        const std::int64_t off = p.qg.q_offset(seq, head0 + g, d);
        // Dims d and d + 1 (d even, Q rows 16-byte aligned) in one 4-byte
        // load straight into the fragment register: nothing uses the value
        // until the first QK mma, so the warp goes on to issue its pipeline
        // while Q is on its way from memory.
        v = __ldg(reinterpret_cast<const unsigned int*>(qptr + off));
        PA_TRACE(tracer, ev(tc, Step::q_load, Op::global_load, Tensor::q)
                             .it(4 * ks + r).dims(d, 2).at(off * Cfg::kElemBytes, 2 * Cfg::kElemBytes));
      }
      qf[ks][r] = v;
    }
  }
  // LESSON-END(optimized.q_frag)
}

// bf16 queries with an fp8 cache (Cfg::kQkFp16): Q's fragments rewritten in
// fp16, so that QK runs in fp16 like PV and each K fragment register costs
// one cvt (fp8 -> bf16 takes four instructions). Each head is multiplied by
// 2^k, the power of two that puts its largest |q| in [2^14, 2^15): a row's 4
// lanes (the row is lane / 4) share their maxima by two shuffles, the
// product is exact in float, and rounding it to fp16 keeps the bf16 value
// whole (8 significant bits in fp16's 11) wherever |q| is at least 2^-28 of
// the head's largest; smaller ones land in fp16's subnormals, off by at most
// 2^-39 of the largest. S then comes out 2^k too large, so the row's logit
// factor is p.scale_log2 * 2^-k. A head of zeros (or of bf16 subnormals),
// or one holding an infinity, keeps k = 0 and its values pass as they are;
// fmaxf passes over a NaN, which converts to an fp16 NaN, so an infinity or
// a NaN reaches S as it would in bf16.
template <class Cfg, class Tracer>
__device__ __forceinline__ OptRowScale<Cfg> opt_q_to_fp16(const OptParams& p, const OptCta<Cfg>& c,
                                                         std::uint32_t (&qf)[Cfg::kQkKSteps][4], Tracer& tracer) {
  constexpr int HT = Cfg::kHeadTiles;
  const int lane = c.lane;
  const TraceCtx& tc = c.tc;
  auto lo = [](std::uint32_t v) { return __uint_as_float(v << 16); };  // bf16 bits -> float, exactly
  auto hi = [](std::uint32_t v) { return __uint_as_float(v & 0xffff0000u); };
  OptRowScale<Cfg> rs;
  // LESSON-BEGIN(optimized.q_to_fp16)
  // Registers r = 0, 2 hold the lane's row qk_row(lane), r = 1, 3 the row 8
  // further on (head tile 1; zeros with one head tile).
  float amax[HT];
#pragma unroll
  for (int h = 0; h < HT; ++h) amax[h] = 0.f;
#pragma unroll
  for (int ks = 0; ks < Cfg::kQkKSteps; ++ks)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      if ((r & 1) < HT) amax[r & 1] = fmaxf(amax[r & 1], fmaxf(fabsf(lo(qf[ks][r])), fabsf(hi(qf[ks][r]))));
  float mul[HT];
#pragma unroll
  for (int h = 0; h < HT; ++h) {
    amax[h] = fmaxf(amax[h], __shfl_xor_sync(kFull, amax[h], 1));
    PA_TRACE(tracer, ev(tc, Step::q_scale, Op::shuffle, Tensor::none).it(h).src(lane ^ 1));
    amax[h] = fmaxf(amax[h], __shfl_xor_sync(kFull, amax[h], 2));
    PA_TRACE(tracer, ev(tc, Step::q_scale, Op::shuffle, Tensor::none).it(h).src(lane ^ 2));
    // amax in [2^(e - 127), 2^(e - 126)) for a normal float's exponent field e.
    const int e = static_cast<int>((__float_as_uint(amax[h]) >> 23) & 0xffu);
    const int k = (e == 0 || e == 0xff) ? 0 : cmin(126, 141 - e);  // 2^k and 2^-k stay normal floats
    mul[h] = __uint_as_float(static_cast<std::uint32_t>(127 + k) << 23);
    rs.scale_log2[h] = p.scale_log2 * __uint_as_float(static_cast<std::uint32_t>(127 - k) << 23);
  }
#pragma unroll
  for (int ks = 0; ks < Cfg::kQkKSteps; ++ks)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      if ((r & 1) < HT) qf[ks][r] = ptx::pack2<__half>(lo(qf[ks][r]) * mul[r & 1], hi(qf[ks][r]) * mul[r & 1]);
#pragma unroll
  for (int h = 0; h < HT; ++h) PA_TRACE(tracer, ev(tc, Step::q_scale, Op::compute, Tensor::none).it(h));
  // LESSON-END(optimized.q_to_fp16)
  return rs;
}

// ALiBi's slopes of the lane's S rows, once (pa/index/alibi.hpp's bias is
// added in opt_online_softmax). Rows past the unit's heads keep 0.
template <class Cfg, class Tracer>
__device__ __forceinline__ OptAlibi<Cfg> opt_alibi_slopes(const OptParams& p, const OptCta<Cfg>& c, Tracer& tracer) {
  OptAlibi<Cfg> al;
  al.on = p.alibi_slopes != nullptr;
  // LESSON-BEGIN(optimized.alibi)
#pragma unroll
  for (int h = 0; h < Cfg::kHeadTiles; ++h) {
    const int g = Cfg::qk_row(c.lane) + 8 * h;
    al.slope_log2[h] = 0.f;
    if (al.on && g < c.nh) {
      const float slope = __ldg(p.alibi_slopes + c.head0 + g);
      al.slope_log2[h] = slope * kLog2e;  // the logits are in base 2
      PA_TRACE(tracer, ev(c.tc, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes)
                           .it(h).at((c.head0 + g) * 4, 4).val(slope));
    }
  }
  // LESSON-END(optimized.alibi)
  return al;
}

// Step j of this warp's pipeline issued: its K and V tiles copied with
// cp.async into stage j % kStages of the warp's shared memory (the next
// block-table window loaded first every 32 / BPS steps).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_pipeline_issue(const OptParams& p, const OptCta<Cfg>& c, std::uint32_t smem_base,
                                                   int j, int& tbl, Tracer& tracer) {
  constexpr int BS = Cfg::kBlockSize;
  constexpr int BPS = Cfg::kBlocksPerStep;
  constexpr int kStages = Cfg::kStages;
  constexpr int kStepsPerTbl = kWarpSize / BPS;
  const int seq = c.seq, warp = c.warp, lane = c.lane, blk_begin = c.blk_begin, blk_end = c.blk_end, ctx = c.ctx,
            kvh = c.kvh;
  const TraceCtx& tc = c.tc;
  using KvT = OptKvElem<Cfg>;
  const KvT* __restrict__ kc = static_cast<const KvT*>(p.k_cache);
  const KvT* __restrict__ vc = static_cast<const KvT*>(p.v_cache);
  // LESSON-BEGIN(optimized.pipeline_issue)
  if (j > 0 && j % kStepsPerTbl == 0) {  // one coalesced block-table load per 32 blocks
    // The sequence's table row again (opt_prologue; a CSR row start comes
    // from L1), rather than one more register held through the loop.
    const std::int64_t row = p.kv_indptr != nullptr ? __ldg(p.kv_indptr + seq) : p.btg.offset(seq, 0);
    if (p.kv_indptr != nullptr)
      PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::kv_indptr).it(j).at(seq * 4, 4));
    auto table_index = [&](int lb) { return row + p.first_block + lb; };
    const int lb = Cfg::step_block(blk_begin, warp, j + lane / BPS, lane % BPS);
    tbl = lb < blk_end ? __ldg(p.block_tables + table_index(lb)) : 0;
    if (lb < blk_end)
      PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::block_table)
                           .it(j).blk(lb, tbl).at(table_index(lb) * 4, 4));
  }
  const int stage = j % kStages;
#pragma unroll
  for (int bi = 0; bi < BPS; ++bi) {
    const int lb = Cfg::step_block(blk_begin, warp, j, bi);
    const int owner = Cfg::table_lane(j, bi);  // the lane that loaded this block's entry
    const int phys = __shfl_sync(kFull, tbl, owner);
    const int nvalid = lb < blk_end ? cmin(BS, ctx - lb * BS) : 0;
    // Past the split's end (a step's second block: block size 8, or 16 with fp8) there is no block.
    const int lb_t = lb < blk_end ? lb : -1, phys_t = lb < blk_end ? phys : -1;
    PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::shuffle, Tensor::none).it(j).blk(lb_t, phys_t).src(owner));
    const KvT* kt = kc + Cfg::k_tile_offset(p.kv, phys, kvh);
    const KvT* vt = vc + Cfg::v_tile_offset(p.kv, phys, kvh);
#pragma unroll
    for (int L = lane; L < Cfg::kTileChunks; L += kWarpSize) {
      const bool kok = Cfg::k_chunk_token(L) < nvalid;
      ptx::cp_async_16(smem_base + 16u * Cfg::k_smem_chunk(warp, stage, Cfg::k_tile_chunk(bi, L)),
                       kok ? kt + Cfg::chunk_elem_offset(L, p.kv_token_stride) : kc, kok ? 16 : 0);
      // cp.async: the global side (bytes actually read; 0 = zero-fill), then
      // the 16-byte shared-memory destination (swizzled).
      PA_TRACE(tracer, ev(tc, Step::k_load, Op::async_copy, Tensor::k_cache)
                           .it(j).lane_it(L / kWarpSize).tok(lb_t < 0 ? -1 : lb * BS + Cfg::k_chunk_token(L)).blk(lb_t, phys_t)
                           .dims(Cfg::k_chunk_dim(L), Cfg::kX)
                           .at(kok ? Cfg::k_chunk_byte(p.kv, phys, kvh, L) : -1, kok ? 16 : 0));
      PA_TRACE(tracer, ev(tc, Step::k_load, Op::shared_store, Tensor::kv_smem)
                           .it(j).lane_it(L / kWarpSize).tok(lb_t < 0 ? -1 : lb * BS + Cfg::k_chunk_token(L)).blk(lb_t, phys_t)
                           .dims(Cfg::k_chunk_dim(L), Cfg::kX)
                           .at(Cfg::k_smem_byte(warp, stage, Cfg::k_tile_chunk(bi, L)), 16));
      const int vbytes = Cfg::v_chunk_src_bytes(L, nvalid);
      ptx::cp_async_16(smem_base + 16u * Cfg::v_smem_chunk(warp, stage, Cfg::v_tile_chunk(bi, L)),
                       vbytes > 0 ? vt + Cfg::chunk_elem_offset(L, p.kv_token_stride) : vc, vbytes);
      PA_TRACE(tracer, ev(tc, Step::v_load, Op::async_copy, Tensor::v_cache)
                           .it(j).lane_it(L / kWarpSize).tok(lb_t < 0 ? -1 : lb * BS + Cfg::v_chunk_first_token(L)).blk(lb_t, phys_t)
                           .dims(Cfg::v_chunk_dim(L), Cfg::kVChunkDims)
                           .at(vbytes > 0 ? Cfg::v_chunk_byte(p.kv, phys, kvh, L) : -1, vbytes));
      PA_TRACE(tracer, ev(tc, Step::v_load, Op::shared_store, Tensor::kv_smem)
                           .it(j).lane_it(L / kWarpSize).tok(lb_t < 0 ? -1 : lb * BS + Cfg::v_chunk_first_token(L)).blk(lb_t, phys_t)
                           .dims(Cfg::v_chunk_dim(L), Cfg::kVChunkDims)
                           .at(Cfg::v_smem_byte(warp, stage, Cfg::v_tile_chunk(bi, L)), 16));
    }
  }
  // LESSON-END(optimized.pipeline_issue)
}

// S = Q K^T of step j: the unit's heads x the step's tokens, one mma per
// 16 head dims, K fragments by ldmatrix from the swizzled stage.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_qk_mma(const OptCta<Cfg>& c, std::uint32_t smem_base,
                                           const std::uint32_t (&qf)[Cfg::kQkKSteps][4], int j,
                                           float (&s)[Cfg::kQkNTiles][4], Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  const int warp = c.warp, lane = c.lane, blk_end = c.blk_end;
  const TraceCtx& tc = c.tc;
  const int stage = j % Cfg::kStages;
  const int tok0 = Cfg::step_block(c.blk_begin, warp, j, 0) * Cfg::kBlockSize;
  // LESSON-BEGIN(optimized.qk_mma)
#pragma unroll
  for (int nt = 0; nt < Cfg::kQkNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
    for (int ks = 0; ks + 1 < Cfg::kQkKSteps; ks += 2) {
      std::uint32_t b[4];
      ptx::ldmatrix_x4(b, smem_base + 16u * Cfg::k_smem_chunk(
                                       warp, stage,
                                       Cfg::k_row_chunk(Cfg::qk_ldsm_token(nt, lane),
                                                        Cfg::qk_ldsm_chunk(ks, lane))));
      PA_TRACE(tracer, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem)
                           .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + Cfg::qk_ldsm_token(nt, lane), blk_end))
                           .dims(Cfg::qk_ldsm_chunk(ks, lane) * Cfg::kX, Cfg::kX)
                           .at(Cfg::k_smem_byte(warp, stage,
                                                Cfg::k_row_chunk(Cfg::qk_ldsm_token(nt, lane),
                                                                 Cfg::qk_ldsm_chunk(ks, lane))),
                               16));
      ptx::mma_m16n8k16<T>(s[nt], qf[ks], b[0], b[1]);
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none)
                           .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + nt * 8, blk_end)).dims(16 * ks, 16));
      ptx::mma_m16n8k16<T>(s[nt], qf[ks + 1], b[2], b[3]);
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none)
                           .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + nt * 8, blk_end)).dims(16 * (ks + 1), 16));
    }
    if constexpr (Cfg::kQkKSteps % 2 == 1) {
      constexpr int ks = Cfg::kQkKSteps - 1;
      std::uint32_t b[2];
      // x2: lanes 0-15 give the rows; the others repeat them (valid addresses).
      ptx::ldmatrix_x2(b, smem_base + 16u * Cfg::k_smem_chunk(
                                       warp, stage,
                                       Cfg::k_row_chunk(Cfg::qk_ldsm_token(nt, lane),
                                                        Cfg::qk_ldsm_chunk(ks, lane % 16))));
      if (lane < 16)  // ldmatrix .x2 uses the addresses of lanes 0-15 only
        PA_TRACE(tracer, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + Cfg::qk_ldsm_token(nt, lane), blk_end))
                             .dims(Cfg::qk_ldsm_chunk(ks, lane) * Cfg::kX, Cfg::kX)
                             .at(Cfg::k_smem_byte(warp, stage,
                                                  Cfg::k_row_chunk(Cfg::qk_ldsm_token(nt, lane),
                                                                   Cfg::qk_ldsm_chunk(ks, lane))),
                                 16));
      ptx::mma_m16n8k16<T>(s[nt], qf[ks], b[0], b[1]);
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none)
                           .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + nt * 8, blk_end)).dims(16 * ks, 16));
    }
  }
  // LESSON-END(optimized.qk_mma)
}

// S = Q K^T of step j with an fp8 cache: per n-tile and 16-dim k-step, each
// lane loads 4 bytes of one token's K chunk (pa/index/optimized.hpp,
// fp8_k_frag_byte) and converts them into the two B registers. The K scale is
// not applied here: it is part of p.scale_log2.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_qk_mma_fp8(const OptCta<Cfg>& c, std::uint32_t smem_base,
                                               const std::uint32_t (&qf)[Cfg::kQkKSteps][4], int j,
                                               float (&s)[Cfg::kQkNTiles][4], Tracer& tracer) {
  // The mma's inputs: Q's type, or fp16 for bf16 queries (opt_q_to_fp16).
  using T = std::conditional_t<Cfg::kQkFp16, __half, typename OptElem<Cfg::kDType>::T>;
  constexpr bool kE5m2 = Cfg::kKvDType == KvDType::fp8_e5m2;
  const int warp = c.warp, lane = c.lane, blk_end = c.blk_end;
  const TraceCtx& tc = c.tc;
  const int stage = j % Cfg::kStages;
  const int tok0 = Cfg::step_block(c.blk_begin, warp, j, 0) * Cfg::kBlockSize;
  // LESSON-BEGIN(optimized.qk_mma_fp8)
#pragma unroll
  for (int nt = 0; nt < Cfg::kQkNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
    const int tok = Cfg::trace_token(tok0 + Cfg::fp8_k_token(nt, lane), blk_end);
#pragma unroll
    for (int ks = 0; ks < Cfg::kQkKSteps; ++ks) {
      const int byte = Cfg::fp8_k_frag_byte(warp, stage, nt, ks, lane);
      const std::uint32_t codes = ptx::lds_u32(smem_base + byte);
      PA_TRACE(tracer, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem)
                           .it(j * Cfg::kQkNTiles + nt).tok(tok).dims(Cfg::q_frag_dim(lane, ks, 0), 4).at(byte, 4));
      const std::uint32_t b0 = ptx::fp8x2_to<kE5m2, T>(static_cast<std::uint16_t>(codes));
      const std::uint32_t b1 = ptx::fp8x2_to<kE5m2, T>(static_cast<std::uint16_t>(codes >> 16));
      PA_TRACE(tracer, ev(tc, Step::dequant, Op::compute, Tensor::none)
                           .it(j * Cfg::kQkNTiles + nt).tok(tok).dims(Cfg::q_frag_dim(lane, ks, 0), 4));
      ptx::mma_m16n8k16<T>(s[nt], qf[ks], b0, b1);
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none)
                           .it(j * Cfg::kQkNTiles + nt).tok(Cfg::trace_token(tok0 + Cfg::s_token(nt, 0), blk_end))
                           .dims(16 * ks, 16));
    }
  }
  // LESSON-END(optimized.qk_mma_fp8)
}

// The online softmax of step j in base 2: each head's running max, S turned
// into P in place, the lane's partial sum, and O rescaled by exp2(m_old - m_new).
// S becomes base-2 logits by its row's factor (rs: the softmax scale, or
// that over the row's Q scale when QK ran in fp16 for bf16 queries).
// With ALiBi each logit first gets its bias: tokens are counted from the
// attended range's start and so is c.ctx, so t - ctx + 1 is the position in
// the whole sequence.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_online_softmax(const OptCta<Cfg>& c, const OptRowScale<Cfg>& rs,
                                                   const OptAlibi<Cfg>& al, int j, float (&s)[Cfg::kQkNTiles][4],
                                                   OptAccum<Cfg>& acc, Tracer& tracer) {
  constexpr int HT = Cfg::kHeadTiles;
  const int lane = c.lane, tok_limit = c.tok_limit;
  const TraceCtx& tc = c.tc;
  const int tok0 = Cfg::step_block(c.blk_begin, c.warp, j, 0) * Cfg::kBlockSize;
  auto& o = acc.o;
  auto& m_run = acc.m_run;
  auto& l_run = acc.l_run;
  // LESSON-BEGIN(optimized.online_softmax)
  float alpha[HT];
#pragma unroll
  for (int h = 0; h < HT; ++h) {
    float mx = kNegInf;
#pragma unroll
    for (int nt = 0; nt < Cfg::kQkNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int tok = tok0 + Cfg::s_token(nt, Cfg::qk_col(lane) + e);
        const float x = s[nt][2 * h + e] * rs.scale_log2[h];
        const float biased = al.on ? x + alibi_bias(al.slope_log2[h], tok, c.ctx) : x;
        const float v = tok < tok_limit ? biased : kNegInf;
        s[nt][2 * h + e] = v;
        mx = fmaxf(mx, v);
      }
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    PA_TRACE(tracer, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(j).src(lane ^ 1));
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
    PA_TRACE(tracer, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(j).src(lane ^ 2));
    const float m_new = fmaxf(m_run[h], mx);
    const float m_use = m_new == kNegInf ? 0.f : m_new;  // a fully masked row stays at 0
    alpha[h] = rescale<LogBase::two>(m_run[h], m_use);  // the running state moved to the new max
    m_run[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < Cfg::kQkNTiles; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float pr = exp2f(s[nt][2 * h + e] - m_use);
        s[nt][2 * h + e] = pr;
        sum += pr;
      }
    l_run[h] = l_run[h] * alpha[h] + sum;  // per-lane partial; rows summed at the end
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::compute, Tensor::none).it(j));
  }
  // O^T columns are heads 2(l%4)+{0,1}: their factors live in the row-owner lanes.
#pragma unroll
  for (int h = 0; h < HT; ++h) {
    const float a0 = __shfl_sync(kFull, alpha[h], Cfg::row_owner_lane(Cfg::o_head(lane)));
    PA_TRACE(tracer, ev(tc, Step::rescale, Op::shuffle, Tensor::none).it(j).src(Cfg::row_owner_lane(Cfg::o_head(lane))));
    const float a1 = __shfl_sync(kFull, alpha[h], Cfg::row_owner_lane(Cfg::o_head(lane) + 1));
    PA_TRACE(tracer, ev(tc, Step::rescale, Op::shuffle, Tensor::none).it(j).src(Cfg::row_owner_lane(Cfg::o_head(lane) + 1)));
#pragma unroll
    for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
      o[dt][h][0] *= a0;
      o[dt][h][1] *= a1;
      o[dt][h][2] *= a0;
      o[dt][h][3] *= a1;
    }
    PA_TRACE(tracer, ev(tc, Step::rescale, Op::compute, Tensor::none).it(j));
  }
  // LESSON-END(optimized.online_softmax)
}

// O^T += V^T P^T of step j: P packed to 16 bits as the B fragments, V^T
// fragments by ldmatrix from the stage (vLLM's V is dim-major there and is
// read as it lies; a token-row cache's V is token-major and is read with
// ldmatrix.trans, which transposes each 8x8 matrix on the way to registers).
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_pv_mma(const OptCta<Cfg>& c, std::uint32_t smem_base, int j,
                                           const float (&s)[Cfg::kQkNTiles][4], OptAccum<Cfg>& acc, Tracer& tracer) {
  using T = typename OptElem<Cfg::kDType>::T;
  constexpr int HT = Cfg::kHeadTiles;
  const int warp = c.warp, lane = c.lane, blk_end = c.blk_end;
  const TraceCtx& tc = c.tc;
  const int stage = j % Cfg::kStages;
  const int tok0 = Cfg::step_block(c.blk_begin, warp, j, 0) * Cfg::kBlockSize;
  auto& o = acc.o;
  // LESSON-BEGIN(optimized.pv_mma)
#pragma unroll
  for (int kk = 0; kk < Cfg::kPvKSteps; ++kk) {
    std::uint32_t pb[HT][2];
#pragma unroll
    for (int h = 0; h < HT; ++h) {
      pb[h][0] = ptx::pack2<T>(s[2 * kk][2 * h], s[2 * kk][2 * h + 1]);
      pb[h][1] = ptx::pack2<T>(s[2 * kk + 1][2 * h], s[2 * kk + 1][2 * h + 1]);
    }
#pragma unroll
    for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
      std::uint32_t a[4];
      if constexpr (Cfg::kTokenRows) {
        // V rows are tokens here: the transposing load gives V^T's fragments.
        const int chunk = Cfg::k_row_chunk(Cfg::pv_trans_token(kk, lane), Cfg::pv_trans_chunk(dt, lane));
        ptx::ldmatrix_x4_trans(a, smem_base + 16u * Cfg::v_smem_chunk(warp, stage, chunk));
        PA_TRACE(tracer, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j).tok(Cfg::trace_token(tok0 + Cfg::pv_trans_token(kk, lane), blk_end))
                             .dims(Cfg::pv_trans_chunk(dt, lane) * Cfg::kX, Cfg::kX)
                             .at(Cfg::v_smem_byte(warp, stage, chunk), 16));
      } else {
        ptx::ldmatrix_x4(a, smem_base + 16u * Cfg::v_smem_chunk(
                                         warp, stage,
                                         Cfg::v_row_chunk(Cfg::pv_ldsm_dim(dt, lane),
                                                          Cfg::pv_ldsm_group(kk, lane))));
        PA_TRACE(tracer, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j).tok(Cfg::trace_token(tok0 + 8 * Cfg::pv_ldsm_group(kk, lane), blk_end))
                             .dims(Cfg::pv_ldsm_dim(dt, lane), 1)
                             .at(Cfg::v_smem_byte(warp, stage,
                                                  Cfg::v_row_chunk(Cfg::pv_ldsm_dim(dt, lane),
                                                                   Cfg::pv_ldsm_group(kk, lane))),
                                 16));
      }
#pragma unroll
      for (int h = 0; h < HT; ++h) {
        ptx::mma_m16n8k16<T>(o[dt][h], a, pb[h][0], pb[h][1]);
        PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none)
                             .it(j).tok(Cfg::trace_token(tok0 + 16 * kk, blk_end)).dims(16 * dt, 16));
      }
    }
  }
  // LESSON-END(optimized.pv_mma)
}


// O^T += V^T P^T of step j with an fp8 cache: per 16-token k-step and dim
// tile, each lane loads 4 bytes (tokens 4(lane%4)..+3) of its two V rows and
// converts them into the A registers; P's B registers pair the even- and
// odd-token n-tiles (s_token), so they hold the same tokens. This product
// runs in fp16 for bf16 queries too: every fp8 value is an fp16 value, P in
// [2^-14, 1] keeps more bits in fp16 than in bf16, and fp8 -> fp16 is one cvt
// per two elements where bf16 would take four instructions. The cost: a
// weight below 2^-14 of its row's running maximum keeps fewer bits in fp16
// (fp16's subnormals) and one below 2^-25 becomes 0, so a context where very
// many tokens each weigh that little loses part of their (small) total.
template <class Cfg, class Tracer>
__device__ __forceinline__ void opt_pv_mma_fp8(const OptCta<Cfg>& c, std::uint32_t smem_base, int j,
                                               const float (&s)[Cfg::kQkNTiles][4], OptAccum<Cfg>& acc,
                                               Tracer& tracer) {
  using T = __half;  // for bf16 queries too (above)
  constexpr bool kE5m2 = Cfg::kKvDType == KvDType::fp8_e5m2;
  constexpr int HT = Cfg::kHeadTiles;
  const int warp = c.warp, lane = c.lane, blk_end = c.blk_end;
  const TraceCtx& tc = c.tc;
  const int stage = j % Cfg::kStages;
  const int tok0 = Cfg::step_block(c.blk_begin, warp, j, 0) * Cfg::kBlockSize;
  auto& o = acc.o;
  // LESSON-BEGIN(optimized.pv_mma_fp8)
#pragma unroll
  for (int kk = 0; kk < Cfg::kPvKSteps; ++kk) {
    // Tokens 4c, 4c+1 (k slots 2c, 2c+1) and 4c+2, 4c+3 (k slots 2c+8, 2c+9).
    std::uint32_t pb[HT][2];
#pragma unroll
    for (int h = 0; h < HT; ++h) {
      pb[h][0] = ptx::pack2<T>(s[2 * kk][2 * h], s[2 * kk + 1][2 * h]);
      pb[h][1] = ptx::pack2<T>(s[2 * kk][2 * h + 1], s[2 * kk + 1][2 * h + 1]);
    }
    const int T0 = Cfg::fp8_v_token(kk, lane);
    const int tok = Cfg::trace_token(tok0 + T0, blk_end);
#pragma unroll
    for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
      std::uint32_t a[4];
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // rows d and d + 8: registers a[half], a[half + 2]
        const int d = Cfg::fp8_v_dim(dt, lane, half);
        const int byte = Cfg::fp8_v_frag_byte(warp, stage, d, T0);
        const std::uint32_t codes = ptx::lds_u32(smem_base + byte);
        PA_TRACE(tracer, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j).tok(tok).dims(d, 1).at(byte, 4));
        a[half] = ptx::fp8x2_to<kE5m2, T>(static_cast<std::uint16_t>(codes));
        a[half + 2] = ptx::fp8x2_to<kE5m2, T>(static_cast<std::uint16_t>(codes >> 16));
        PA_TRACE(tracer, ev(tc, Step::dequant, Op::compute, Tensor::none).it(j).tok(tok).dims(d, 1));
      }
#pragma unroll
      for (int h = 0; h < HT; ++h) {
        ptx::mma_m16n8k16<T>(o[dt][h], a, pb[h][0], pb[h][1]);
        PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none)
                             .it(j).tok(Cfg::trace_token(tok0 + 16 * kk, blk_end)).dims(16 * dt, 16));
      }
    }
  }
  // LESSON-END(optimized.pv_mma_fp8)
}

// fp8 cache: O = sum_t p_t (code_t * v_scale) = v_scale * sum_t p_t code_t,
// so the accumulated output is scaled once, before the epilogue merges it
// (the running max and sum are of the logits and do not change).
template <class Cfg>
__device__ __forceinline__ void opt_v_scale(const OptParams& p, OptAccum<Cfg>& acc) {
#pragma unroll
  for (int dt = 0; dt < Cfg::kDimTiles; ++dt)
#pragma unroll
    for (int h = 0; h < Cfg::kHeadTiles; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.o[dt][h][e] *= p.v_scale;
}

// ---------------------------------------------------------------- the kernel
// Trace hooks (PA_TRACE, nothing at all with NullTracer): the contract is
// kernels/stages/EVENTS.md, section "Stage 8"; the host model that produces
// the same events is trace/src/host_model_optimized.cpp. Timing hooks
// (PA_TIME_*, nothing at all without a timing tracer) end a span after each
// step function: the timeline's phases (pa/core/timeline.hpp), in the order
// the warp runs them; issue spans are numbered by the step they issue.
template <class Cfg, class Tracer = NullTracer>
__global__ void __launch_bounds__(Cfg::kNumThreads, Cfg::kMinCtasPerSm) opt_decode_kernel(const OptParams p, Tracer tracer) {
  constexpr int HT = Cfg::kHeadTiles;
  constexpr int kStages = Cfg::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int s_is_last;
  const std::uint32_t smem_base = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_raw));

  PA_TIME_START(tracer);
  OptCta<Cfg> c;
  int tbl = 0;  // lane l: physical block of step (l / BPS) of the current table window
  const bool has_work = opt_prologue<Cfg>(p, c, tbl, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_prologue, -1);
  if (!has_work) return;
  std::uint32_t qf[Cfg::kQkKSteps][4];
  opt_q_frags<Cfg>(p, c, qf, tracer);
  OptRowScale<Cfg> rs;
  if constexpr (Cfg::kQkFp16) {
    rs = opt_q_to_fp16<Cfg>(p, c, qf, tracer);
  } else {
#pragma unroll
    for (int h = 0; h < HT; ++h) rs.scale_log2[h] = p.scale_log2;
  }
  const OptAlibi<Cfg> al = opt_alibi_slopes<Cfg>(p, c, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_q_frag, -1);
  const int my_steps = Cfg::warp_steps(c.nsteps, c.warp);

  OptAccum<Cfg> acc;
#pragma unroll
  for (int dt = 0; dt < Cfg::kDimTiles; ++dt)
#pragma unroll
    for (int h = 0; h < HT; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc.o[dt][h][e] = 0.f;
#pragma unroll
  for (int h = 0; h < HT; ++h) {
    acc.m_run[h] = kNegInf;
    acc.l_run[h] = 0.f;
  }

  // kStages - 1 steps in flight before the first is computed; then each
  // iteration issues one step and computes the oldest.
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < my_steps) opt_pipeline_issue<Cfg>(p, c, smem_base, j, tbl, tracer);
    ptx::cp_async_commit();  // empty groups keep the wait_group count uniform
    PA_TIME_PHASE(tracer, trace::Phase::opt_pipeline_issue, j);
  }
  for (int j = 0; j < my_steps; ++j) {
    if (j + kStages - 1 < my_steps) opt_pipeline_issue<Cfg>(p, c, smem_base, j + kStages - 1, tbl, tracer);
    ptx::cp_async_commit();
    PA_TIME_PHASE(tracer, trace::Phase::opt_pipeline_issue, j + kStages - 1);
    ptx::cp_async_wait<kStages - 1>();  // step j has landed
    __syncwarp();
    PA_TIME_PHASE(tracer, trace::Phase::opt_pipeline_wait, j);
    float s[Cfg::kQkNTiles][4];
    if constexpr (Cfg::kFp8) opt_qk_mma_fp8<Cfg>(c, smem_base, qf, j, s, tracer);
    else opt_qk_mma<Cfg>(c, smem_base, qf, j, s, tracer);
    PA_TIME_PHASE(tracer, trace::Phase::opt_qk_mma, j);
    opt_online_softmax<Cfg>(c, rs, al, j, s, acc, tracer);
    PA_TIME_PHASE(tracer, trace::Phase::opt_online_softmax, j);
    if constexpr (Cfg::kFp8) opt_pv_mma_fp8<Cfg>(c, smem_base, j, s, acc, tracer);
    else opt_pv_mma<Cfg>(c, smem_base, j, s, acc, tracer);
    __syncwarp();  // every lane is done with this stage before it is refilled
    PA_TIME_PHASE(tracer, trace::Phase::opt_pv_mma, j);
  }

  // ------------------------------------------------------------ epilogue
  if constexpr (Cfg::kFp8) opt_v_scale<Cfg>(p, acc);
  const bool single = opt_warp_merge<Cfg>(p, c, acc, smem_raw, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::opt_warp_merge, -1);
  if (single) return;  // one split: the output is written
  opt_split_merge<Cfg>(p, c, s_is_last, tracer);
}

template <class Cfg>
void opt_launch(const OptParams& p, dim3 grid, cudaStream_t stream) {
  opt_decode_kernel<Cfg><<<grid, Cfg::kNumThreads, Cfg::kSmemBytes, stream>>>(p, NullTracer{});
}

// The same kernel with a tracer (the trace module's recording instances,
// trace/record/record_optimized*.cu). Sets the dynamic shared-memory limit
// of this instance first; returns its resident CTAs per SM (0 if unknown).
template <class Cfg, class Tracer>
int opt_prepare_traced() {
  if (cudaFuncSetAttribute(opt_decode_kernel<Cfg, Tracer>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Cfg::kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, opt_decode_kernel<Cfg, Tracer>, Cfg::kNumThreads,
                                                    Cfg::kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}
template <class Cfg, class Tracer>
void opt_launch_traced(const OptParams& p, dim3 grid, const Tracer& tracer, cudaStream_t stream) {
  opt_decode_kernel<Cfg, Tracer><<<grid, Cfg::kNumThreads, Cfg::kSmemBytes, stream>>>(p, tracer);
}

// The instance's entry on the current device. The shared-memory opt-in and
// the occupancy query belong to a device (each has its own context), so they
// run once per device, the first time the instance is asked for there: a
// process that drives several GPUs (context parallelism) launches on each.
template <class Cfg>
OptEntry opt_prepare_entry() {
  OptEntry e{&opt_launch<Cfg>, Cfg::kSmemBytes, Cfg::kStages, Cfg::kBlocksPerStep, 0};
  // More than 48 KB of dynamic shared memory must be asked for.
  if (cudaFuncSetAttribute(opt_decode_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           Cfg::kSmemBytes) != cudaSuccess) {
    cudaGetLastError();
    return e;
  }
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, opt_decode_kernel<Cfg>, Cfg::kNumThreads,
                                                    Cfg::kSmemBytes) == cudaSuccess)
    e.ctas_per_sm = n;
  else
    cudaGetLastError();
  return e;
}
template <class Cfg>
OptEntry opt_entry_of() {
  constexpr int kCachedDevices = 64;
  static std::once_flag once[kCachedDevices];
  static OptEntry entries[kCachedDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return opt_prepare_entry<Cfg>();
  }
  if (dev < 0 || dev >= kCachedDevices) return opt_prepare_entry<Cfg>();
  std::call_once(once[dev], [&] { entries[dev] = opt_prepare_entry<Cfg>(); });
  return entries[dev];
}
template <DType DT, int HS, int BS, int HT, KvDType KV, bool ROWS>
OptEntry opt_entry() {
  return opt_entry_of<OptConfig<DT, HS, BS, HT, 0, 0, KV, ROWS>>();
}
template <DType DT, int HS, int BS, int HT>
OptEntry opt_entry_lean() {
  return opt_entry_of<OptConfig<DT, HS, BS, HT, 0, kOptLeanPipeKB>>();
}

#define PA_OPT_INSTANTIATE_KV(DT, HS, BS, KV)                              \
  template OptEntry opt_entry<DType::DT, HS, BS, 1, KvDType::KV, false>(); \
  template OptEntry opt_entry<DType::DT, HS, BS, 2, KvDType::KV, false>();
#define PA_OPT_INSTANTIATE(DT, HS, BS) PA_OPT_INSTANTIATE_KV(DT, HS, BS, same)

// Token-row caches (nhd, hnd: one instance serves both), 2-byte elements.
#define PA_OPT_INSTANTIATE_ROWS(DT, HS, BS)                                  \
  template OptEntry opt_entry<DType::DT, HS, BS, 1, KvDType::same, true>(); \
  template OptEntry opt_entry<DType::DT, HS, BS, 2, KvDType::same, true>();
#define PA_OPT_INSTANTIATE_ROWS_HS(HS)                                             \
  PA_OPT_INSTANTIATE_ROWS(f16, HS, 8) PA_OPT_INSTANTIATE_ROWS(f16, HS, 16)         \
  PA_OPT_INSTANTIATE_ROWS(f16, HS, 32) PA_OPT_INSTANTIATE_ROWS(bf16, HS, 8)        \
  PA_OPT_INSTANTIATE_ROWS(bf16, HS, 16) PA_OPT_INSTANTIATE_ROWS(bf16, HS, 32)
#define PA_OPT_INSTANTIATE_ROWS_HS_QUICK(HS) \
  PA_OPT_INSTANTIATE_ROWS(f16, HS, 16) PA_OPT_INSTANTIATE_ROWS(bf16, HS, 16)

#define PA_OPT_INSTANTIATE_HS(HS)                                                  \
  PA_OPT_INSTANTIATE(f16, HS, 8) PA_OPT_INSTANTIATE(f16, HS, 16)                   \
  PA_OPT_INSTANTIATE(f16, HS, 32) PA_OPT_INSTANTIATE(bf16, HS, 8)                  \
  PA_OPT_INSTANTIATE(bf16, HS, 16) PA_OPT_INSTANTIATE(bf16, HS, 32)

#define PA_OPT_INSTANTIATE_HS_QUICK(HS) \
  PA_OPT_INSTANTIATE(f16, HS, 16) PA_OPT_INSTANTIATE(bf16, HS, 16)

// fp8 caches (block sizes 16 and 32: a V row must be whole 16-byte chunks).
#define PA_OPT_INSTANTIATE_FP8_BS(HS, BS)                                              \
  PA_OPT_INSTANTIATE_KV(f16, HS, BS, fp8_e4m3) PA_OPT_INSTANTIATE_KV(f16, HS, BS, fp8_e5m2) \
  PA_OPT_INSTANTIATE_KV(bf16, HS, BS, fp8_e4m3) PA_OPT_INSTANTIATE_KV(bf16, HS, BS, fp8_e5m2)
#define PA_OPT_INSTANTIATE_FP8(HS) PA_OPT_INSTANTIATE_FP8_BS(HS, 16) PA_OPT_INSTANTIATE_FP8_BS(HS, 32)
#define PA_OPT_INSTANTIATE_FP8_QUICK(HS) PA_OPT_INSTANTIATE_FP8_BS(HS, 16)

// Lean instances (head tiles 1 only, the one that fits beside a cascade
// prefix block): built for head 128, the cascade's wgmma head.
#define PA_OPT_INSTANTIATE_LEAN(BS)                          \
  template OptEntry opt_entry_lean<DType::f16, 128, BS, 1>(); \
  template OptEntry opt_entry_lean<DType::bf16, 128, BS, 1>();
}  // namespace pa::opt