// Stage 7, cascade_merge: attention states and cascade decoding of sequences
// that share a prefix.
//
// What it adds to stage 6: the attention STATE (out, lse) of a query over a
// token set, lse = log(sum_t exp(logit_t)) in NATURAL log, out normalized over
// the set; the empty set is (0, -inf). Two states over disjoint sets merge into
// the state over their union:
//   m = max(lse_a, lse_b), w_a = exp(lse_a - m), w_b = exp(lse_b - m),
//   out = (w_a out_a + w_b out_b) / (w_a + w_b), lse = m + log(w_a + w_b).
// A V2 partition (out_p, max_p, sum_p) is the state (out_p, max_p + log sum_p).
//
// Cascade: when N sequences share their first P tokens (the same physical
// blocks), decoding each of them over its whole context reads the prefix's
// K/V N times. Here the prefix is attended ONCE for all of them:
//   1. prefix kernel (below): for each KV head, the queries of all N sequences
//      (x the GQA ratio) form a small matrix Q[g x head_size]; S = Q K^T and
//      O = softmax(S) V are tensor-core matrix products (mma.sync m16n8k16,
//      fp16/bf16 in, fp32 accumulate) over the prefix, split into chunks
//      across thread blocks; each chunk writes a V2-style partition
//      (out normalized in the chunk, max, sum).
//   2. stage 6's reduce kernel merges the chunks into the prefix state.
//   3. stage 6's decode kernel (the stage 1-5 steps over a token range)
//      computes each sequence's suffix state over tokens [P, context).
//   4. merge_states_kernel merges prefix and suffix states into the output.
// Step 3 runs on a second stream, concurrently with 1-2 (the prefix kernel is
// compute-heavy, the suffix decode memory-bound), joined by an event before 4.
// fp32 has no fp16-style mma: its prefix goes through the stage 6 decode
// kernel per sequence (correct, no sharing).
//
// Thread mapping of the prefix kernel: grid (query tile, KV head, chunk),
// 4 warps; warp w owns query rows [16w, 16w + 16) of the tile (PrefixTiling in
// pa/index/cascade.hpp). All 128 threads copy each K/V tile (whole KV blocks)
// into shared memory with 16-byte cp.async (double buffered, swizzled); then
// each warp runs S = Q K^T (ldmatrix A from Q, B from K), an online softmax
// over its 16 rows (a row lives in the 4 lanes of a quad), and O += P V with
// P converted in registers to the A operand (no shared-memory round trip).
//
// The merge kernel: one thread per 4 consecutive output elements of a state
// row (float4 loads/stores), grid-stride; a zero-weight state is never read
// (its out may be anything, even NaN).
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "06_v2_partition.cuh"
#include "ptx.cuh"
#include "pa/index/cascade.hpp"
#include "pa/index/merge.hpp"

namespace pa::kernels {

// ---- the merge kernel -----------------------------------------------------
// Weights of two states; both empty -> (0, 0, -inf). Never NaN for -inf lse.
struct MergeWeights {
  float wa, wb, lse;
};
__device__ __forceinline__ MergeWeights merge_weights(float la, float lb) {
  const float m = fmaxf(la, lb);
  if (m == -INFINITY) return {0.f, 0.f, -INFINITY};
  const float ea = la == -INFINITY ? 0.f : __expf(la - m);
  const float eb = lb == -INFINITY ? 0.f : __expf(lb - m);
  const float s = ea + eb;  // >= 1: the larger one is exp(0)
  return {ea / s, eb / s, m + __logf(s)};
}

__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
template <class T>
__device__ __forceinline__ void store4(T* p, float4 v) {
  Vec<T, 4> o;
  o.e[0] = from_float<T>(v.x);
  o.e[1] = from_float<T>(v.y);
  o.e[2] = from_float<T>(v.z);
  o.e[3] = from_float<T>(v.w);
  store_vec<T, 4>(p, o);
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
  const int vecs_per_row = stg.head_size / 4;
  const std::int64_t total = rows * vecs_per_row;
  int it = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x, ++it) {
    const std::int64_t row = i / vecs_per_row;
    const int d = MergeGrid::elem_of(i, vecs_per_row);
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
      const float4 x = *reinterpret_cast<const float4*>(a_out + off);
      r.x = w.wa * x.x; r.y = w.wa * x.y; r.z = w.wa * x.z; r.w = w.wa * x.w;
      PA_TRACE(tracer, ev(tc, Step::merge, Op::global_load, Tensor::prefix_out)
                           .it(it).dims(d, 4).at(off * 4, 16).val(x.x));
    }
    if (w.wb > 0.f) {
      const float4 x = *reinterpret_cast<const float4*>(b_out + off);
      r.x = fmaf(w.wb, x.x, r.x); r.y = fmaf(w.wb, x.y, r.y);
      r.z = fmaf(w.wb, x.z, r.z); r.w = fmaf(w.wb, x.w, r.w);
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
  }
}
// LESSON-END(cascade_merge.merge)

