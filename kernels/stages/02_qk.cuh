// Stage 2, qk: the scaled logit q . k / sqrt(head_size) of every token.
//
// What it adds to stage 1: the walk over the sequence's KV blocks through its
// block table, K vec loads into registers, the per-thread partial dot product
// with the Q vecs in shared memory, the shuffle reduction inside each thread
// group, and the logits in shared memory (with ALiBi's bias added when the
// launch has slopes: load_alibi).
//
// Thread mapping: warp w handles logical blocks warp_block(block_begin, w, n),
// n = 0, 1, ... (round robin over the 4 warps); inside a block the warp's
// kThreadGroupsPerWarp thread groups take one token each
// (qk_token_in_block(lane)), so one warp covers one KV block per iteration
// (block size 8: 4 threads per token, 16: 2, 32: 1). Thread g_off of a group
// loads K vecs i = 0..kNumVecsPerThread-1 at head dims qk_vec_dim(g_off, i);
// with the K layout [.., head_size/x, block_size, x] the threads of one group
// read adjacent kVecBytes pieces of one 16-byte x chunk, and the group's
// consecutive tokens are x elements apart, so a warp's request is contiguous.
// A thread's vec i + 1 is kKVecStep elements after vec i (mapping.hpp), so a
// block's loads are one address plus constant offsets, all in flight at once.
//
// Token rows (the nhd and hnd layouts, stage 5's token-row instances): a
// token's K is one contiguous row, so each thread loads a whole 16-byte chunk
// (kVecSize = x, config.hpp) and a group's threads read adjacent chunks of
// their token's row: kThreadGroupSize x 16 consecutive bytes per load (32 at
// block 16: a whole sector), half as many loads as vLLM's layout needs at
// block 16 (kVecSize, config.hpp: a quarter at block 8, as many at block 32). A
// warp's request then spans kThreadGroupsPerWarp rows, token_stride apart.
//
// Page tables: the sequence's row of its table is found once (load_seq_pages):
// vLLM's padded block_tables row seq, or a CSR table's indices[indptr[seq]
// ..), whose context length is counted from its pages and last page's length
// instead of read; each block's page is then row[logical block] either way.
//
// fp8 cache (config.hpp): x = 16, so a K vec holds twice the elements in the
// same bytes, and each thread has half as many K vecs to load. Each loaded
// vec is dequantized (dequant, common.cuh: code to float, times k_scale) just
// before its dot product with the Q vec, which stays in the query's dtype.
//
// Range: the step takes a PartitionRange (config.hpp) so V2 (stage 6) calls
// it on one partition; logits[] is indexed by token - range.token_begin.
// The later kernels start with stages 1-2 as one call: v1_logits (the whole
// context) or q_and_logits (a given range, V2).
//
// Observable output (stage 2 kernel): logits [seq][head][max_context_len]
// (StageOutGeometry::logit_offset), tokens >= context not written.
#pragma once
#include "01_q_to_smem.cuh"

