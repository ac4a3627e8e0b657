// Stage 7, cascade_merge: the cascade's prefix kernel on mma.sync (every
// sm_80+ GPU; 07_cascade_prefix_wgmma.cuh has the Hopper form). For each KV
// head it attends the queries of every sequence that shares the prefix, as
// a small matrix, over one chunk of the prefix, and writes the chunk's
// V2-style partition; 07_cascade_merge.cuh says where it fits in the
// cascade.
//
// Thread mapping of the prefix kernel: grid (query tile, KV head, chunk),
// 4 or 8 warps (PrefixVariant below: mma_4warps, mma_8warps); warp w owns
// query rows [16w, 16w + 16) of the tile (PrefixTiling in
// pa/index/cascade.hpp). All the block's threads copy each K/V tile (whole KV
// blocks) into shared memory with 16-byte cp.async (swizzled; 3 buffers at
// heads up to 128, 2 above); then
// each warp runs S = Q K^T (ldmatrix A from Q, B from K), an online softmax
// over its 16 rows (a row lives in the 4 lanes of a quad), and O += P V with
// P converted in registers to the A operand (no shared-memory round trip).
// With ALiBi slopes each lane also holds its two rows' slopes and sequence
// lengths (prefix_alibi): the shared prefix has a different bias in every
// sequence.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "06_v2_partition.cuh"
#include "pa/index/cascade.hpp"
#include "pa/kernels/cascade.hpp"
#include "ptx.cuh"

namespace pa::kernels {

// ---- the prefix multi-query kernel -------------------------------------------
struct PrefixArgs {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int* prefix_blocks = nullptr;  // the shared logical->physical map (sequence 0's table row)
  // ALiBi: slopes [num_heads] or null; with slopes, the context lengths
  // [num_seqs] (a prefix token's bias depends on its sequence's length).
  const float* alibi_slopes = nullptr;
  const int* context_lens = nullptr;
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

namespace detail {
// The prefix kernel that runs for `asked` (automatic: the planner's default;
// wgmma only where this build and the device run it, else mma_8warps).
PrefixKernel resolve_prefix_kernel(const StageArgs& b, PrefixKernel asked);
// Launches `kernel` (never automatic) for b's dtype, head and block size on
// `s`; throws std::invalid_argument when that instance is not built.
void launch_prefix_kernel(const StageArgs& b, PrefixKernel kernel, const PrefixArgs& pa, cudaStream_t s);
// Tokens per chunk of a span of prefix_len tokens read by query_tiles query
// tiles per KV head: enough chunks to fill the block slots of sm_share SMs,
// the span's share of the GPU (0: the whole GPU), forced_chunks > 0
// overriding; whole tiles.
int prefix_chunk_len(const StageArgs& b, PrefixKernel kernel, int prefix_len, int query_tiles, int sm_share,
                     int forced_chunks);
}  // namespace detail

// The prefix kernel's arguments for a cascade plan: the problem's inputs (b),
// the prefix's blocks (sequence 0's table row: every sequence shares them) and
// the chunk partitions at the plan's offsets in the cascade's workspace.
inline PrefixArgs prefix_args(const StageArgs& b, const CascadePlan& plan, void* ws) {
  PrefixArgs pa;
  pa.q = b.q;
  pa.k_cache = b.k_cache;
  pa.v_cache = b.v_cache;
  pa.prefix_blocks = b.block_tables + b.btg.offset(0, 0);
  pa.alibi_slopes = b.alibi_slopes;
  pa.context_lens = b.context_lens;
  pa.qg = b.qg;
  pa.cg = b.cg;
  pa.num_seqs = b.num_seqs;
  pa.num_heads = b.num_heads;
  pa.num_kv_heads = b.num_kv_heads;
  pa.prefix_len = plan.prefix_len;
  pa.chunk_len = plan.chunk_len;
  pa.scale = b.scale;
  char* w = static_cast<char*>(ws);
  pa.part_out = reinterpret_cast<float*>(w + plan.prefix_part_out);
  pa.part_max = reinterpret_cast<float*>(w + plan.prefix_part_max);
  pa.part_sum = reinterpret_cast<float*>(w + plan.prefix_part_sum);
  pa.pg = PartitionGeometry{b.num_heads, plan.prefix_partitions, b.head_size};
  return pa;
}

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

// The prefix kernel, step by step (the steps the host model replays:
// trace/src/host_model_cascade_prefix.cpp). PrefixCta holds what a block
// decides once; PrefixAccum a warp's running state over its 16 query rows
// (this lane's part of the mma accumulator fragments). Each step is a
// force-inlined function, so the kernel compiles as one body.
//
// Trace hooks (Tracer: pa/index/tracer.hpp; NullTracer = none): the event
// contract is in kernels/stages/EVENTS.md ("stage 7 prefix kernel"). Every
// event of a block is labelled with the block's first query row
// (prefix_block_label) and partition = chunk (the recording tracer relabels it
// kPrefixBlockBase + chunk).
namespace cascade_prefix {

using trace::Op;
using trace::Step;
using trace::Tensor;

template <class Cfg, int VARIANT>
struct PrefixCta {
  using Tl = typename PrefixVariant<Cfg, VARIANT>::Tiling;
  using T = Elem<Cfg>;
  static constexpr int kNT = Tl::kTileTokens / 8;  // 8-token n-tiles of S
  static constexpr int kDN = Tl::kHead / 8;        // 8-dim n-tiles of O
  static constexpr bool kQInRegs = PrefixVariant<Cfg, VARIANT>::kQInRegs;
  static constexpr int kEb = Cfg::kElemBytes;