// ---- the prefix multi-query kernel -------------------------------------------
struct PrefixArgs {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int* prefix_blocks = nullptr;  // the shared logical->physical map (sequence 0's table row)
  QueryGeometry qg;
  CacheGeometry cg;
  int num_seqs = 0, num_heads = 0, num_kv_heads = 0;
  int prefix_len = 0, chunk_len = 0;
  float scale = 1.f;
  float* part_out = nullptr;  // chunk c of (seq, head) = partition c, PartitionGeometry pg
  float* part_max = nullptr;
  float* part_sum = nullptr;
  PartitionGeometry pg;
};

// The two mma.sync forms of the prefix kernel (PrefixKernel in cascade.hpp;
// the host view is prefix_rows_per_block / prefix_variant_tile_tokens there):
//   1 (mma_4warps): 4 warps, 32-token tiles, 3 buffers (two tiles in flight),
//      registers capped so 3 blocks fit per SM;
//   3 (mma_8warps): 8 warps = 128 query rows per block, so a K/V tile copied
//      into shared memory feeds twice the rows (half the L2->SM traffic per
//      mma), Q kept in registers (read from shared memory once, not once per
//      tile), 64-token tiles x 3 buffers, one block per SM, no register cap.
// Heads > 128 (either): 4 warps, prefix_tile_tokens() tiles, double buffered
// (one tile in flight), ~2 blocks per SM.
template <class Cfg, int VARIANT>
struct PrefixVariant {
  static constexpr bool kWide = PrefixVariantTiling<Cfg, VARIANT>::kWide;
  static constexpr bool kSmall = PrefixVariantTiling<Cfg, VARIANT>::kSmall;
  using Tiling = typename PrefixVariantTiling<Cfg, VARIANT>::Tiling;
  static_assert(Tiling::kRows == prefix_rows_per_block(VARIANT, Cfg::kHeadSize), "host plan and kernel agree");
  static_assert(Tiling::kTileTokens == prefix_variant_tile_tokens(VARIANT, Cfg::kHeadSize, Cfg::kBlockSize),
                "host plan and kernel agree");
  static constexpr bool kQInRegs = PrefixVariantTiling<Cfg, VARIANT>::kQInRegs;
  // Register cap per thread: mma_4warps 3 blocks of 128 threads per SM;
  // mma_8warps takes what it needs (one block per SM).
  static constexpr int kMaxRegs = kSmall ? 168 : 255;
};

