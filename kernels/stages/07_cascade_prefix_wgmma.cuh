// Stage 7 cascade prefix kernel on Hopper's warpgroup tensor-core
// instructions (wgmma, sm_90a): the same computation as cascade_prefix_kernel
// (07_cascade_prefix_mma.cuh: chunked S = Q K^T, online softmax, O += P V, a
// V2-style partition per chunk), the default prefix kernel where wgmma runs.
//
// Why: with mma.sync every warp ldmatrix-reads the whole K and V tile for its
// 16 query rows, so shared-memory reads (256 bytes per m16n8k16) limit the
// kernel before the tensor cores do (H100: ~190 TFLOP/s, kernels/NOTES.md).
// wgmma reads its B operand from shared memory once per warpgroup of 64 rows
// and runs at twice mma.sync's rate.
//
// Thread mapping: grid (query tile of 128 rows, KV head, prefix chunk), 12
// warps = 3 warpgroups. Warpgroups 0 and 1 consume: warpgroup g owns rows
// [64g, 64g + 64), warp w of it rows [16w, 16w + 16) (the wgmma fragment
// layout, identical to mma.sync's per warp, so the softmax code is the same).
// Warpgroup 2 produces: it copies the K/V tiles with 16-byte cp.async into
// wgmma's K-major layouts (PrefixWgmmaTiling in pa/index/cascade.hpp: K
// unswizzled, V in rows of a whole cache block under wgmma's swizzle, so that
// every 128-byte line of the cache lands in one 128-byte span of shared
// memory and L2 serves the copies in whole-line requests), 4 tile buffers,
// and hands them over through mbarriers, so no block-wide barrier is left in
// the loop. Per tile and consumer warpgroup: 8 wgmma m64n64k16 (S, 64 rows x
// 64 tokens, A = Q from registers), the online softmax in registers while
// O += P V of the previous tile (4 wgmma m64n128k16, A = P from registers)
// runs on the tensor cores.
//
// Ordering: cp.async writes go through the generic proxy and wgmma reads
// through the async proxy, so the producer fences (fence.proxy.async) its
// copies once they landed and before it arrives on the tile's mbarrier.
#pragma once
#include "07_cascade_prefix_mma.cuh"

namespace pa::kernels {

template <class T, int N> struct Wgmma;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || !defined(__CUDA_ARCH__)
template <> struct Wgmma<__half, 64> {
  __device__ static __forceinline__ void mma(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
  }
};
template <> struct Wgmma<__half, 128> {
  __device__ static __forceinline__ void mma(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
  }
};
template <> struct Wgmma<__nv_bfloat16, 64> {
  __device__ static __forceinline__ void mma(float (&d)[32], const std::uint32_t (&a)[4], std::uint64_t desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
  }
};
template <> struct Wgmma<__nv_bfloat16, 128> {
  __device__ static __forceinline__ void mma(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t desc, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));
  }
};
#endif

// 2^x in one MUFU.EX2 (results under 2^-126 flush to 0: negligible weights).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Accumulators are written by the asynchronous wgmma: keep the compiler from
// moving reads of them above the wait (and writes below the next issue).
template <int N>
__device__ __forceinline__ void accum_fence(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Likewise for A fragments: written before the wgmma fence, not sunk below it.
template <int K>
__device__ __forceinline__ void frag_fence(std::uint32_t (&a)[K][4]) {
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[k][i])::"memory");
}
// Shared-memory matrix descriptor: start address, LBO, SBO (all >> 4) and
// the swizzle mode (bits 62-63; 0 = none). Base offset 0: swizzled tiles are
// 1024-byte aligned.
__device__ __forceinline__ std::uint64_t wgmma_desc(std::uint32_t smem_addr, int lbo, int sbo, int swizzle_mode = 0) {
  return static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32) | (static_cast<std::uint64_t>(swizzle_mode & 3) << 62);
}