  T* q_s;                   // the Q tile in shared memory (rows x head)
  std::uint32_t smem_base;  // shared address of the K/V tile buffers' base
  int tid, warp, lane;
  int kvh, chunk, ratio;    // KV head, prefix chunk, GQA ratio
  int num_rows, row0;       // query rows of this KV head; this block's first
  int chunk_begin, chunk_end;
  TraceCtx tc;
};

// ALiBi for this lane's two accumulator rows (i = 0, 1: frag_row(lane, 2i)):
// each row's slope in log2 units and its sequence's context length.
struct PrefixAlibi {
  bool on = false;
  float slope_log2[2] = {0.f, 0.f};
  int context_len[2] = {1, 1};
};

template <class Cfg, int VARIANT>
struct PrefixAccum {
  using C = PrefixCta<Cfg, VARIANT>;
  float o[C::kDN][4];  // output accumulator fragments
  float m[2];          // running row max, log2 units
  // This lane's part of the row sums: l of the exact probabilities (the
  // partition's exp sum, hence its weight and lse), lr of the probabilities as
  // rounded for the P V product (so the output is normalized by exactly the
  // weights it was summed with).
  float l[2], lr[2];
};

// The block's place: its query rows, KV head and chunk, and its trace label.
template <class Cfg, int VARIANT>
__device__ __forceinline__ PrefixCta<Cfg, VARIANT> prefix_cta(const PrefixArgs& a) {
  using C = PrefixCta<Cfg, VARIANT>;
  extern __shared__ float4 cascade_smem[];
  C c;
  c.q_s = reinterpret_cast<typename C::T*>(cascade_smem);
  c.smem_base = ptx::smem_u32(cascade_smem);
  c.tid = threadIdx.x;
  c.warp = c.tid / kWarpSize;
  c.lane = c.tid % kWarpSize;
  c.kvh = blockIdx.y;
  c.chunk = blockIdx.z;
  c.ratio = a.num_heads / a.num_kv_heads;
  c.num_rows = C::Tl::rows_per_kv_head(a.num_seqs, c.ratio);
  c.row0 = blockIdx.x * C::Tl::kRows;
  c.chunk_begin = c.chunk * a.chunk_len;
  c.chunk_end = min(a.prefix_len, c.chunk_begin + a.chunk_len);
  const PrefixBlockLabel lab = prefix_block_label(blockIdx.x, c.kvh, c.ratio, C::Tl::kRows);
  c.tc = TraceCtx{trace::Stage::cascade_merge, c.warp, c.lane, lab.seq, lab.head, c.chunk, c.kvh};
  return c;
}

// K/V tile loader: tile `tile` of the chunk -> buffer `stage`, each 16-byte
// chunk to its swizzled slot (cp.async); blocks past the chunk are zero-filled.
// LESSON-BEGIN(cascade_merge.prefix_load)
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_load_tile(const PrefixArgs& a, const PrefixCta<Cfg, VARIANT>& c, int tile,
                                                 int stage, Tracer& tracer) {
  using Tl = typename PrefixCta<Cfg, VARIANT>::Tl;
  using T = typename PrefixCta<Cfg, VARIANT>::T;
  constexpr int kEb = PrefixCta<Cfg, VARIANT>::kEb;
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  const TraceCtx& tc = c.tc;
  const int t0 = c.chunk_begin + tile * Tl::kTileTokens;
  const std::uint32_t ks = c.smem_base + Tl::k_tile_byte(stage);
  const std::uint32_t vs = c.smem_base + Tl::v_tile_byte(stage);
  for (int ch = c.tid; ch < Tl::kTileChunks; ch += Tl::kNumThreads) {
    const int b = Tl::tile_block_of_chunk(ch);
    const int token = t0 + b * Tl::kBlock;
    const bool valid = token < c.chunk_end;
    const int phys = valid ? a.prefix_blocks[token / Tl::kBlock] : 0;
    const std::int64_t off = Tl::region_chunk_offset(a.cg, phys, c.kvh, Tl::region_chunk_of(ch));
    const std::uint32_t slot = Tl::chunk_byte(Tl::swizzle(ch));
    ptx::cp_async_16(ks + slot, k_cache + off, valid ? 16 : 0);
    const int v_bytes = valid ? prefix_v_copy_bytes(token + Tl::v_chunk_token(Tl::region_chunk_of(ch)), c.chunk_end) : 0;
    ptx::cp_async_16(vs + slot, v_cache + off, v_bytes);
    if constexpr (kTracing<Tracer>) {
      const int lb = valid ? token / Tl::kBlock : -1, pb = valid ? phys : -1;
      const int w = Tl::region_chunk_of(ch);
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
                           .at(valid ? off * kEb : -1, v_bytes));
      PA_TRACE(tracer, ev(tc, Step::v_load, Op::shared_store, Tensor::kv_smem)
                           .it(tile).tok(vtok).blk(lb, pb).dims(Tl::v_chunk_dim(w), 1)
                           .at(Tl::v_tile_byte(stage) + slot, 16));
    }
  }
}
// LESSON-END(cascade_merge.prefix_load)

// Q tile -> shared memory (rows past the group are zero: their math stays
// finite, never stored).
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_q_to_smem(const PrefixArgs& a, const PrefixCta<Cfg, VARIANT>& c,
                                                 Tracer& tracer) {
  using Tl = typename PrefixCta<Cfg, VARIANT>::Tl;
  using T = typename PrefixCta<Cfg, VARIANT>::T;
  constexpr int kEb = PrefixCta<Cfg, VARIANT>::kEb;
  const TraceCtx& tc = c.tc;
  const T* q = static_cast<const T*>(a.q);
  for (int e = c.tid; e < Tl::kRows * Tl::kHead; e += Tl::kNumThreads) {
    const int r = e / Tl::kHead, d = e % Tl::kHead, grow = c.row0 + r;
    T v = from_float<T>(0.f);
    if (grow < c.num_rows) v = q[a.qg.q_offset(Tl::row_seq(grow, c.ratio), Tl::row_head(grow, c.kvh, c.ratio), d)];
    c.q_s[Tl::q_smem_elem(r, d)] = v;
    if constexpr (kTracing<Tracer>) {
      const int it = e / Tl::kNumThreads;
      if (grow < c.num_rows)
        PA_TRACE(tracer, ev(tc, Step::q_load, Op::global_load, Tensor::q).it(it).dims(d, 1).at(
                             a.qg.q_offset(Tl::row_seq(grow, c.ratio), Tl::row_head(grow, c.kvh, c.ratio), d) * kEb,
                             kEb));
      PA_TRACE(tracer, ev(tc, Step::q_smem_store, Op::shared_store, Tensor::q_smem).it(it).dims(d, 1).at(
                           static_cast<std::int64_t>(Tl::q_smem_elem(r, d)) * kEb, kEb));
    }
  }
}

// This warp's Q A-fragment for head dims [16 kk, 16 kk + 16) from shared
// memory (ldmatrix); `it` is the trace iteration it is counted under.
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_q_frag(const PrefixCta<Cfg, VARIANT>& c, int kk, int it, std::uint32_t (&qa)[4],
                                              Tracer& tracer) {
  using Tl = typename PrefixCta<Cfg, VARIANT>::Tl;
  constexpr int kEb = PrefixCta<Cfg, VARIANT>::kEb;
  const TraceCtx& tc = c.tc;
  const int elem = Tl::q_smem_elem(c.warp * 16 + Tl::lda_row(c.lane), kk * 16 + Tl::lda_dim(c.lane));
  ptx::ldmatrix_x4(qa, ptx::smem_u32(c.q_s + elem));
  PA_TRACE(tracer, ev(tc, Step::q_smem_load, Op::shared_load, Tensor::q_smem).it(it).dims(kk * 16 + Tl::lda_dim(c.lane), 8)
                       .at(static_cast<std::int64_t>(elem) * kEb, 16));
}

// S = Q K^T for one tile: this warp's 16 rows x the tile's tokens, fp32
// fragments s[n-tile][4] (mma.sync m16n8k16; K from the tile buffer at ks).
// LESSON-BEGIN(cascade_merge.prefix_qk)
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_qk_mma(const PrefixCta<Cfg, VARIANT>& c, int tile, std::uint32_t ks,
                                              const std::uint32_t (&qreg)[PrefixCta<Cfg, VARIANT>::kQInRegs
                                                                              ? PrefixCta<Cfg, VARIANT>::Tl::kHead / 16
                                                                              : 1][4],
                                              float (&s)[PrefixCta<Cfg, VARIANT>::kNT][4], Tracer& tracer) {
  using C = PrefixCta<Cfg, VARIANT>;
  using Tl = typename C::Tl;
  using T = typename C::T;
  const TraceCtx& tc = c.tc;
  const int lane = c.lane;
#pragma unroll
  for (int nt = 0; nt < C::kNT; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < Tl::kHead / 16; ++kk) {
    std::uint32_t qa[4];
    if constexpr (C::kQInRegs) {
      qa[0] = qreg[kk][0]; qa[1] = qreg[kk][1]; qa[2] = qreg[kk][2]; qa[3] = qreg[kk][3];
    } else {
      prefix_q_frag(c, kk, tile, qa, tracer);
    }
#pragma unroll
    for (int nt = 0; nt < C::kNT; nt += 2) {
      std::uint32_t kb[4];
      ptx::ldmatrix_x4(kb, ks + Tl::chunk_byte(Tl::k_smem_chunk(nt * 8 + Tl::ldk_token(lane), kk * 16 + Tl::ldk_dim(lane))));
      ptx::mma_m16n8k16<T>(s[nt], qa, kb[0], kb[1]);
      ptx::mma_m16n8k16<T>(s[nt + 1], qa, kb[2], kb[3]);
      PA_TRACE(tracer, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + nt * 8 + Tl::ldk_token(lane)).dims(kk * 16 + Tl::ldk_dim(lane), 8)
                           .at(Tl::k_tile_byte(tile % Tl::kStages) +
                               Tl::chunk_byte(Tl::k_smem_chunk(nt * 8 + Tl::ldk_token(lane), kk * 16 + Tl::ldk_dim(lane))), 16));
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + nt * 8).dims(kk * 16, 16));
      PA_TRACE(tracer, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + nt * 8 + 8).dims(kk * 16, 16));
    }
  }
}
// LESSON-END(cascade_merge.prefix_qk)