// Trace hooks (Tracer: pa/index/tracer.hpp; NullTracer = none): the event
// contract is in kernels/stages/EVENTS.md ("stage 7 prefix kernel"), the host
// model in trace/src/host_model_cascade_prefix.cpp. Every event of a block is
// labelled with the block's first query row (prefix_block_label) and
// partition = chunk (the recording tracer relabels it kPrefixBlockBase + chunk).
template <class Cfg, int VARIANT, class Tracer = NullTracer>
__global__ void __launch_bounds__((PrefixVariant<Cfg, VARIANT>::Tiling::kNumThreads))
    __maxnreg__((PrefixVariant<Cfg, VARIANT>::kMaxRegs)) cascade_prefix_kernel(PrefixArgs a, Tracer tracer = {}) {
  using Tl = typename PrefixVariant<Cfg, VARIANT>::Tiling;
  using trace::Op;
  using trace::Step;
  using trace::Tensor;
  using T = Elem<Cfg>;
  constexpr int kNT = Tl::kTileTokens / 8;  // 8-token n-tiles of S
  constexpr int kDN = Tl::kHead / 8;        // 8-dim n-tiles of O
  extern __shared__ float4 cascade_smem[];
  T* q_s = reinterpret_cast<T*>(cascade_smem);
  const std::uint32_t smem_base = ptx::smem_u32(cascade_smem);

  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int kvh = blockIdx.y, chunk = blockIdx.z;
  const int ratio = a.num_heads / a.num_kv_heads;
  const int num_rows = Tl::rows_per_kv_head(a.num_seqs, ratio);
  const int row0 = blockIdx.x * Tl::kRows;
  const int chunk_begin = chunk * a.chunk_len;
  const int chunk_end = min(a.prefix_len, chunk_begin + a.chunk_len);
  if (chunk_begin >= chunk_end) return;  // whole block: no barrier skipped by half of it
  const PrefixBlockLabel lab = prefix_block_label(blockIdx.x, kvh, ratio, Tl::kRows);
  const TraceCtx tc{trace::Stage::cascade_merge, warp, lane, lab.seq, lab.head, chunk, kvh};
  constexpr int kEb = Cfg::kElemBytes;

  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);

  // K/V tile loader: tile chunk c -> swizzled slot; blocks past the chunk are zero-filled.
  // LESSON-BEGIN(cascade_merge.prefix_load)
  auto load_tile = [&](int tile, int stage) {
    const int t0 = chunk_begin + tile * Tl::kTileTokens;
    const std::uint32_t ks = smem_base + Tl::k_tile_byte(stage);
    const std::uint32_t vs = smem_base + Tl::v_tile_byte(stage);
    for (int c = tid; c < Tl::kTileChunks; c += Tl::kNumThreads) {
      const int b = Tl::tile_block_of_chunk(c);
      const int token = t0 + b * Tl::kBlock;
      const bool valid = token < chunk_end;
      const int phys = valid ? a.prefix_blocks[token / Tl::kBlock] : 0;
      const std::int64_t off = Tl::region_chunk_offset(a.cg, phys, kvh, Tl::region_chunk_of(c));
      const std::uint32_t slot = Tl::chunk_byte(Tl::swizzle(c));
      ptx::cp_async_16(ks + slot, k_cache + off, valid ? 16 : 0);
      ptx::cp_async_16(vs + slot, v_cache + off, valid ? 16 : 0);
      if constexpr (kTracing<Tracer>) {
        const int lb = valid ? token / Tl::kBlock : -1, pb = valid ? phys : -1;
        const int w = Tl::region_chunk_of(c);
        const int ktok = valid ? token + Tl::k_chunk_token(w) : -1, vtok = valid ? token + Tl::v_chunk_token(w) : -1;
        if (valid)
          PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::block_table)
                               .it(tile).blk(lb, pb).at(static_cast<std::int64_t>(lb) * 4, 4));
        PA_TRACE(tracer, ev(tc, Step::k_load, Op::async_copy, Tensor::k_cache)
                             .it(tile).tok(ktok).blk(lb, pb).dims(Tl::k_chunk_dim(w), 8)
                             .at(valid ? off * kEb : -1, valid ? 16 : 0));
        PA_TRACE(tracer, ev(tc, Step::k_load, Op::shared_store, Tensor::kv_smem)
                             .it(tile).tok(ktok).blk(lb, pb).dims(Tl::k_chunk_dim(w), 8)
                             .at(Tl::k_tile_byte(stage) + slot, 16));
        PA_TRACE(tracer, ev(tc, Step::v_load, Op::async_copy, Tensor::v_cache)
                             .it(tile).tok(vtok).blk(lb, pb).dims(Tl::v_chunk_dim(w), 1)
                             .at(valid ? off * kEb : -1, valid ? 16 : 0));
        PA_TRACE(tracer, ev(tc, Step::v_load, Op::shared_store, Tensor::kv_smem)
                             .it(tile).tok(vtok).blk(lb, pb).dims(Tl::v_chunk_dim(w), 1)
                             .at(Tl::v_tile_byte(stage) + slot, 16));
      }
    }
  };
  // LESSON-END(cascade_merge.prefix_load)

  const int n_tiles = ceil_div(chunk_end - chunk_begin, Tl::kTileTokens);
  // Prologue: the first kStages - 1 tiles in flight (one commit group each,
  // empty past the chunk, so the group count stays in step with the tiles).