// What a wgmma prefix block works on: grid (query tile, KV head, prefix
// chunk) -> its KV head, chunk, GQA ratio, query rows of the KV head, first row
// and token range (empty past the prefix: the block returns at once).
template <class Tl>
struct WgmmaBlock {
  int kvh, chunk, ratio, num_rows, row0, chunk_begin, chunk_end, n_tiles;
  __device__ __forceinline__ explicit WgmmaBlock(const PrefixArgs& a)
      : kvh(blockIdx.y), chunk(blockIdx.z), ratio(a.num_heads / a.num_kv_heads),
        num_rows(Tl::rows_per_kv_head(a.num_seqs, ratio)), row0(blockIdx.x * Tl::kRows), chunk_begin(chunk * a.chunk_len),
        chunk_end(min(a.prefix_len, chunk_begin + a.chunk_len)),
        n_tiles(chunk_begin < chunk_end ? ceil_div(chunk_end - chunk_begin, Tl::kTileTokens) : 0) {}
  // Tokens of tile `tile` inside the chunk (fewer than a tile only for the last).
  __device__ __forceinline__ int valid_tokens(int tile) const {
    return min(Tl::kTileTokens, chunk_end - (chunk_begin + tile * Tl::kTileTokens));
  }
  // Whether warpgroup wg has a query row (the others compute on zero Q and store nothing).
  __device__ __forceinline__ bool warpgroup_has_rows(int wg) const { return row0 + wg * Tl::kRowsPerWarpgroup < num_rows; }
  // The launch grid the constructor reads (query tiles, KV heads, prefix chunks).
  static dim3 grid(const PrefixArgs& a) {
    return dim3(Tl::num_query_tiles(a.num_seqs, a.num_heads / a.num_kv_heads), a.num_kv_heads,
                ceil_div(a.prefix_len, a.chunk_len));
  }
};

// Q of the block's rows into shared memory (zeros past the group), then each
// warp's 16 rows into A fragments of S = Q K^T. The caller publishes q_s
// (barrier) between the two. Rows are read in 16-byte chunks, all of a
// thread's loads issued before its stores (one memory round trip, not one per
// element); a query whose rows are not 16-byte aligned is read element by element.
template <class Tl, class T>
__device__ __forceinline__ void wgmma_stage_q(const PrefixArgs& a, T* q_s, int tid, const WgmmaBlock<Tl>& blk) {
  const int row0 = blk.row0, kvh = blk.kvh, ratio = blk.ratio, num_rows = blk.num_rows;
  const T* q = static_cast<const T*>(a.q);
  constexpr int kChunksPerRow = Tl::kHead / 8;
  constexpr int kPerThread = Tl::kRows * kChunksPerRow / Tl::kNumThreads;
  static_assert(Tl::kRows * kChunksPerRow % Tl::kNumThreads == 0, "whole chunks per thread");
  if (a.qg.q_stride % 8 == 0 && reinterpret_cast<std::uintptr_t>(q) % 16 == 0) {
    uint4 v[kPerThread];
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = tid + i * Tl::kNumThreads, r = e / kChunksPerRow, d = (e % kChunksPerRow) * 8, grow = row0 + r;
      v[i] = make_uint4(0u, 0u, 0u, 0u);
      if (grow < num_rows)
        v[i] = __ldg(reinterpret_cast<const uint4*>(q + a.qg.q_offset(Tl::row_seq(grow, ratio), Tl::row_head(grow, kvh, ratio), d)));
    }
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int e = tid + i * Tl::kNumThreads, r = e / kChunksPerRow, d = (e % kChunksPerRow) * 8;
      *reinterpret_cast<uint4*>(q_s + Tl::q_smem_elem(r, d)) = v[i];  // a chunk stays 8 contiguous elements
    }
    return;
  }
  for (int e = tid; e < Tl::kRows * Tl::kHead; e += Tl::kNumThreads) {
    const int r = e / Tl::kHead, d = e % Tl::kHead, grow = row0 + r;
    T v = from_float<T>(0.f);
    if (grow < num_rows) v = q[a.qg.q_offset(Tl::row_seq(grow, ratio), Tl::row_head(grow, kvh, ratio), d)];
    q_s[Tl::q_smem_elem(r, d)] = v;
  }
}
template <class Tl, class T>
__device__ __forceinline__ void wgmma_load_q_frags(const T* q_s, int warp, int lane, std::uint32_t (&qreg)[Tl::kHead / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < Tl::kHead / 16; ++kk)
    ptx::ldmatrix_x4(qreg[kk], ptx::smem_u32(q_s + Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))));
}