namespace pa::kernels {

// LESSON-BEGIN(qk.block_table_load)
// The sequence's pages: where its row of the page table starts and its
// context length (every thread loads them). Padded (vLLM): row seq of
// [seqs, max_blocks_per_seq], known without a load, and context_lens[seq].
// CSR: the row starts at indptr[seq]; the length is (pages - 1) * block size
// plus the last page's length (a sequence with no pages has none).
// Events: padded, block_table_load global_load context_lens, iter -1,
// byte_offset = context_len_offset(seq) * 4, bytes 4; CSR, block_table_load
// global_load kv_indptr at seq * 4 and (seq + 1) * 4, then kv_last_page_len
// at seq * 4 only when the sequence has pages, 4 bytes each.
struct SeqPages {
  int context_len;
  std::int64_t row;  // block_tables index of the sequence's logical block 0
};
template <class Cfg, class Tracer>
__device__ __forceinline__ SeqPages load_seq_pages(const StageArgs& a, const ThreadCtx<Cfg>& c, Tracer& tracer) {
  if (a.kv_indptr == nullptr) {
    const std::int64_t off = context_len_offset(c.seq);
    const int len = a.context_lens[off];
    PA_TRACE(tracer, ev(c.tc, Step::block_table_load, Op::global_load, Tensor::context_lens).at(off * 4, 4));
    return {len, a.btg.offset(c.seq, 0)};
  }
  const int begin = a.kv_indptr[c.seq];
  const int pages = a.kv_indptr[c.seq + 1] - begin;
  PA_TRACE(tracer, ev(c.tc, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at(c.seq * 4, 4));
  PA_TRACE(tracer, ev(c.tc, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at((c.seq + 1) * 4, 4));
  int last = 0;
  if (pages > 0) {
    last = a.kv_last_page_len[c.seq];
    PA_TRACE(tracer, ev(c.tc, Step::block_table_load, Op::global_load, Tensor::kv_last_page_len).at(c.seq * 4, 4));
  }
  return {CsrPageTable::seq_len_of(pages, last, Cfg::kBlockSize), begin};
}

// One logical block's physical block (every lane of the warp loads it).
// Event: block_table_load global_load block_table, iter = n (the warp's block
// iteration), logical/physical block, byte_offset = (row + lblock) * 4, bytes 4.
template <class Cfg, class Tracer>
__device__ __forceinline__ int load_physical_block(const int* __restrict__ block_tables, const SeqPages& pages,
                                                   int lblock, int n, const ThreadCtx<Cfg>& c, Tracer& tracer) {
  const std::int64_t off = pages.row + lblock;
  const int phys = block_tables[off];
  PA_TRACE(tracer, ev(c.tc, Step::block_table_load, Op::global_load, Tensor::block_table)
                       .it(n).blk(lblock, phys).at(off * 4, 4));
  return phys;
}
// LESSON-END(qk.block_table_load)

// LESSON-BEGIN(qk.alibi)
// ALiBi (pa/index/alibi.hpp): the head's slope, and the bias it adds to the
// logit of each token, measured from the end of the whole context (a V2
// partition's tokens get the bias of their place in the sequence).
struct AlibiBias {
  bool on = false;  // false: no ALiBi, the logit is scale * q . k unchanged
  float slope = 0.f;
  int context_len = 0;
  __device__ __forceinline__ float biased(float scaled_qk, int token) const {
    return on ? scaled_qk + alibi_bias(slope, token, context_len) : scaled_qk;
  }
};

// The head's slope, when the launch has slopes (every thread loads it; a
// cached 4-byte load per thread block).
// Event (only with ALiBi): alibi_bias global_load alibi_slopes, every thread,
// iter -1, byte_offset head * 4, bytes 4, value = the slope.
template <class Cfg, class Tracer>
__device__ __forceinline__ AlibiBias load_alibi(const float* __restrict__ slopes, int context_len,
                                                const ThreadCtx<Cfg>& c, Tracer& tracer) {
  AlibiBias b;
  if (slopes == nullptr) return b;
  b.on = true;
  b.slope = __ldg(slopes + c.head);
  b.context_len = context_len;
  PA_TRACE(tracer, ev(c.tc, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes).at(c.head * 4, 4).val(b.slope));
  return b;
}
// LESSON-END(qk.alibi)

// Step qk: logits[token - r.token_begin] = scale * q . k for the tokens of r,
// then a barrier (the softmax reads every warp's logits).
// Events, per warp iteration n (iter = n), every thread, in this order:
//   block_table_load (see load_physical_block)
//   k_load      global_load k_cache, one per i = 0..kNumVecsPerThread-1: token = token_of(lblock,
//               qk_token_in_block(lane)) (also for tokens >= r.token_end of the last block: the load
//               happens, the logit is dropped), dims [qk_vec_dim(g_off, i), +kVecSize),
//               byte_offset = Map::k_offset(layout, phys, kv_head, dim, t) * cache elem bytes (kKvBytes),
//               bytes kVecBytes
//   then per i = 0..kNumVecsPerThread-1:
//   dequant     compute (fp8 cache only), token, dims [qk_vec_dim(g_off, i), +kVecSize)
//   q_smem_load shared_load q_smem: same dims, byte_offset q_smem_byte(g_off, i), bytes kQVecBytes
//   qk_dot      compute, token, dims [qk_vec_dim(g_off, 0), kNumElemsPerThread) (strided), value NaN
//   qk_group_reduce shuffle, log2(kThreadGroupSize) events (none for 1-thread groups), token
//   logit_store shared_store logits, only g_off == 0 and token < r.token_end: token,
//               byte_offset logits_smem_byte(token - r.token_begin), bytes 4, value = the logit
//               (scale * q . k, plus the ALiBi bias when alibi.on)
// then barrier (every thread).
template <class Cfg, class Tracer>
__device__ __forceinline__ void qk_logits(const KvElem<Cfg>* __restrict__ k_cache, const KvLayoutGeometry& kv,
                                          const int* __restrict__ block_tables, const SeqPages& pages,
                                          const PartitionRange& r, float scale, float k_scale,
                                          const AlibiBias& alibi, const ThreadCtx<Cfg>& c, SharedV1<Cfg>& sm,
                                          Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  using KVec = Vec<KvElem<Cfg>, Cfg::kVecSize>;
  using QVec = Vec<Elem<Cfg>, Cfg::kVecSize>;
  const int t_in_block = Map::qk_token_in_block(c.lane);
  for (int n = 0, lblock = Map::warp_block(r.block_begin, c.warp, 0); lblock < r.block_end;
       lblock = Map::warp_block(r.block_begin, c.warp, ++n)) {
    const int phys = load_physical_block<Cfg>(block_tables, pages, lblock, n, c, tracer);
    const int token = Map::token_of(lblock, t_in_block);

    // LESSON-BEGIN(qk.k_load)
    // One address per block: vec i is i * kKVecStep elements past vec 0
    // (mapping.hpp), so the loads take constant offsets and go out together.
    const std::int64_t k0 = Map::k_offset(kv, phys, c.kv_head, Map::qk_vec_dim(c.g_off, 0), t_in_block);
    KVec k_vecs[Cfg::kNumVecsPerThread];
#pragma unroll
    for (int i = 0; i < Cfg::kNumVecsPerThread; ++i) {
      const int dim = Map::qk_vec_dim(c.g_off, i);
      const std::int64_t off = k0 + i * Map::kKVecStep;  // = Map::k_offset(kv, phys, kv_head, dim, t_in_block)
      k_vecs[i] = load_vec<KvElem<Cfg>, Cfg::kVecSize>(k_cache + off);
      PA_TRACE(tracer, ev(c.tc, Step::k_load, Op::global_load, Tensor::k_cache)
                           .it(n).tok(token).blk(lblock, phys).dims(dim, Cfg::kVecSize)
                           .at(off * Cfg::kKvBytes, Cfg::kVecBytes));
    }
    // Every K load of the block is issued before the first is used: without
    // this warp barrier ptxas may sink some loads to their use (seen: 9 of 16
    // up front), paying two memory round trips per block instead of one.
    __syncwarp();
    // LESSON-END(qk.k_load)

    // LESSON-BEGIN(qk.qk_dot)
    float qk = 0.f;
#pragma unroll
    for (int i = 0; i < Cfg::kNumVecsPerThread; ++i) {
      const auto k = dequant(k_vecs[i], k_scale);  // as loaded, or fp8 codes -> float * k_scale
      if constexpr (is_fp8(Cfg::kKvDType))
        PA_TRACE(tracer, ev(c.tc, Step::dequant, Op::compute, Tensor::none)
                             .it(n).tok(token).dims(Map::qk_vec_dim(c.g_off, i), Cfg::kVecSize));
      const QVec q_vec = sm.q_vecs[Map::q_smem_slot(c.g_off, i)];
      PA_TRACE(tracer, ev(c.tc, Step::q_smem_load, Op::shared_load, Tensor::q_smem)
                           .it(n).tok(token).dims(Map::qk_vec_dim(c.g_off, i), Cfg::kVecSize)
                           .at(Map::q_smem_byte(c.g_off, i), Cfg::kQVecBytes));
      qk += dot(q_vec, k);
    }
    PA_TRACE(tracer, ev(c.tc, Step::qk_dot, Op::compute, Tensor::none)
                         .it(n).tok(token).blk(lblock, phys)
                         .dims(Map::qk_vec_dim(c.g_off, 0), Cfg::kNumElemsPerThread));
    // LESSON-END(qk.qk_dot)

    // LESSON-BEGIN(qk.qk_group_reduce)
    // The group's threads are adjacent lanes: xor masks < kThreadGroupSize stay inside it.
#pragma unroll
    for (int mask = Cfg::kThreadGroupSize / 2; mask >= 1; mask /= 2) {
      qk += shfl_xor(qk, mask);
      PA_TRACE(tracer, ev(c.tc, Step::qk_group_reduce, Op::shuffle, Tensor::none).it(n).tok(token).src(c.lane ^ mask));
    }
    // LESSON-END(qk.qk_group_reduce)

    // LESSON-BEGIN(qk.logit_store)
    if (c.g_off == 0 && token < r.token_end) {
      const float logit = alibi.biased(scale * qk, token);
      const int idx = token - r.token_begin;
      sm.logits[idx] = logit;
      PA_TRACE(tracer, ev(c.tc, Step::logit_store, Op::shared_store, Tensor::logits)
                           .it(n).tok(token).blk(lblock, phys).at(logits_smem_byte(idx), 4).val(logit));
    }
    // LESSON-END(qk.logit_store)
  }
  PA_SYNC(tracer, c);
}

// Copy logits[0, r tokens) (shared) to a float row in global memory, block-
// strided: thread tid handles index i = strided_index(tid, k), iter = k.
// Events (step stage_output): shared_load logits (token, byte_offset
// logits_smem_byte(i), 4 bytes, value) then global_store stage_out (token,
// byte_offset = logit_offset(seq, head, token) * 4, 4 bytes, value).
template <class Cfg, class Tracer>
__device__ __forceinline__ void store_logits_row(const float* logits, const PartitionRange& r, float* out,
                                                 const StageOutGeometry& sg, const ThreadCtx<Cfg>& c,
                                                 Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  const int n = r.token_end - r.token_begin;
  for (int k = 0, i = Map::strided_index(c.tid, 0); i < n; i = Map::strided_index(c.tid, ++k)) {
    const int token = r.token_begin + i;
    const float v = logits[i];
    PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::shared_load, Tensor::logits)
                         .it(k).tok(token).at(logits_smem_byte(i), 4).val(v));
    const std::int64_t off = sg.logit_offset(c.seq, c.head, token);
    out[off] = v;
    PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::global_store, Tensor::stage_out)
                         .it(k).tok(token).at(off * 4, 4).val(v));
  }
}