#pragma unroll
  for (int t = 0; t < Tl::kStages - 1; ++t) {
    if (t < n_tiles) load_tile(t, t);
    ptx::cp_async_commit();
  }

  // Q tile -> shared (rows past the group are zero: their math stays finite, never stored).
  {
    const T* q = static_cast<const T*>(a.q);
    for (int e = tid; e < Tl::kRows * Tl::kHead; e += Tl::kNumThreads) {
      const int r = e / Tl::kHead, d = e % Tl::kHead, grow = row0 + r;
      T v = from_float<T>(0.f);
      if (grow < num_rows) v = q[a.qg.q_offset(Tl::row_seq(grow, ratio), Tl::row_head(grow, kvh, ratio), d)];
      q_s[Tl::q_smem_elem(r, d)] = v;
      if constexpr (kTracing<Tracer>) {
        const int it = e / Tl::kNumThreads;
        if (grow < num_rows)
          PA_TRACE(tracer, ev(tc, Step::q_load, Op::global_load, Tensor::q).it(it).dims(d, 1).at(
                               a.qg.q_offset(Tl::row_seq(grow, ratio), Tl::row_head(grow, kvh, ratio), d) * kEb, kEb));
        PA_TRACE(tracer, ev(tc, Step::q_smem_store, Op::shared_store, Tensor::q_smem).it(it).dims(d, 1).at(
                             static_cast<std::int64_t>(Tl::q_smem_elem(r, d)) * kEb, kEb));
      }
    }
  }

  const bool warp_active = row0 + warp * Tl::kRowsPerWarp < num_rows;
  // Q A-fragments for all head dims, in registers for the whole chunk (mma_8warps).
  constexpr bool kQInRegs = PrefixVariant<Cfg, VARIANT>::kQInRegs;
  std::uint32_t qreg[kQInRegs ? Tl::kHead / 16 : 1][4];
  if constexpr (kQInRegs) {
    __syncthreads();  // the Q tile is in shared memory
    PA_TRACE_BARRIER(tracer, barrier_event(tc));
#pragma unroll
    for (int kk = 0; kk < Tl::kHead / 16; ++kk) {
      ptx::ldmatrix_x4(qreg[kk], ptx::smem_u32(q_s + Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))));
      PA_TRACE(tracer, ev(tc, Step::q_smem_load, Op::shared_load, Tensor::q_smem).it(kk).dims(kk * 16 + Tl::lda_dim(lane), 8)
                           .at(static_cast<std::int64_t>(Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))) * kEb, 16));
    }
  }
  const float scale_log2 = a.scale * 1.4426950408889634f;  // exp(x) = exp2(x * log2 e)
  float o[kDN][4];
#pragma unroll
  for (int dn = 0; dn < kDN; ++dn) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY};  // running row max, log2 units
  // This lane's part of the row sums: l of the exact probabilities (the
  // partition's exp sum, hence its weight and lse), lr of the probabilities as
  // rounded for the P V product (so the output is normalized by exactly the
  // weights it was summed with).
  float l[2] = {0.f, 0.f}, lr[2] = {0.f, 0.f};

  for (int tile = 0; tile < n_tiles; ++tile) {
    // Wait for this tile's group (kStages - 1 + tile groups committed so far,
    // tiles 0 .. tile + kStages - 2: the newest kStages - 2 may stay in flight);
    // the barrier then also says every warp is done with the previous tile's
    // buffer, which the copy issued right after refills. One barrier per tile.
    ptx::cp_async_wait<Tl::kStages - 2>();
    __syncthreads();
    PA_TRACE_BARRIER(tracer, barrier_event(tc));
    {
      const int ahead = tile + Tl::kStages - 1;
      if (ahead < n_tiles) load_tile(ahead, ahead % Tl::kStages);
      ptx::cp_async_commit();  // always: the group count stays in step with the tiles
    }
    if (warp_active) {
      const std::uint32_t ks = smem_base + Tl::k_tile_byte(tile % Tl::kStages);
      const std::uint32_t vs = smem_base + Tl::v_tile_byte(tile % Tl::kStages);
      const int valid = min(Tl::kTileTokens, chunk_end - (chunk_begin + tile * Tl::kTileTokens));

      // LESSON-BEGIN(cascade_merge.prefix_qk)
      float s[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < Tl::kHead / 16; ++kk) {
        std::uint32_t qa[4];
        if constexpr (kQInRegs) {
          qa[0] = qreg[kk][0]; qa[1] = qreg[kk][1]; qa[2] = qreg[kk][2]; qa[3] = qreg[kk][3];
        } else {
          ptx::ldmatrix_x4(qa, ptx::smem_u32(q_s + Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))));
          PA_TRACE(tracer, ev(tc, Step::q_smem_load, Op::shared_load, Tensor::q_smem).it(tile).dims(kk * 16 + Tl::lda_dim(lane), 8)
                               .at(static_cast<std::int64_t>(Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))) * kEb, 16));
        }