// ALiBi: the slope and context length of each of the lane's two rows in the
// warp's 16-row slice starting at query row warp_row0 (the wgmma kernel's
// warps own such slices too); rows past the group keep none. The prefix is
// shared, but the bias is not: a prefix token's position is measured from the
// end of each row's own sequence.
// LESSON-BEGIN(cascade_merge.prefix_alibi)
template <class Tl, class Tracer>
__device__ __forceinline__ PrefixAlibi prefix_alibi_rows(const PrefixArgs& a, int warp_row0, int num_rows, int ratio,
                                                         int kvh, int lane, const TraceCtx& tc, Tracer& tracer) {
  PrefixAlibi al;
  if (a.alibi_slopes == nullptr) return al;
  al.on = true;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int grow = warp_row0 + Tl::frag_row(lane, 2 * i);
    if (grow >= num_rows) continue;
    const int seq = Tl::row_seq(grow, ratio), head = Tl::row_head(grow, kvh, ratio);
    al.context_len[i] = __ldg(a.context_lens + seq);
    PA_TRACE(tracer, ev(tc, Step::alibi_bias, Op::global_load, Tensor::context_lens).it(i)
                         .at(context_len_offset(seq) * 4, 4));
    const float slope = __ldg(a.alibi_slopes + head);
    al.slope_log2[i] = slope * kLog2e;  // the logits are in base 2
    PA_TRACE(tracer, ev(tc, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes).it(i)
                         .at(head * 4, 4).val(slope));
  }
  return al;
}
// LESSON-END(cascade_merge.prefix_alibi)