// Steps q_to_smem then qk on range r of the sequence's pages: what every
// v1-style kernel does first once it knows its range (stages 2-5: the whole
// context; stage 6: one partition). Leaves the logits in sm.logits[0, r tokens).
// Events: q_to_smem's (01_q_to_smem.cuh), load_alibi's, then qk_logits'.
template <class Cfg, class Tracer>
__device__ __forceinline__ void q_and_logits(const StageArgs& a, const PartitionRange& r, const SeqPages& pages,
                                             const ThreadCtx<Cfg>& c, SharedV1<Cfg>& sm, Tracer& tracer) {
  q_to_smem<Cfg>(static_cast<const Elem<Cfg>*>(a.q), a.qg, c, sm, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::q_to_smem, -1);
  const AlibiBias alibi = load_alibi<Cfg>(a.alibi_slopes, pages.context_len, c, tracer);
  qk_logits<Cfg>(static_cast<const KvElem<Cfg>*>(a.k_cache), KvLayoutGeometry{a.kv_layout, a.cg}, a.block_tables,
                 pages, r, a.scale, a.k_scale, alibi, c, sm, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::qk, -1);
}

// The sequence's pages and the range a v1 kernel walks (its whole context).
struct V1Range {
  SeqPages pages;
  PartitionRange r;
};