// The chunk's partial state of this thread's rows: O / l, the max (natural
// log units) and l, as partition `chunk` (the V2 reduce merges them). l is a
// per-thread partial sum, reduced over the row's 4 lanes here.
template <class Tl>
__device__ __forceinline__ void wgmma_store_chunk_state(const PrefixArgs& a, const float (&o)[Tl::kHead / 2], const float (&m)[2],
                                                        float (&l)[2], const WgmmaBlock<Tl>& blk, int warp, int lane) {
  const int row0 = blk.row0, kvh = blk.kvh, chunk = blk.chunk, ratio = blk.ratio;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    const int grow = row0 + warp * 16 + Tl::frag_row(lane, 2 * i);
    if (grow >= blk.num_rows) continue;
    const int seq = Tl::row_seq(grow, ratio), head = Tl::row_head(grow, kvh, ratio);
    const float inv = 1.f / l[i];
#pragma unroll
    for (int dn = 0; dn < Tl::kHead / 8; ++dn) {
      const int d = dn * 8 + Tl::frag_col(lane, 0);
      *reinterpret_cast<float2*>(a.part_out + a.pg.out_offset(seq, head, chunk, d)) =
          make_float2(o[dn * 4 + 2 * i] * inv, o[dn * 4 + 2 * i + 1] * inv);
    }
    if (lane % 4 == 0) {
      a.part_max[a.pg.stat_offset(seq, head, chunk)] = m[i] * kLn2;
      a.part_sum[a.pg.stat_offset(seq, head, chunk)] = l[i];
    }
  }
}

// Tokens past `valid` (a partial last tile) set to -inf in S, then each of
// the thread's two rows' max over the tile (raw logits; reduced over the
// row's 4 lanes by the caller).
template <class Tl>
__device__ __forceinline__ void wgmma_mask_tile_max(float (&s)[Tl::kTileTokens / 2], int valid, int lane, float (&mx)[2]) {
  constexpr int kNT = Tl::kTileTokens / 8;
  if (valid < Tl::kTileTokens) {
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (nt * 8 + Tl::frag_col(lane, j) >= valid) s[nt * 4 + j] = -INFINITY;
  }
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) mx[j / 2] = fmaxf(mx[j / 2], s[nt * 4 + j]);
}

// With ALiBi: S in log2 units with each row's bias added (tokens from tok0,
// the tile's first token in the sequence), -inf past `valid`, then the rows'
// max over the tile, as wgmma_mask_tile_max does for raw logits.
template <class Tl>
__device__ __forceinline__ void wgmma_alibi_tile_max(float (&s)[Tl::kTileTokens / 2], int valid, int lane,
                                                     float scale_log2, const cascade_prefix::PrefixAlibi& al, int tok0,
                                                     float (&mx)[2]) {
  constexpr int kNT = Tl::kTileTokens / 8;
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int t = nt * 8 + Tl::frag_col(lane, j);
      const float biased = s[nt * 4 + j] * scale_log2 + alibi_bias(al.slope_log2[j / 2], tok0 + t, al.context_len[j / 2]);
      s[nt * 4 + j] = t < valid ? biased : -INFINITY;
      mx[j / 2] = fmaxf(mx[j / 2], s[nt * 4 + j]);
    }
}