template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ PrefixAlibi prefix_alibi(const PrefixArgs& a, const PrefixCta<Cfg, VARIANT>& c,
                                                    Tracer& tracer) {
  using Tl = typename PrefixCta<Cfg, VARIANT>::Tl;
  return prefix_alibi_rows<Tl>(a, c.row0 + c.warp * 16, c.num_rows, c.ratio, c.kvh, c.lane, c.tc, tracer);
}

// Online softmax over one tile: scale to log2 units, mask tokens past the
// chunk, the row max across the quad of lanes that share a row, rescale the
// running state, and turn s into the probabilities (rounded to the dtype, as
// the P V product multiplies them).
// LESSON-BEGIN(cascade_merge.prefix_softmax)
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_online_softmax(const PrefixCta<Cfg, VARIANT>& c, int tile, int valid,
                                                      float scale_log2, const PrefixAlibi& al,
                                                      float (&s)[PrefixCta<Cfg, VARIANT>::kNT][4],
                                                      PrefixAccum<Cfg, VARIANT>& acc, Tracer& tracer) {
  using C = PrefixCta<Cfg, VARIANT>;
  using Tl = typename C::Tl;
  using T = typename C::T;
  const TraceCtx& tc = c.tc;
  const int lane = c.lane;
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < C::kNT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int t = nt * 8 + Tl::frag_col(lane, j);
      const float x = s[nt][j] * scale_log2;
      const int token = c.chunk_begin + tile * Tl::kTileTokens + t;  // in the sequence (the prefix starts it)
      const float biased = al.on ? x + alibi_bias(al.slope_log2[j / 2], token, al.context_len[j / 2]) : x;
      const float v = t < valid ? biased : -INFINITY;
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
    const float mnew = fmaxf(acc.m[i], mx[i]);  // finite: every tile has a valid token
    const float corr = rescale<LogBase::two>(acc.m[i], mnew);  // 0 on the first tile (m = -inf)
    acc.m[i] = mnew;
    acc.l[i] *= corr;
    acc.lr[i] *= corr;
#pragma unroll
    for (int dn = 0; dn < C::kDN; ++dn) {
      acc.o[dn][2 * i] *= corr;
      acc.o[dn][2 * i + 1] *= corr;
    }
  }