#pragma unroll
        for (int nt = 0; nt < kNT; nt += 2) {
          std::uint32_t kb[4];
          ptx::ldmatrix_x4(kb, ks + Tl::chunk_byte(Tl::k_smem_chunk(nt * 8 + Tl::ldk_token(lane), kk * 16 + Tl::ldk_dim(lane))));
          ptx::mma_m16n8k16<T>(s[nt], qa, kb[0], kb[1]);
          ptx::mma_m16n8k16<T>(s[nt + 1], qa, kb[2], kb[3]);
          PA_TRACE(tracer, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + nt * 8 + Tl::ldk_token(lane)).dims(kk * 16 + Tl::ldk_dim(lane), 8)
                               .at(Tl::k_tile_byte(tile % Tl::kStages) +
                                   Tl::chunk_byte(Tl::k_smem_chunk(nt * 8 + Tl::ldk_token(lane), kk * 16 + Tl::ldk_dim(lane))), 16));
          PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + nt * 8).dims(kk * 16, 16));
          PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + nt * 8 + 8).dims(kk * 16, 16));
        }
      }
      // LESSON-END(cascade_merge.prefix_qk)

      // LESSON-BEGIN(cascade_merge.prefix_softmax)
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int t = nt * 8 + Tl::frag_col(lane, j);
          const float v = t < valid ? s[nt][j] * scale_log2 : -INFINITY;
          s[nt][j] = v;
          mx[j / 2] = fmaxf(mx[j / 2], v);
        }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
        mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
        PA_TRACE(tracer, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(tile).src(lane ^ 1));
        PA_TRACE(tracer, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(tile).src(lane ^ 2));
        PA_TRACE(tracer, ev(tc, Step::rescale, Op::compute, Tensor::none).it(tile));
        const float mnew = fmaxf(m[i], mx[i]);  // finite: every tile has a valid token
        const float corr = exp2f(m[i] - mnew);  // 0 on the first tile (m = -inf)
        m[i] = mnew;
        l[i] *= corr;
        lr[i] *= corr;
#pragma unroll
        for (int dn = 0; dn < kDN; ++dn) {
          o[dn][2 * i] *= corr;
          o[dn][2 * i + 1] *= corr;
        }
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float p = exp2f(s[nt][j] - m[j / 2]);
          const float pr = round_to<T>(p);  // what the mma multiplies
          s[nt][j] = pr;
          l[j / 2] += p;
          lr[j / 2] += pr;
        }
      PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::compute, Tensor::none).it(tile));
      // LESSON-END(cascade_merge.prefix_softmax)

      // LESSON-BEGIN(cascade_merge.prefix_pv)