// The steps every v1 kernel (stages 2-5) starts with: the sequence's pages,
// the whole context as the one range (partition 0), then q_and_logits. A
// timing tracer's first span starts here (the context length counts into the
// q_to_smem phase).
// Returns the pages and the range, which the later steps walk again.
// Events: load_seq_pages', then q_and_logits'.
template <class Cfg, class Tracer>
__device__ __forceinline__ V1Range v1_logits(const StageArgs& a, const ThreadCtx<Cfg>& c, SharedV1<Cfg>& sm,
                                             Tracer& tracer) {
  PA_TIME_START(tracer);
  const SeqPages pages = load_seq_pages<Cfg>(a, c, tracer);
  const PartitionRange r = partition_range(pages.context_len, Cfg::kBlockSize, 0, 0);
  q_and_logits<Cfg>(a, r, pages, c, sm, tracer);
  return {pages, r};
}

// Stage 2 kernel: q_to_smem + qk over the whole context (v1: one partition).
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage2_qk_kernel(StageArgs a, Tracer tracer) {
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::qk, a.num_heads, a.num_kv_heads);
  auto sm = shared_v1<Cfg>();
  const V1Range v = v1_logits<Cfg>(a, c, sm, tracer);
  store_logits_row<Cfg>(sm.logits, v.r, a.stage_out, a.sg, c, tracer);
}

}  // namespace pa::kernels