#pragma unroll
  for (int nt = 0; nt < C::kNT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float p = exp2f(s[nt][j] - acc.m[j / 2]);
      const float pr = round_to<T>(p);  // what the mma multiplies
      s[nt][j] = pr;
      acc.l[j / 2] += p;
      acc.lr[j / 2] += pr;
    }
  PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::compute, Tensor::none).it(tile));
}
// LESSON-END(cascade_merge.prefix_softmax)

// O += P V for one tile: the probabilities packed into A fragments, V from the
// tile buffer at vs (ldmatrix), mma.sync into the output fragments.
// LESSON-BEGIN(cascade_merge.prefix_pv)
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_pv_mma(const PrefixCta<Cfg, VARIANT>& c, int tile, std::uint32_t vs,
                                              const float (&s)[PrefixCta<Cfg, VARIANT>::kNT][4],
                                              PrefixAccum<Cfg, VARIANT>& acc, Tracer& tracer) {
  using C = PrefixCta<Cfg, VARIANT>;
  using Tl = typename C::Tl;
  using T = typename C::T;
  const TraceCtx& tc = c.tc;
  const int lane = c.lane;
#pragma unroll
  for (int kk = 0; kk < Tl::kTileTokens / 16; ++kk) {
    const std::uint32_t pa[4] = {ptx::pack2<T>(s[2 * kk][0], s[2 * kk][1]), ptx::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                 ptx::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                 ptx::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < C::kDN; dn += 2) {
      std::uint32_t vb[4];
      ptx::ldmatrix_x4(vb, vs + Tl::chunk_byte(Tl::v_smem_chunk(kk * 16 + Tl::ldv_token(lane), dn * 8 + Tl::ldv_dim(lane))));
      ptx::mma_m16n8k16<T>(acc.o[dn], pa, vb[0], vb[1]);
      ptx::mma_m16n8k16<T>(acc.o[dn + 1], pa, vb[2], vb[3]);
      PA_TRACE(tracer, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + kk * 16 + Tl::ldv_token(lane)).dims(dn * 8 + Tl::ldv_dim(lane), 1)
                           .at(Tl::v_tile_byte(tile % Tl::kStages) +
                               Tl::chunk_byte(Tl::v_smem_chunk(kk * 16 + Tl::ldv_token(lane), dn * 8 + Tl::ldv_dim(lane))), 16));
      PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + kk * 16).dims(dn * 8, 8));
      PA_TRACE(tracer, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile)
                           .tok(c.chunk_begin + tile * Tl::kTileTokens + kk * 16).dims(dn * 8 + 8, 8));
    }
  }
}
// LESSON-END(cascade_merge.prefix_pv)