#pragma unroll
      for (int kk = 0; kk < Tl::kTileTokens / 16; ++kk) {
        const std::uint32_t pa[4] = {ptx::pack2<T>(s[2 * kk][0], s[2 * kk][1]), ptx::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                     ptx::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                     ptx::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dn = 0; dn < kDN; dn += 2) {
          std::uint32_t vb[4];
          ptx::ldmatrix_x4(vb, vs + Tl::chunk_byte(Tl::v_smem_chunk(kk * 16 + Tl::ldv_token(lane), dn * 8 + Tl::ldv_dim(lane))));
          ptx::mma_m16n8k16<T>(o[dn], pa, vb[0], vb[1]);
          ptx::mma_m16n8k16<T>(o[dn + 1], pa, vb[2], vb[3]);
          PA_TRACE(tracer, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + kk * 16 + Tl::ldv_token(lane)).dims(dn * 8 + Tl::ldv_dim(lane), 1)
                               .at(Tl::v_tile_byte(tile % Tl::kStages) +
                                   Tl::chunk_byte(Tl::v_smem_chunk(kk * 16 + Tl::ldv_token(lane), dn * 8 + Tl::ldv_dim(lane))), 16));
          PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + kk * 16).dims(dn * 8, 8));
          PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile)
                               .tok(chunk_begin + tile * Tl::kTileTokens + kk * 16).dims(dn * 8 + 8, 8));
        }
      }
      // LESSON-END(cascade_merge.prefix_pv)
    }
  }
  ptx::cp_async_wait<0>();

  if (!warp_active) return;
  // LESSON-BEGIN(cascade_merge.prefix_store)
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    lr[i] += __shfl_xor_sync(0xffffffffu, lr[i], 1);
    lr[i] += __shfl_xor_sync(0xffffffffu, lr[i], 2);
    for (int k = 0; k < 4; ++k)  // xor 1, 2 for l, then for lr
      PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(i).src(lane ^ (1 + k % 2)));
    const int grow = row0 + warp * 16 + Tl::frag_row(lane, 2 * i);
    if (grow >= num_rows) continue;
    const int seq = Tl::row_seq(grow, ratio), head = Tl::row_head(grow, kvh, ratio);
    const float inv = 1.f / lr[i];  // >= 1: the row max contributes exp(0) = 1 exactly
#pragma unroll
    for (int dn = 0; dn < kDN; ++dn) {
      const int d = dn * 8 + Tl::frag_col(lane, 0);
      *reinterpret_cast<float2*>(a.part_out + a.pg.out_offset(seq, head, chunk, d)) =
          make_float2(o[dn][2 * i] * inv, o[dn][2 * i + 1] * inv);
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_out).it(i).dims(d, 2)
                           .at(a.pg.out_offset(seq, head, chunk, d) * 4, 8));
    }
    if (lane % 4 == 0) {
      a.part_max[a.pg.stat_offset(seq, head, chunk)] = m[i] * 0.6931471805599453f;  // log2 -> natural
      a.part_sum[a.pg.stat_offset(seq, head, chunk)] = l[i];
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_max).it(i)
                           .at(a.pg.stat_offset(seq, head, chunk) * 4, 4).val(m[i] * 0.6931471805599453f));
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_sum).it(i)
                           .at(a.pg.stat_offset(seq, head, chunk) * 4, 4).val(l[i]));
    }
  }
  // LESSON-END(cascade_merge.prefix_store)
}

}  // namespace pa::kernels

namespace pa::kernels {

// Prefix kernel launch: grid (query tiles, KV heads, chunks), 4 warps.
// The kernel index math of both variants is PrefixTiling's.
template <class Cfg, int VARIANT, class Tracer = NullTracer>
void launch_cascade_prefix(const PrefixArgs& a, cudaStream_t stream, Tracer tracer = {}) {
  using Tl = typename PrefixVariant<Cfg, VARIANT>::Tiling;
  auto kernel = &cascade_prefix_kernel<Cfg, VARIANT, Tracer>;
  PA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tl::kSmemBytes));
  const int ratio = a.num_heads / a.num_kv_heads;
  const dim3 grid(Tl::num_query_tiles(a.num_seqs, ratio), a.num_kv_heads, ceil_div(a.prefix_len, a.chunk_len));
  kernel<<<grid, Tl::kNumThreads, Tl::kSmemBytes, stream>>>(a, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
}

// Merge launch: 256 threads per block, one thread per 4 output elements, at
// most 65535 blocks (grid-stride beyond): merge_grid_blocks (cascade.hpp).
template <class OutT, class Tracer = NullTracer>
void launch_merge_kernel(const MergeArgs& m, cudaStream_t stream, Tracer tracer = {}) {
  const std::int64_t rows = static_cast<std::int64_t>(m.num_seqs) * m.num_heads;
  const MergeGrid g = merge_grid(rows, m.head_size);
  merge_states_kernel<OutT, Tracer><<<static_cast<unsigned>(g.blocks), MergeGrid::kThreads, 0, stream>>>(
      m.a_out, m.a_lse, m.b_out, m.b_lse, static_cast<OutT*>(m.out), m.out_lse, rows, m.stg, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pa::kernels