// O's two rows of this thread (fragment rows lane / 4 and + 8) times corr[0], corr[1].
template <class Tl>
__device__ __forceinline__ void wgmma_scale_o(float (&o)[Tl::kHead / 2], const float (&corr)[2]) {
#pragma unroll
  for (int dn = 0; dn < Tl::kHead / 8; ++dn) {
    o[dn * 4 + 0] *= corr[0];
    o[dn * 4 + 1] *= corr[0];
    o[dn * 4 + 2] *= corr[1];
    o[dn * 4 + 3] *= corr[1];
  }
}

// ---- the pipeline -------------------------------------------------------------
// Iteration t issues S(t) = Q K(t)^T and then O += P(t-1) V(t-1) (P of the
// previous tile, still in registers), waits for S only, runs the softmax of
// tile t while the PV product computes, and only then waits for it and
// rescales O (the scheduling FlashAttention-3 calls intra-warpgroup overlap;
// written here from its description): the tensor cores do not idle during the
// softmax. One S register set: the exponentials overwrite S in place once its
// wgmma is done; P is packed from it after the PV wait. The row sum l is of
// the exact exponentials (as FlashAttention's), not of the fp16/bf16-rounded
// P; the difference is within the rounding of P. V(t-1) stays in use during
// iteration t, so kWgAhead tiles in flight beyond the one in use take
// kWgAhead + 2 buffers (2: 4 x 32 KB of K/V tiles and 32 KB of Q at head 128).
inline constexpr int kWgAhead = 2;
// The lazy rescaling slack (log2 units): P <= 2^8 = 256, far inside fp16's
// and bf16's range.
inline constexpr float kWgRescaleSlack = 8.f;
template <class Cfg>
using WgmmaPrefixTiling = PrefixWgmmaTiling<Cfg, 64, kWgAhead + 2, 2>;

// The softmax of one tile in log2 units, P = exp2 written over S.
// Lazy rescaling: the reference max m moves only when the tile's max exceeds
// it by more than kWgRescaleSlack, so P stays below 2^kWgRescaleSlack and O's
// rescale (64 multiplies per thread) is skipped whenever no row of the warp
// moved, which after the first tiles is almost always. (m, l, O) stay one
// consistent state: O / l and m + log l are exact. Returns whether any row of
// the warp moved; corr = the factor O's rows must be multiplied by.
// With ALiBi (al.on) S is first turned into biased log2 units
// (wgmma_alibi_tile_max), so `unit`, what turns S into log2 units, is 1.
template <class Tl>
__device__ __forceinline__ bool wgmma_lazy_softmax(float (&s)[Tl::kTileTokens / 2], int valid, int lane, float scale_log2,
                                                   const cascade_prefix::PrefixAlibi& al, int tok0, float (&m)[2], float (&l)[2],
                                                   float (&corr)[2]) {
  constexpr int kNT = Tl::kTileTokens / 8;
  float mx[2];
  if (al.on)
    wgmma_alibi_tile_max<Tl>(s, valid, lane, scale_log2, al, tok0, mx);
  else
    wgmma_mask_tile_max<Tl>(s, valid, lane, mx);
  const float unit = al.on ? 1.f : scale_log2;
  bool moved = false;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    corr[i] = 1.f;
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float tile_max = mx[i] * unit;  // finite: every tile has a valid token
    if (tile_max > m[i] + kWgRescaleSlack) {
      corr[i] = rescale<LogBase::two>(m[i], tile_max);  // 0 on the first tile (m = -inf)
      m[i] = tile_max;
      l[i] *= corr[i];
      moved = true;
    }
  }
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      s[nt * 4 + j] = fast_exp2(fmaf(s[nt * 4 + j], unit, -m[j / 2]));
      l[j / 2] += s[nt * 4 + j];
    }
  return __any_sync(0xffffffffu, moved);
}
// O *= corr (only if a row of the warp moved: wgmma_scale_o), then P packed in pairs into
// the A fragments of O += P V: pair (nt, row half h) -> pa[nt / 2][2 (nt % 2) + h].
template <class Tl, class T>
__device__ __forceinline__ void wgmma_rescale_pack(float (&o)[Tl::kHead / 2], const float (&corr)[2], bool moved,
                                                   const float (&s)[Tl::kTileTokens / 2],
                                                   std::uint32_t (&pa)[Tl::kTileTokens / 16][4]) {
  if (moved) wgmma_scale_o<Tl>(o, corr);
#pragma unroll
  for (int nt = 0; nt < Tl::kTileTokens / 8; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h) pa[nt / 2][2 * (nt % 2) + h] = ptx::pack2<T>(s[nt * 4 + 2 * h], s[nt * 4 + 2 * h + 1]);
}