// The chunk's partition: the row sums across the quad, the output normalized
// by the rounded weights, max (natural log) and the exact sum, V2's layout.
// LESSON-BEGIN(cascade_merge.prefix_store)
template <class Cfg, int VARIANT, class Tracer>
__device__ __forceinline__ void prefix_store(const PrefixArgs& a, const PrefixCta<Cfg, VARIANT>& c,
                                             PrefixAccum<Cfg, VARIANT>& acc, Tracer& tracer) {
  using C = PrefixCta<Cfg, VARIANT>;
  using Tl = typename C::Tl;
  const TraceCtx& tc = c.tc;
  const int lane = c.lane, chunk = c.chunk;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    acc.l[i] += __shfl_xor_sync(0xffffffffu, acc.l[i], 1);
    acc.l[i] += __shfl_xor_sync(0xffffffffu, acc.l[i], 2);
    acc.lr[i] += __shfl_xor_sync(0xffffffffu, acc.lr[i], 1);
    acc.lr[i] += __shfl_xor_sync(0xffffffffu, acc.lr[i], 2);
    for (int k = 0; k < 4; ++k)  // xor 1, 2 for l, then for lr
      PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(i).src(lane ^ (1 + k % 2)));
    const int grow = c.row0 + c.warp * 16 + Tl::frag_row(lane, 2 * i);
    if (grow >= c.num_rows) continue;
    const int seq = Tl::row_seq(grow, c.ratio), head = Tl::row_head(grow, c.kvh, c.ratio);
    const float inv = 1.f / acc.lr[i];  // >= 1: the row max contributes exp(0) = 1 exactly
#pragma unroll
    for (int dn = 0; dn < C::kDN; ++dn) {
      const int d = dn * 8 + Tl::frag_col(lane, 0);
      *reinterpret_cast<float2*>(a.part_out + a.pg.out_offset(seq, head, chunk, d)) =
          make_float2(acc.o[dn][2 * i] * inv, acc.o[dn][2 * i + 1] * inv);
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_out).it(i).dims(d, 2)
                           .at(a.pg.out_offset(seq, head, chunk, d) * 4, 8));
    }
    if (lane % 4 == 0) {
      a.part_max[a.pg.stat_offset(seq, head, chunk)] = acc.m[i] * kLn2;  // log2 -> natural
      a.part_sum[a.pg.stat_offset(seq, head, chunk)] = acc.l[i];
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_max).it(i)
                           .at(a.pg.stat_offset(seq, head, chunk) * 4, 4).val(acc.m[i] * kLn2));
      PA_TRACE(tracer, ev(tc, Step::partition_store, Op::global_store, Tensor::part_sum).it(i)
                           .at(a.pg.stat_offset(seq, head, chunk) * 4, 4).val(acc.l[i]));
    }
  }
}
// LESSON-END(cascade_merge.prefix_store)

}  // namespace cascade_prefix

// The kernel: the steps above, composed. A cp.async pipeline of kStages tile
// buffers (kStages - 1 tiles in flight), one barrier per tile.
template <class Cfg, int VARIANT, class Tracer = NullTracer>
__global__ void __launch_bounds__((PrefixVariant<Cfg, VARIANT>::Tiling::kNumThreads))
    __maxnreg__((PrefixVariant<Cfg, VARIANT>::kMaxRegs)) cascade_prefix_kernel(PrefixArgs a, Tracer tracer = {}) {
  using C = cascade_prefix::PrefixCta<Cfg, VARIANT>;
  using Tl = typename C::Tl;
  const C c = cascade_prefix::prefix_cta<Cfg, VARIANT>(a);
  if (c.chunk_begin >= c.chunk_end) return;  // whole block: no barrier skipped by half of it

  const int n_tiles = ceil_div(c.chunk_end - c.chunk_begin, Tl::kTileTokens);
  // Prologue: the first kStages - 1 tiles in flight (one commit group each,
  // empty past the chunk, so the group count stays in step with the tiles).
#pragma unroll
  for (int t = 0; t < Tl::kStages - 1; ++t) {
    if (t < n_tiles) cascade_prefix::prefix_load_tile(a, c, t, t, tracer);
    ptx::cp_async_commit();
  }
  cascade_prefix::prefix_q_to_smem(a, c, tracer);
  const cascade_prefix::PrefixAlibi al = cascade_prefix::prefix_alibi(a, c, tracer);

  const bool warp_active = c.row0 + c.warp * Tl::kRowsPerWarp < c.num_rows;
  // Q A-fragments for all head dims, in registers for the whole chunk (mma_8warps).
  std::uint32_t qreg[C::kQInRegs ? Tl::kHead / 16 : 1][4];
  if constexpr (C::kQInRegs) {
    __syncthreads();  // the Q tile is in shared memory
    PA_TRACE_BARRIER(tracer, barrier_event(c.tc));
#pragma unroll
    for (int kk = 0; kk < Tl::kHead / 16; ++kk) cascade_prefix::prefix_q_frag(c, kk, kk, qreg[kk], tracer);
  }
  const float scale_log2 = a.scale * kLog2e;  // exp(x) = exp2(x * log2 e)
  cascade_prefix::PrefixAccum<Cfg, VARIANT> acc;
#pragma unroll
  for (int dn = 0; dn < C::kDN; ++dn) acc.o[dn][0] = acc.o[dn][1] = acc.o[dn][2] = acc.o[dn][3] = 0.f;
  acc.m[0] = acc.m[1] = -INFINITY;
  acc.l[0] = acc.l[1] = acc.lr[0] = acc.lr[1] = 0.f;

  for (int tile = 0; tile < n_tiles; ++tile) {
    // Wait for this tile's group (kStages - 1 + tile groups committed so far,
    // tiles 0 .. tile + kStages - 2: the newest kStages - 2 may stay in flight);
    // the barrier then also says every warp is done with the previous tile's
    // buffer, which the copy issued right after refills. One barrier per tile.
    ptx::cp_async_wait<Tl::kStages - 2>();
    __syncthreads();
    PA_TRACE_BARRIER(tracer, barrier_event(c.tc));
    {
      const int ahead = tile + Tl::kStages - 1;
      if (ahead < n_tiles) cascade_prefix::prefix_load_tile(a, c, ahead, ahead % Tl::kStages, tracer);
      ptx::cp_async_commit();  // always: the group count stays in step with the tiles
    }
    if (warp_active) {
      const std::uint32_t ks = c.smem_base + Tl::k_tile_byte(tile % Tl::kStages);
      const std::uint32_t vs = c.smem_base + Tl::v_tile_byte(tile % Tl::kStages);
      const int valid = min(Tl::kTileTokens, c.chunk_end - (c.chunk_begin + tile * Tl::kTileTokens));
      float s[C::kNT][4];
      cascade_prefix::prefix_qk_mma(c, tile, ks, qreg, s, tracer);
      cascade_prefix::prefix_online_softmax(c, tile, valid, scale_log2, al, s, acc, tracer);
      cascade_prefix::prefix_pv_mma(c, tile, vs, s, acc, tracer);
    }
  }
  ptx::cp_async_wait<0>();

  if (!warp_active) return;
  cascade_prefix::prefix_store(a, c, acc, tracer);
}

// Prefix kernel launch: grid (query tiles, KV heads, chunks), the variant's
// warps (Tl::kNumThreads: 128 or 256 threads).
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

}  // namespace pa::kernels