// ---- the producer warpgroup
// When every thread copied (kernels/NOTES.md, cascade changes: ncu's
// per-instruction stall samples), the copy code (address math, 8 cp.async per
// thread and tile) was a third of the consumer warps' instructions, registers
// that fed an in-flight cp.async stalled their next writer, and the
// block-wide barrier per tile held both warpgroups in lockstep. So a third
// warpgroup does all copies: it waits
// until a buffer is free (mbarrier "empty": one arrival per consumer warp once
// its wgmma reading that tile completed), copies the tile (16 cp.async per
// thread, addresses from immediates), waits for its own copies, fences them
// for the async proxy and arrives on the buffer's "full" mbarrier, which the
// consumer warps wait on. No block-wide barrier in the loop: the two consumer
// warpgroups drift. (One producer warp instead needs <= 170 registers for
// all: 9 warps put 3 on one SM sub-partition, and ptxas then serializes wgmma.)
template <class Tl>
PA_HD constexpr int overlap_barrier_bytes() { return 2 * Tl::kStages * 8; }  // full[stages], empty[stages]

// The producer warpgroup's copy of one tile into buffer `stage`: producer
// thread p copies chunks j * 128 + p of each block's region (K and V). The
// chunk -> shared byte maps differ from the thread's own by a thread-
// independent constant (the tile-map test checks it), so every copy is one
// cp.async with immediate offsets. phys_lanes: lane b holds block b's entry.
inline constexpr int kWgProducerThreads = 128;
template <class Tl, class T>
__device__ __forceinline__ void wgmma_producer_copy(const PrefixArgs& a, int kvh, int p, int phys_lanes,
                                                    std::uint32_t smem_base, int stage, int tile_token0,
                                                    int chunk_end) {
  constexpr int kP = kWgProducerThreads;
  static_assert(Tl::kChunksPerBlock % kP == 0, "whole producer passes per block");
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  const std::uint32_t ks = smem_base + Tl::k_tile_byte(stage) + Tl::k_copy_byte(p);
  const std::uint32_t vs = smem_base + Tl::v_tile_byte(stage) + Tl::v_copy_byte(p);
#pragma unroll
  for (int b = 0; b < Tl::kBlocksPerTile; ++b) {
    const int phys = __shfl_sync(0xffffffffu, phys_lanes, b);
    const bool valid = phys >= 0;  // blocks past the chunk: zero-filled
    const std::int64_t base = Tl::region_chunk_offset(a.cg, valid ? phys : 0, kvh, p);
#pragma unroll
    for (int j = 0; j < Tl::kChunksPerBlock / kP; ++j) {
      const int c0 = b * Tl::kChunksPerBlock + j * kP;  // this thread's chunk: c0 + p
      ptx::cp_async_16(ks + (Tl::k_copy_byte(c0) - Tl::k_copy_byte(0)), k_cache + base + j * kP * 8, valid ? 16 : 0);
      // V: only the span's tokens (a partial last page: prefix_v_copy_bytes).
      const int v_token = tile_token0 + b * Tl::kBlock + ((p + j * kP) * 8) % Tl::kBlock;
      ptx::cp_async_16(vs + (Tl::v_copy_byte(c0) - Tl::v_copy_byte(0)), v_cache + base + j * kP * 8,
                       valid ? prefix_v_copy_bytes(v_token, chunk_end) : 0);
    }
  }
}
// Warpgroup register budgets (setmaxnreg, sm_90a): launched at
// 168 per thread (384 threads fill the 65536-register file), the producer
// gives back to 40 and the consumers take 232 (4 x 32 x (40 + 2 x 232) =
// 64512 per SM sub-partition set: each sub-partition holds one warp of each
// warpgroup). Below 232 ptxas serializes the wgmma instructions (C7512).
inline constexpr int kWgProducerRegs = 40;
inline constexpr int kWgConsumerRegs = 232;

// The kernel: 256 consumer threads + the producer warpgroup. Timing hooks
// (PA_TIME_*, nothing at all without a timing tracer): a producer warp ends a
// prefix_load span per tile whose copies it issued (iter t; in the same span
// it publishes tile t - kAhead + 1, and the last span, iter n_tiles, drains
// the copies still in flight); a consumer warp ends prefix_load when Q is in its
// registers, then per tile prefix_qk once S(tile) is done (the wait for the
// tile's copies and the S wgmma) and prefix_softmax once the softmax and the
// wait for O += P V of the previous tile are done (the P V wgmma runs
// asynchronously inside these two spans, so it has no span of its own until
// the last tile's, prefix_pv), then prefix_store.
template <class Cfg, class Tracer = NullTracer>
__global__ void __launch_bounds__(WgmmaPrefixTiling<Cfg>::kNumThreads + kWgProducerThreads, 1)
    cascade_prefix_wgmma_kernel(const PrefixArgs a, Tracer tracer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Tl = WgmmaPrefixTiling<Cfg>;
  using T = Elem<Cfg>;
  constexpr int kNT = Tl::kTileTokens / 8;  // 8-token column blocks of S
  constexpr int kO = Tl::kHead / 2;         // O accumulators per thread
  constexpr int kAhead = Tl::kStages - 2;   // tiles t-1 (V in use), t, and t+1 .. t+kAhead (in flight)
  static_assert(kAhead >= 1, "at least one tile in flight");
  extern __shared__ float4 cascade_smem[];
  T* q_s = reinterpret_cast<T*>(cascade_smem);
  const std::uint32_t smem_base = ptx::smem_u32(cascade_smem);
  const std::uint32_t full_bar = smem_base + Tl::kSmemBytes;    // + 8 * stage
  const std::uint32_t empty_bar = full_bar + 8 * Tl::kStages;  // + 8 * stage

  PA_TIME_START(tracer);
  const int tid = threadIdx.x, warp = tid / kWarpSize, lane = tid % kWarpSize;
  const int wg = warp / 4;
  const WgmmaBlock<Tl> blk(a);
  const int n_tiles = blk.n_tiles;
  if (n_tiles == 0) return;  // whole block: past the prefix

  // wgmma swizzles V by absolute address bits: the tiles' offsets are
  // multiples of 1024 (PrefixWgmmaTiling), so the window must be too.
  if (tid == 0 && smem_base % 1024 != 0) __trap();
  if (tid == 0)
    for (int st = 0; st < Tl::kStages; ++st) {
      ptx::mbar_init(full_bar + 8 * st, kWgProducerThreads);  // every producer thread, after its copies landed
      ptx::mbar_init(empty_bar + 8 * st, Tl::kNumWarps);  // every consumer warp, after its last read
    }
  // The barriers are initialised before anyone uses them, and the producer
  // starts copying while the consumers stage Q (they publish it among
  // themselves with a named barrier: the producer never waits for Q).
  __syncthreads();

  // The producer warpgroup.
  auto produce = [&]() {
    const int p = tid - Tl::kNumThreads;
    // Block-table entries of a tile: lane b < kBlocksPerTile holds block b's,
    // read one tile ahead (the copy would wait an L2 round trip otherwise).
    auto fetch = [&](int tile) {
      const int token = blk.chunk_begin + tile * Tl::kTileTokens + lane * Tl::kBlock;
      return (lane < Tl::kBlocksPerTile && token < blk.chunk_end) ? __ldg(a.prefix_blocks + token / Tl::kBlock) : -1;
    };
    int phys_next = fetch(0);
    for (int t = 0; t < n_tiles; ++t) {
      const int stage = t % Tl::kStages;
      if (t >= Tl::kStages) ptx::mbar_wait(empty_bar + 8 * stage, ((t / Tl::kStages) + 1) & 1);  // tile t - kStages released
      const int phys = phys_next;
      if (t + 1 < n_tiles) phys_next = fetch(t + 1);
      wgmma_producer_copy<Tl, T>(a, blk.kvh, p, phys, smem_base, stage, blk.chunk_begin + t * Tl::kTileTokens,
                                 blk.chunk_end);
      ptx::cp_async_commit();
      if (t >= kAhead - 1) {  // tile t - kAhead + 1 landed: publish it
        ptx::cp_async_wait<kAhead - 1>();
        ptx::fence_proxy_async_smem();  // this lane's copies, visible to the async proxy (wgmma)
        ptx::mbar_arrive(full_bar + 8 * ((t - kAhead + 1) % Tl::kStages));
      }
      PA_TIME_PHASE(tracer, trace::Phase::prefix_load, t);
    }
    ptx::cp_async_wait<0>();
    ptx::fence_proxy_async_smem();
    for (int t = max(0, n_tiles - kAhead + 1); t < n_tiles; ++t) ptx::mbar_arrive(full_bar + 8 * (t % Tl::kStages));
    PA_TIME_PHASE(tracer, trace::Phase::prefix_load, n_tiles);
  };

  // The consumer warpgroups.
  auto consume = [&]() {
    wgmma_stage_q<Tl>(a, q_s, tid, blk);
    asm volatile("bar.sync 1, %0;\n" ::"n"(Tl::kNumThreads) : "memory");  // the consumer warps only
    std::uint32_t qreg[Tl::kHead / 16][4];
    wgmma_load_q_frags<Tl>(q_s, warp, lane, qreg);
    PA_TIME_PHASE(tracer, trace::Phase::prefix_load, -1);
    const float scale_log2 = a.scale * kLog2e;
    const cascade_prefix::PrefixAlibi al = cascade_prefix::prefix_alibi_rows<Tl>(a, blk.row0 + warp * 16, blk.num_rows, blk.ratio, blk.kvh,
                                                                 lane, TraceCtx{}, tracer);
    float o[kO];
#pragma unroll
    for (int i = 0; i < kO; ++i) o[i] = 0.f;
    float m[2] = {-INFINITY, -INFINITY};
    float l[2] = {0.f, 0.f};
    float s[kNT * 4];
    std::uint32_t pa[Tl::kTileTokens / 16][4];  // P of the previous tile (A of O += P V)
#pragma unroll
    for (int k = 0; k < Tl::kTileTokens / 16; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) pa[k][i] = 0u;

    auto issue_pv = [&](int tile) {
      const std::uint32_t vs = smem_base + Tl::v_tile_byte(tile % Tl::kStages);
#pragma unroll
      for (int kk = 0; kk < Tl::kTileTokens / 16; ++kk)
        Wgmma<T, Tl::kHead>::mma(o, pa[kk], wgmma_desc(vs + Tl::v_step_byte(kk), Tl::kVLbo, Tl::kVSbo, Tl::kVSwizzleMode), 1);
      ptx::wgmma_commit();
    };
    // Waits for tile `tile` to land, issues S(tile) = Q K(tile)^T.
    auto begin_tile = [&](int tile) {
      ptx::mbar_wait(full_bar + 8 * (tile % Tl::kStages), (tile / Tl::kStages) & 1);
      const std::uint32_t ks = smem_base + Tl::k_tile_byte(tile % Tl::kStages);
      accum_fence(s);
      accum_fence(o);
      frag_fence(pa);
      ptx::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Tl::kHead / 16; ++kk)  // kk 0 overwrites S: no zeroing
        Wgmma<T, Tl::kTileTokens>::mma(s, qreg[kk], wgmma_desc(ks + Tl::k_step_byte(kk), Tl::kKLbo, Tl::kKSbo), kk > 0 ? 1 : 0);
      ptx::wgmma_commit();
    };
    // S(tile) is done: the softmax writes P = exp2 over S while
    // O += P(tile - 1) V(tile - 1) may still run; then the wait for that product
    // (its buffer is released), O's rescale and P packed into the A fragments.
    auto finish_tile = [&](int tile) {
      accum_fence(s);
      const int valid = blk.valid_tokens(tile);
      float corr[2];
      const bool moved = wgmma_lazy_softmax<Tl>(s, valid, lane, scale_log2, al, blk.chunk_begin + tile * Tl::kTileTokens,
                                                m, l, corr);
      ptx::wgmma_wait<0>();  // O += P(tile - 1) V(tile - 1) done: O and pa may be written
      if (tile > 0 && lane == 0) ptx::mbar_arrive(empty_bar + 8 * ((tile - 1) % Tl::kStages));
      accum_fence(o);
      wgmma_rescale_pack<Tl, T>(o, corr, moved, s, pa);
    };

    // Tile 0 peeled (no P yet): a branch around wgmma makes ptxas serialize them.
    begin_tile(0);
    ptx::wgmma_wait<0>();
    PA_TIME_PHASE(tracer, trace::Phase::prefix_qk, 0);
    finish_tile(0);
    PA_TIME_PHASE(tracer, trace::Phase::prefix_softmax, 0);
    for (int tile = 1; tile < n_tiles; ++tile) {
      begin_tile(tile);
      issue_pv(tile - 1);
      ptx::wgmma_wait<1>();  // S(tile) done; the PV product may still run
      PA_TIME_PHASE(tracer, trace::Phase::prefix_qk, tile);
      finish_tile(tile);
      PA_TIME_PHASE(tracer, trace::Phase::prefix_softmax, tile);
    }
    accum_fence(o);
    frag_fence(pa);
    ptx::wgmma_fence();
    issue_pv(n_tiles - 1);
    ptx::wgmma_wait<0>();
    accum_fence(o);
    PA_TIME_PHASE(tracer, trace::Phase::prefix_pv, n_tiles - 1);

    if (!blk.warpgroup_has_rows(wg)) return;
    wgmma_store_chunk_state<Tl>(a, o, m, l, blk, warp, lane);
    PA_TIME_PHASE(tracer, trace::Phase::prefix_store, -1);
  };

  if (warp >= Tl::kNumWarps) {  // each warpgroup's role: one branch (setmaxnreg)
    ptx::setmaxnreg_dec<kWgProducerRegs>();
    produce();
  } else {
    ptx::setmaxnreg_inc<kWgConsumerRegs>();
    consume();
  }
#else
  __trap();  // built only for sm_90a (07_cascade_prefix_wgmma.cu)
#endif
}

// Returns the launch's warps.
template <class Cfg, class Tracer = NullTracer>
unsigned launch_cascade_prefix_wgmma(const PrefixArgs& a, cudaStream_t stream, Tracer tracer = {}) {
  using Tl = WgmmaPrefixTiling<Cfg>;
  auto kernel = &cascade_prefix_wgmma_kernel<Cfg, Tracer>;
  const int smem = Tl::kSmemBytes + overlap_barrier_bytes<Tl>();
  PA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid = WgmmaBlock<Tl>::grid(a);
  constexpr int kThreads = Tl::kNumThreads + kWgProducerThreads;
  kernel<<<grid, kThreads, smem, stream>>>(a, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
  return grid.x * grid.y * grid.z * (kThreads / kWarpSize);
}

}  // namespace pa::kernels
