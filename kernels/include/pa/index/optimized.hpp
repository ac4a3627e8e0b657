// Index math of stage 8, the optimized decode kernel (kernels/stages/08_optimized.cuh).
//
// Mapping: one CTA per (sequence, "unit", split), where a unit is one KV head
// and up to 16 of the query heads of its GQA group (units = kv_heads *
// head_chunks; head_chunks > 1 only when the group has more than 16 query
// heads). The split is a contiguous range of logical blocks. The CTA's warps
// take "steps" of kStepTokens tokens (one block, or two 8-token blocks; with
// an fp8 cache 32 tokens, two blocks of 16 or one of 32)
// round-robin: warp w handles steps w, w + kNumWarps, ... of the split.
// Each step's K and V tiles (whole (block, kv head) tiles: contiguous in
// vLLM's caches, one 16-byte-aligned row per token in nhd / hnd) are copied
// into the warp's own shared-memory stage by 16-byte cp.async; QK and PV run
// on tensor cores (mma.m16n8k16) fed by ldmatrix from those stages (with an
// fp8 cache: by 4-byte shared loads and cvt to 16-bit values). Every layout
// lands K in the same shared-memory order (a token's dim chunks, token by
// token), so QK is one code; V lands dim-major from vLLM's cache and
// token-major from nhd / hnd, which PV reads with ldmatrix.trans.
//
// Everything here is plain integer math, shared by the kernel, its tests and
// the benchmark's byte counts.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "pa/index/dtype.hpp"
#include "pa/index/hd.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"

namespace pa {

// The lean pipeline (PIPE_KB below), 64 KB: stage 8 as the cascade's suffix,
// which streams on a side stream while the prefix kernel runs. It was sized
// for a suffix CTA to share an SM with a prefix block: on sm_90 an SM has
// 228 KB of shared memory (each resident block reserves 1 KB more) and the
// automatic 3-stage head-128 CTA takes 96.3 KB, the lean one 64.3 with its
// statistics. The wgmma prefix block (Q 32 KB + 4 x 32 KB tiles, 384 threads
// filling the register file: 07_cascade_prefix_wgmma.cuh) leaves no room for
// one, so the two kernels share the GPU by SMs, not within one; the lean
// pipeline stays the cascade's suffix because it still measured fastest there
// (kernels/NOTES.md, the cascade's plans).
// (A "deep" 192 KB pipeline for grids of one CTA per SM was tried and measured
// slower at (1,32,8,4096): kernels/NOTES.md.)
inline constexpr int kOptLeanPipeKB = 64;

// Stage 8 copies a block's V rows (block_size tokens of one dim) in 16-byte
// chunks of 16 / kv_bytes elements, so a row must be whole chunks: any block
// size of a 2-byte cache, 16 and 32 of an fp8 one (an 8-token fp8 row is half
// a chunk). OptConfig asserts it; the trace host model dispatches by it.
PA_HD constexpr bool opt_block_size_ok(int block_size, int kv_bytes) { return block_size % (16 / kv_bytes) == 0; }
static_assert(opt_block_size_ok(8, 2) && opt_block_size_ok(16, 1) && opt_block_size_ok(32, 1) &&
                  !opt_block_size_ok(8, 1),
              "2-byte caches: every block size; fp8: 16 and 32, not 8");

// A step's tokens: at least 16 (the k of the PV mma), whole blocks; with an
// fp8 cache at least 32, so that a step moves as many bytes as a 16-token
// fp16 step and the per-step work that does not grow with the tokens (the
// softmax's max reduction, rescaling O, the pipeline's bookkeeping) costs the
// same per byte read. Its bytes: K and V of those tokens for one kv head.
PA_HD constexpr int opt_step_tokens(int block_size, int kv_bytes) { return cmax(block_size, kv_bytes == 1 ? 32 : 16); }
PA_HD constexpr int opt_step_bytes(int head_size, int block_size, int kv_bytes) {
  return 2 * head_size * opt_step_tokens(block_size, kv_bytes) * kv_bytes;
}

// The split merge's states per round (OptConfig::kMergeSplits): this many in
// flight per thread, one L2 round trip, when a thread merges one item at a
// time (half as many, over several items, in opt_merge_batch's batches). The
// split planner charges one item at a time, an upper bound where the merge
// batches items: its constants are fitted to sweeps of both GPUs, so that
// changes only with both measured again (kernels/NOTES.md, "The split merge
// batches items").
PA_HD constexpr int opt_merge_splits(int kv_bytes) { return kv_bytes == 1 ? 8 : 16; }

// Warps per CTA (OptConfig's NUM_WARPS = 0; the trace's bounds): 4, and 8
// for an fp8 cache where a step is 4 KB of K + V (head 64: 32 tokens). The
// ~96 KB pipeline then holds 3 stages of 8 warps instead of 6 of 4: the same
// bytes in flight per SM, with twice the warps to issue from while copies are
// outstanding (the head-64 fp8 loop, which converts every element it loads,
// is latency bound at 2 warps per scheduler). Measured on an H200
// (kernels/NOTES.md, "fp8 KV caches"): bf16 queries on an fp8 cache 11%
// faster, fp16 queries 2% slower, a 16-bit cache level. A 16-bit cache keeps 4
// warps at every head size: its output must stay bit-equal across the KV
// layouts, and a warp's steps (w, w + warps, ...) fix its summation order.
// (8 warps of 3 stages where a step is 8 KB, head 128: one 192 KB CTA per SM,
// was measured on an H200 no faster below a wave and 3-17% slower on full
// waves: kernels/NOTES.md, "Stage 8 at 8 warps".)
PA_HD constexpr int opt_num_warps(int head_size, int block_size, int kv_bytes, bool token_rows) {
  return kv_bytes == 1 && !token_rows && opt_step_bytes(head_size, block_size, kv_bytes) <= 4096 ? 8 : 4;
}
static_assert(opt_num_warps(64, 16, 1, false) == 8 && opt_num_warps(64, 32, 1, false) == 8 &&
                  opt_num_warps(64, 16, 2, false) == 4 && opt_num_warps(64, 8, 2, false) == 4 &&
                  opt_num_warps(64, 16, 2, true) == 4 && opt_num_warps(128, 16, 1, false) == 4 &&
                  opt_num_warps(80, 16, 1, false) == 4,
              "8 warps exactly where an fp8 step is 4 KB");

// HEAD_TILES: 8 query heads per tile (the n = 8 of the PV mma); 1 covers GQA
// groups of up to 8 heads, 2 up to 16. PIPE_KB: 0 = the automatic pipeline
// depth (about 96 KB, 2 CTAs per SM), else the stages that fit in PIPE_KB
// (1 to 6; kOptLeanPipeKB, plan_optimized's OptPipeline::lean). KV: the
// cache's element type; with fp8 a step is 32 tokens (as many bytes as a
// 16-token fp16 step, so the same pipeline stages) and the fragments are
// built by 4-byte shared loads and conversion instead of ldmatrix (the fp8
// fragment functions below). TOKEN_ROWS: the cache keeps each token's head
// contiguous (nhd, hnd: kv_layout_token_rows), so a 16-byte chunk is
// consecutive dims of one token in V too; 2-byte caches only.
template <DType DT, int HEAD_SIZE, int BLOCK_SIZE, int HEAD_TILES, int NUM_WARPS = 0, int PIPE_KB = 0,
          KvDType KV = KvDType::same, bool TOKEN_ROWS = false>
struct OptConfig {
  static constexpr DType kDType = DT;
  static constexpr KvDType kKvDType = KV;
  static constexpr bool kFp8 = is_fp8(KV);
  // bf16 queries with an fp8 cache: QK's mma runs in fp16 (opt_q_to_fp16
  // rescales each head's Q by a power of two into fp16's range), as PV
  // already does, because an fp8 code becomes an fp16 mma input in one cvt
  // per two codes and a bf16 one in four instructions.
  static constexpr bool kQkFp16 = kFp8 && DT == DType::bf16;
  static constexpr bool kTokenRows = TOKEN_ROWS;
  static constexpr int kElemBytes = dtype_bytes(DT);        // Q, output, mma inputs
  static constexpr int kKvBytes = kv_elem_bytes(DT, KV);    // one cache element
  static constexpr int kX = 16 / kKvBytes;  // elements per 16-byte chunk (the K layout's x)
  static constexpr int kHeadSize = HEAD_SIZE;
  static constexpr int kBlockSize = BLOCK_SIZE;
  static constexpr int kHeadTiles = HEAD_TILES;
  static constexpr int kMaxUnitHeads = 8 * HEAD_TILES;  // query heads one CTA serves

  // A step (opt_step_tokens): 16 tokens, 32 with an fp8 cache, or one larger block.
  static constexpr int kStepTokens = opt_step_tokens(BLOCK_SIZE, kKvBytes);
  static constexpr int kBlocksPerStep = kStepTokens / BLOCK_SIZE;
  // 16-byte chunks in one (block, kv head) K tile; the V tile has as many.
  static constexpr int kTileChunks = HEAD_SIZE * BLOCK_SIZE / kX;
  static constexpr int kStepChunks = kTileChunks * kBlocksPerStep;  // K (or V) of one step
  static constexpr int kStepBytes = 2 * kStepChunks * 16;           // K + V of one step
  static_assert(kStepBytes == opt_step_bytes(HEAD_SIZE, BLOCK_SIZE, kKvBytes), "one step size");
  static constexpr int kNumWarps = NUM_WARPS > 0 ? NUM_WARPS : opt_num_warps(HEAD_SIZE, BLOCK_SIZE, kKvBytes, TOKEN_ROWS);
  static constexpr int kNumThreads = kNumWarps * kWarpSize;
  // CTAs per SM that the registers must allow (the kernel's launch bounds):
  // two, the pipeline's design; at 4 warps any count up to 255 allows them,
  // at 8 warps it caps a thread at 128, which ptxas otherwise passes (the
  // split merge's loads in flight took the head-64 fp8 instances to 150).
  static constexpr int kMinCtasPerSm = kNumWarps > 4 ? 2 : 1;
  // Pipeline depth per warp: about 96 KB of stages per CTA (2 CTAs per SM on
  // Hopper for head size <= 128); large heads get 3 stages in one CTA per SM
  // (up to 192 KB) rather than bare double buffering. The largest step (head
  // 256 x block 32: 32 KB of K+V per warp) fits only one stage per warp under
  // Hopper's 227 KB per-block limit; the 4 warps' copies still overlap each
  // other's math, but no warp prefetches its own next step.
  static constexpr int kMaxSmemBytes = 227 * 1024;  // sm_90 opt-in limit per block
  static constexpr int kStagesBy96K = (96 * 1024) / (kNumWarps * kStepBytes);
  static constexpr int kStagesAuto =
      kStagesBy96K >= 3 ? cmin(6, kStagesBy96K)
      : 3 * kNumWarps * kStepBytes <= 192 * 1024 ? 3
      : 2 * kNumWarps * kStepBytes + 2 * kNumWarps * kMaxUnitHeads * 4 + 16 <= kMaxSmemBytes ? 2
                                                                                             : 1;
  static constexpr int kStages =
      PIPE_KB == 0 ? kStagesAuto : cmax(1, cmin(6, PIPE_KB * 1024 / (kNumWarps * kStepBytes)));
  static constexpr int kPipeBytes = kNumWarps * kStages * kStepBytes;

  // mma tiling.
  static constexpr int kQkKSteps = HEAD_SIZE / 16;      // k = head dims
  static constexpr int kQkNTiles = kStepTokens / 8;     // n = tokens
  static constexpr int kPvKSteps = kStepTokens / 16;    // k = tokens
  static constexpr int kDimTiles = HEAD_SIZE / 16;      // m = head dims of O^T

  // Epilogue scratch (reuses the stage memory): per-warp unnormalized O and
  // stats. A (warp, head) row of O holds kRedPitch floats: 4 more than the
  // head, so that the 32 stores of a warp's fragment (dims l/4 of heads
  // 2(l%4)+e) fall in 32 different banks; rows stay 16-byte aligned.
  static constexpr int kRedPitch = HEAD_SIZE + 4;
  static constexpr int kRedBytes = kNumWarps * kMaxUnitHeads * kRedPitch * 4;
  static constexpr int kStatBytes = 2 * kNumWarps * kMaxUnitHeads * 4;
  static constexpr int kSmemBytes = cmax(kPipeBytes, kRedBytes) + kStatBytes + 16;
  static_assert(kSmemBytes <= kMaxSmemBytes, "stage 8's shared memory must fit one sm_90 block");

  static_assert(kElemBytes == 2, "stage 8 runs on 16-bit tensor-core inputs (fp16, bf16)");
  static_assert(HEAD_SIZE % 16 == 0, "head size must be a multiple of 16 (mma k and m)");
  static_assert(opt_block_size_ok(BLOCK_SIZE, kKvBytes),
                "a V row of a block must be whole 16-byte chunks (fp8 caches: block size 16 or 32)");
  static_assert(kStepTokens % 16 == 0, "a step must be whole PV k-steps");
  static_assert(HEAD_TILES == 1 || HEAD_TILES == 2, "one QK m-tile (16 rows) per CTA");
  static_assert(!(TOKEN_ROWS && kFp8),
                "nhd / hnd caches: 2-byte elements only (PV's fp8 fragments pair a dim's adjacent tokens, which "
                "only vLLM's V layout keeps adjacent)");

  // --- chunks of a tile ------------------------------------------------------
  // vLLM's cache: K tile chunk L holds dims [c*x, c*x + x) of token t, with
  // c = L / BLOCK_SIZE, t = L % BLOCK_SIZE; V tile chunk L holds dim
  // d = L / (BLOCK_SIZE/x), tokens [(L % (BLOCK_SIZE/x)) * x, + x). Both tiles
  // are contiguous, so chunk L sits at element offset L * x from
  // CacheGeometry::k_offset(p, h, 0, 0) / v_offset(p, h, 0, 0).
  // Token rows (nhd, hnd): chunk L of either tile holds dims [c*x, c*x + x)
  // of token t = L / (HEAD_SIZE/x), c = L % (HEAD_SIZE/x): a token's row is
  // contiguous and rows are token_stride elements apart
  // (KvLayoutGeometry::token_stride), so a warp's 32 chunks are whole rows.
  // (A CPU test checks every chunk against k_offset / v_offset.)
  static constexpr int kChunksPerToken = HEAD_SIZE / kX;
  PA_HD static constexpr int k_chunk_token(int L) { return TOKEN_ROWS ? L / kChunksPerToken : L % BLOCK_SIZE; }
  PA_HD static constexpr int k_chunk_dim(int L) {
    return (TOKEN_ROWS ? L % kChunksPerToken : L / BLOCK_SIZE) * kX;
  }
  static constexpr int kVChunksPerRow = BLOCK_SIZE / kX;  // vLLM's V: chunks of one dim's tokens
  PA_HD static constexpr int v_chunk_first_token(int L) {
    return TOKEN_ROWS ? L / kChunksPerToken : (L % kVChunksPerRow) * kX;
  }
  PA_HD static constexpr int v_chunk_dim(int L) { return TOKEN_ROWS ? (L % kChunksPerToken) * kX : L / kVChunksPerRow; }
  // Tokens and dims one V chunk covers (for the trace): x tokens of one dim,
  // or one token's x dims.
  static constexpr int kVChunkTokens = TOKEN_ROWS ? 1 : kX;
  static constexpr int kVChunkDims = TOKEN_ROWS ? kX : 1;
  // Element offset of chunk L (K or V: the same in both tiles) from the
  // tile's first element; token_stride is read only for token rows.
  PA_HD static constexpr auto chunk_elem_offset(int L, std::int64_t token_stride) {
    if constexpr (TOKEN_ROWS) return k_chunk_token(L) * token_stride + k_chunk_dim(L);
    else return L * kX;  // an int, as the 32-bit offset it always was
  }
  // The tile's first element (page phys, kv head): vLLM's formula
  // (CacheGeometry, no layout branch) or the token-row layout's.
  PA_HD static constexpr std::int64_t k_tile_offset(const KvLayoutGeometry& g, int phys, int kv_head) {
    return TOKEN_ROWS ? g.k_offset(phys, kv_head, 0, 0) : g.cache.k_offset(phys, kv_head, 0, 0);
  }
  PA_HD static constexpr std::int64_t v_tile_offset(const KvLayoutGeometry& g, int phys, int kv_head) {
    return TOKEN_ROWS ? g.v_offset(phys, kv_head, 0, 0) : g.cache.v_offset(phys, kv_head, 0, 0);
  }

  // --- shared memory of a step -------------------------------------------------
  // Chunk index inside a step's K (or V) region: block bi of the step, chunk L.
  PA_HD static constexpr int step_chunk(int bi, int L) { return bi * kTileChunks + L; }
  // XOR swizzle inside each 128-byte line (8 chunks), one key per line: the 8
  // rows an ldmatrix reads (8 tokens of one K dim chunk, or 8 dims of one V
  // token group) land in 8 different 16-byte bank groups. vLLM's tiles: key =
  // line, conflict-free for every block size. Token rows: a token's row is
  // kChunksPerToken chunks, so key = line / round(kChunksPerToken / 8), the
  // token itself when rows are whole lines (head 64, 128, 256: conflict-free);
  // heads 80, 96, 112 have rows that straddle lines and stay at 2-way, the
  // least any one-key-per-line swizzle reaches for them (a CPU test counts).
  static constexpr int kSwizzleLines = TOKEN_ROWS ? (HEAD_SIZE / kX + 4) / 8 : 1;
  PA_HD static constexpr int swizzle(int s) { return s ^ ((s >> 3) / kSwizzleLines & 7); }
  // Chunk (in 16-byte units) from the start of the CTA's shared memory.
  PA_HD static constexpr int stage_base_chunk(int warp, int stage) {
    return (warp * kStages + stage) * (2 * kStepChunks);
  }
  PA_HD static constexpr int k_smem_chunk(int warp, int stage, int s) {
    return stage_base_chunk(warp, stage) + swizzle(s);
  }
  PA_HD static constexpr int v_smem_chunk(int warp, int stage, int s) {
    return stage_base_chunk(warp, stage) + kStepChunks + swizzle(s);
  }
  // Step chunk of K row (token T of the step, dim chunk c) — ldmatrix row for
  // QK. Shared memory keeps the cache's own order, so that the 16-byte
  // copies of a warp that read one contiguous 512 bytes also write one
  // (swizzled) 512 bytes: vLLM's K dim-chunk-major ([x-chunk][token]), token
  // rows token-major ([token][x-chunk], V too). cp.async whose lanes scatter
  // into other 128-byte lines than their neighbours' is split per lane into
  // 16-byte requests of a 32-byte sector each (NOTES.md: measured at half the
  // bandwidth).
  PA_HD static constexpr int k_row_chunk(int T, int c) {
    if constexpr (TOKEN_ROWS) return step_chunk(T / BLOCK_SIZE, (T % BLOCK_SIZE) * kChunksPerToken + c);
    else return step_chunk(T / BLOCK_SIZE, c * BLOCK_SIZE + T % BLOCK_SIZE);
  }
  // Step chunk of V row (dim d, token group q = tokens [8q, 8q+8) of the
  // step): vLLM's V, dim-major in shared memory.
  PA_HD static constexpr int v_row_chunk(int d, int q) {
    return step_chunk((q * kX) / BLOCK_SIZE, d * kVChunksPerRow + ((q * kX) % BLOCK_SIZE) / kX);
  }
  // Where tile chunk L of block bi of the step lands (step chunk, before the
  // swizzle): at L, in either layout. K chunk L is its (token, dim chunk) row,
  // k_row_chunk(bi * BLOCK_SIZE + k_chunk_token(L), k_chunk_dim(L) / x);
  // vLLM's V chunk L is its dim-major v_row_chunk; a token row's V chunk is
  // its (token, dim chunk) row like K, the order PV's ldmatrix.trans reads.
  PA_HD static constexpr int k_tile_chunk(int bi, int L) { return step_chunk(bi, L); }
  PA_HD static constexpr int v_tile_chunk(int bi, int L) { return step_chunk(bi, L); }

  // --- work assignment -------------------------------------------------------
  // Logical block of block bi of the warp's j-th step in a split starting at block_begin.
  PA_HD static constexpr int step_block(int block_begin, int warp, int j, int bi) {
    return block_begin + (warp + j * kNumWarps) * kBlocksPerStep + bi;
  }
  // Steps the warp handles when the split has num_steps steps.
  PA_HD static constexpr int warp_steps(int num_steps, int warp) {
    return warp < num_steps ? (num_steps - warp + kNumWarps - 1) / kNumWarps : 0;
  }

  // --- mma fragment coordinates (PTX m16n8k16 layouts) -----------------------
  // QK: S[g][t] = Q[g][:] . K[t][:]: A = Q (rows = query heads of the unit),
  // B = K^T, accumulators c0,c1 -> head qk_row(lane), tokens qk_col(lane)+{0,1};
  // c2,c3 -> head qk_row(lane)+8.
  PA_HD static constexpr int qk_row(int lane) { return lane / 4; }
  PA_HD static constexpr int qk_col(int lane) { return 2 * (lane % 4); }
  // Q A-fragment: register r of k-step ks holds Q[head][dim], dim + 1.
  PA_HD static constexpr int q_frag_head(int lane, int r) { return lane / 4 + 8 * (r & 1); }
  // fp8: the same k slots hold other dims (16 ks + 4 (lane % 4) + {0, 1} and
  // + {2, 3}), the 4 adjacent bytes one shared load gives the K fragment; a
  // dot product does not care which dims share a k slot, as long as Q and K
  // agree.
  PA_HD static constexpr int q_frag_dim(int lane, int ks, int r) {
    return kFp8 ? 16 * ks + 4 * (lane % 4) + 2 * (r >> 1) : 16 * ks + 2 * (lane % 4) + 8 * (r >> 1);
  }
  // Token (within the step) of S column `col` (0..7) of n-tile nt. fp16/bf16:
  // tokens 8 nt + col. fp8: the even tokens of each 16-token group form one
  // n-tile and the odd ones the next, so that the lane holding columns 2c, 2c+1
  // of both holds P of tokens 4c..4c+3, the 4 adjacent bytes of a V row its
  // A fragment reads (opt_pv_mma_fp8).
  PA_HD static constexpr int s_token(int nt, int col) { return kFp8 ? 16 * (nt / 2) + 2 * col + nt % 2 : 8 * nt + col; }
  // ldmatrix.x4 row addresses: lane supplies row (lane % 8) of matrix (lane / 8).
  // QK B (k-steps ks, ks+1 of n-tile nt): token nt*8 + lane%8, dim chunk 2ks + lane/8.
  PA_HD static constexpr int qk_ldsm_token(int nt, int lane) { return nt * 8 + lane % 8; }
  PA_HD static constexpr int qk_ldsm_chunk(int ks, int lane) { return 2 * ks + lane / 8; }
  // PV: O^T[d][g] += V^T[d][t] P^T[t][g]: A = V^T (dim tile dt, k-step kk).
  PA_HD static constexpr int pv_ldsm_dim(int dt, int lane) { return 16 * dt + lane % 8 + 8 * ((lane / 8) & 1); }
  PA_HD static constexpr int pv_ldsm_group(int kk, int lane) { return 2 * kk + lane / 16; }
  // Token rows: ldmatrix.x4.trans over token-major V rows; lane supplies row
  // (lane % 8) of matrix (lane / 8): token 16 kk + lane % 8 (+ 8 for
  // matrices 2, 3), dim chunk 2 dt (+ 1 for matrices 1, 3), so the four
  // transposed 8x8 matrices are the A fragment's dims 0-7 / 8-15 x tokens
  // 0-7 / 8-15 of the k-step.
  PA_HD static constexpr int pv_trans_token(int kk, int lane) { return 16 * kk + lane % 8 + 8 * (lane / 16); }
  PA_HD static constexpr int pv_trans_chunk(int dt, int lane) { return 2 * dt + (lane / 8) % 2; }
  // O^T accumulators: c0,c1 -> dim o_dim(lane), heads o_head(lane)+{0,1}; c2,c3 -> dim + 8.
  PA_HD static constexpr int o_dim(int dt, int lane) { return 16 * dt + lane / 4; }
  PA_HD static constexpr int o_head(int lane) { return 2 * (lane % 4); }
  // Lane whose softmax row (qk_row) is head g of a head tile: O rescaling reads
  // the row's correction factor from there.
  PA_HD static constexpr int row_owner_lane(int g) { return 4 * g; }

  // Epilogue scratch offsets (floats).
  PA_HD static constexpr int red_offset(int warp, int g, int d) {
    return (warp * kMaxUnitHeads + g) * kRedPitch + d;
  }
  PA_HD static constexpr int stat_offset(int which, int warp, int g) {
    return (which * kNumWarps + warp) * kMaxUnitHeads + g;
  }

  // --- byte offsets for trace events (from the CTA's dynamic shared memory) --
  // 16-byte chunk s of a step's K / V region of (warp, stage), swizzled.
  PA_HD static constexpr int k_smem_byte(int warp, int stage, int s) { return 16 * k_smem_chunk(warp, stage, s); }
  PA_HD static constexpr int v_smem_byte(int warp, int stage, int s) { return 16 * v_smem_chunk(warp, stage, s); }
  // Epilogue scratch: per-warp O (red) at the start, stats after the larger
  // of the pipeline and red.
  PA_HD static constexpr int red_smem_byte(int warp, int g, int d) { return 4 * red_offset(warp, g, d); }
  PA_HD static constexpr int stat_smem_byte(int which, int warp, int g) {
    return cmax(kPipeBytes, kRedBytes) + 4 * stat_offset(which, warp, g);
  }
  // Token of the step's T-th token (T in [0, kStepTokens)) for the warp's j-th step.
  PA_HD static constexpr int step_token(int block_begin, int warp, int j, int T) {
    return step_block(block_begin, warp, j, 0) * BLOCK_SIZE + T;
  }
  // Steps of one block-table window: one coalesced load covers 32 blocks.
  static constexpr int kStepsPerTable = kWarpSize / kBlocksPerStep;
  // Lane whose table entry holds block bi of step j (the __shfl source).
  PA_HD static constexpr int table_lane(int j, int bi) { return (j % kStepsPerTable) * kBlocksPerStep + bi; }
  // Block a lane loads into the table window that covers step j.
  PA_HD static constexpr int table_block(int block_begin, int warp, int j, int lane) {
    return step_block(block_begin, warp, (j / kStepsPerTable) * kStepsPerTable + lane / kBlocksPerStep,
                      lane % kBlocksPerStep);
  }
  // Source bytes of the cp.async of V chunk L of a block with nvalid tokens
  // (the rest of the 16 bytes is zero-filled): a token row is all or nothing.
  PA_HD static constexpr int v_chunk_src_bytes(int L, int nvalid) {
    return cmax(0, cmin(kVChunkTokens, nvalid - v_chunk_first_token(L))) * kVChunkDims * kKvBytes;
  }
  // Global byte offset of K / V tile chunk L of (physical block, kv head).
  PA_HD static std::int64_t k_chunk_byte(const KvLayoutGeometry& g, int phys, int kv_head, int L) {
    return (k_tile_offset(g, phys, kv_head) + chunk_elem_offset(L, g.token_stride())) * kKvBytes;
  }
  PA_HD static std::int64_t v_chunk_byte(const KvLayoutGeometry& g, int phys, int kv_head, int L) {
    return (v_tile_offset(g, phys, kv_head) + chunk_elem_offset(L, g.token_stride())) * kKvBytes;
  }

  // --- fp8 fragments (kFp8) ----------------------------------------------------
  // QK's B fragment of n-tile nt, k-step ks (dims [16 ks, +16) = one 16-byte
  // K chunk): lane reads bytes 4 (lane % 4) .. +3 of the chunk of token
  // s_token(nt, lane / 4): dims q_frag_dim's, as two 16-bit registers after
  // conversion. A warp's 32 loads cover the 8 tokens' chunks once.
  PA_HD static constexpr int fp8_k_token(int nt, int lane) { return s_token(nt, lane / 4); }
  PA_HD static constexpr int fp8_k_frag_byte(int warp, int stage, int nt, int ks, int lane) {
    return k_smem_byte(warp, stage, k_row_chunk(fp8_k_token(nt, lane), ks)) + 4 * (lane % 4);
  }
  // PV's A fragment (V^T) of dim tile dt, k-step kk: lane reads, for rows
  // (dims) d and d + 8 (d = 16 dt + lane / 4), the 4 bytes of tokens
  // fp8_v_token(kk, lane) .. +3 of the step: in the V layout a dim's tokens
  // are adjacent, so one 4-byte load gives both registers of a row.
  PA_HD static constexpr int fp8_v_dim(int dt, int lane, int half) { return 16 * dt + lane / 4 + 8 * half; }
  PA_HD static constexpr int fp8_v_token(int kk, int lane) { return 16 * kk + 4 * (lane % 4); }
  PA_HD static constexpr int fp8_v_frag_byte(int warp, int stage, int d, int T) {
    return v_smem_byte(warp, stage,
                       step_chunk(T / BLOCK_SIZE, d * kVChunksPerRow + (T % BLOCK_SIZE) / kX)) +
           (T % BLOCK_SIZE) % kX;
  }
  // A traced token: -1 for the slots of a step's block past the split's end
  // (a step of two blocks, block size 8, or 16 with an fp8 cache: its second
  // block may not exist).
  PA_HD static constexpr int trace_token(int tok, int blk_end) { return tok < blk_end * BLOCK_SIZE ? tok : -1; }
  // The last CTA's split merge: splits whose states a thread loads together,
  // one L2 round trip per kMergeSplits splits (48 loads in flight per thread
  // with 16: the 13 splits of one 4096-token sequence in one round). The fp8
  // instances keep 8: with 16 some of their rows were up to 5% slower (cause
  // not found; the A/B is in kernels/NOTES.md).
  // Both epilogue merges (the warps', then the splits'): what a thread
  // merges. Item q (q = tid, tid + kNumThreads, ... below the unit's heads x
  // kMergeItemsPerHead) holds head merge_head(q)'s dims merge_dim(q, e),
  // e = 0..3, four consecutive dims: one 16-byte load per warp (or split)
  // state, and a warp's loads cover consecutive bytes.
  static constexpr int kMergeSplits = opt_merge_splits(kKvBytes);
  static constexpr int kMergeItemsPerHead = HEAD_SIZE / 4;
  PA_HD static constexpr int merge_head(int q) { return q / kMergeItemsPerHead; }
  PA_HD static constexpr int merge_dim(int q, int e) { return 4 * (q % kMergeItemsPerHead) + e; }
};

// Split-KV workspace of stage 8: per (sequence, unit, split) the unnormalized
// output of up to 16 heads and its (max, sum) in base-2 logits, plus one
// arrival counter per (sequence, unit) that the last CTA resets to 0.
struct OptWorkspaceGeometry {
  int num_seqs = 0;
  int num_units = 0;
  int max_splits = 0;
  int head_size = 0;
  static constexpr int kUnitHeads = 16;

  PA_HD std::int64_t part_index(int seq, int unit, int split) const {
    return (static_cast<std::int64_t>(seq) * num_units + unit) * max_splits + split;
  }
  PA_HD std::int64_t out_offset(int seq, int unit, int split, int g, int d) const {
    return (part_index(seq, unit, split) * kUnitHeads + g) * head_size + d;
  }
  // Elements between the same (g, d) of consecutive splits (a constant for a
  // kernel instance's head size); within a split, (g, d) is at
  // g * head_size + d from out_offset(seq, unit, split, 0, 0).
  PA_HD static constexpr int out_split_stride(int head_size) { return kUnitHeads * head_size; }
  // which = 0: max, 1: sum. Consecutive splits' stats of a head lie
  // kStatSplitStride floats apart, a split's sum kStatSumOffset after its max.
  static constexpr int kStatSplitStride = 2 * kUnitHeads;
  static constexpr int kStatSumOffset = kUnitHeads;
  PA_HD std::int64_t stat_offset(int seq, int unit, int split, int which, int g) const {
    return (part_index(seq, unit, split) * 2 + which) * kUnitHeads + g;
  }
  PA_HD std::int64_t counter_offset(int seq, int unit) const {
    return static_cast<std::int64_t>(seq) * num_units + unit;
  }
  std::int64_t parts() const { return static_cast<std::int64_t>(num_seqs) * num_units * max_splits; }
  // Byte layout: [out floats][stat floats][counters int32], each 256-byte aligned.
  PA_HD std::int64_t parts_hd() const { return static_cast<std::int64_t>(num_seqs) * num_units * max_splits; }
  PA_HD std::size_t out_bytes() const { return align(static_cast<std::size_t>(parts_hd()) * kUnitHeads * head_size * 4); }
  PA_HD std::size_t stat_bytes() const { return align(static_cast<std::size_t>(parts_hd()) * 2 * kUnitHeads * 4); }
  std::size_t counter_bytes() const { return align(static_cast<std::size_t>(num_seqs) * num_units * 4); }
  std::size_t total_bytes() const { return out_bytes() + stat_bytes() + counter_bytes(); }
  PA_HD static std::size_t align(std::size_t b) { return (b + 255) / 256 * 256; }
  // Trace byte offsets. Tensor `workspace` = the [out][stat] floats from the
  // workspace base; tensor `counter` = the arrival counters from their base.
  PA_HD std::int64_t out_byte(int seq, int unit, int split, int g, int d) const {
    return out_offset(seq, unit, split, g, d) * 4;
  }
  PA_HD std::int64_t stat_byte(int seq, int unit, int split, int which, int g) const {
    return static_cast<std::int64_t>(out_bytes()) + stat_offset(seq, unit, split, which, g) * 4;
  }
  PA_HD std::int64_t counter_byte(int seq, int unit) const { return counter_offset(seq, unit) * 4; }
};

// Query heads of unit `unit` (kv head, head chunk): first head and count.
PA_HD int opt_unit_kv_head(int unit, int head_chunks) { return unit / head_chunks; }
PA_HD int opt_unit_first_head(int unit, int head_chunks, int group) {
  return (unit / head_chunks) * group + (unit % head_chunks) * OptWorkspaceGeometry::kUnitHeads;
}
PA_HD int opt_unit_num_heads(int unit, int head_chunks, int group) {
  const int rest = group - (unit % head_chunks) * OptWorkspaceGeometry::kUnitHeads;
  return rest < OptWorkspaceGeometry::kUnitHeads ? rest : OptWorkspaceGeometry::kUnitHeads;
}
// Splits that hold tokens of a sequence with context_len tokens.
PA_HD int opt_active_splits(int context_len, int block_size, int split_blocks) {
  return ceil_div(ceil_div(context_len, block_size), split_blocks);
}

// The split merge's batches. A thread owns `items` items (a unit's heads x
// head_size / 4 over the CTA's threads: 8 for 16 heads of 256 dims) and
// merges them `batch` at a time, each round loading the states of
// round_states / batch splits of each item of the batch together: one L2
// round trip. One item at a time (batch 1) a round holds merge_splits
// states, so 2 splits of 8 items take 8 trips of 2 states each; a batch of 4
// takes 2. A batch of several items holds half as many states a round
// (opt_merge_round_states): its accumulators and addresses come on top of
// the states, and with merge_splits states as well they raised the whole
// kernel's register count (ptxas, head 128: 167 to 208; 151 at half). The
// batch is 1 or max_batch (opt_merge_max_batch), whichever takes fewer round
// trips (1 where they tie): two instances of the merge, not one per power of
// two. Of the forms timed side by side on one H100, this is the only one no
// slower than the one-item merge on any shape, (1,32,8,4096) included; one
// instance per power of two ran that shape 2% slower (kernels/NOTES.md, "The
// split merge batches items").
PA_HD constexpr int opt_merge_round_states(int merge_splits, int batch) {
  return batch == 1 ? merge_splits : merge_splits / 2;
}
PA_HD constexpr int opt_merge_rounds(int items, int splits, int merge_splits, int batch) {
  return ceil_div(items, batch) * ceil_div(splits, opt_merge_round_states(merge_splits, batch) / batch);
}
PA_HD constexpr int opt_merge_batch(int items, int splits, int merge_splits, int max_batch) {
  return opt_merge_rounds(items, splits, merge_splits, max_batch) < opt_merge_rounds(items, splits, merge_splits, 1)
             ? max_batch
             : 1;
}
// The largest batch an instance needs: its most items per thread (a unit of
// 16 heads), rounded up to a power of two, and at most a batched round's
// states (one split of each item).
PA_HD constexpr int opt_merge_max_batch(int head_size, int num_threads, int merge_splits) {
  const int most = pow2_ceil(ceil_div(OptWorkspaceGeometry::kUnitHeads * head_size / 4, num_threads));
  return most < merge_splits / 2 ? most : merge_splits / 2;
}

// Head tiling of a GQA group (plan_optimized): 8 query heads per tile, up to
// 16 heads (2 tiles) per unit, more heads in several units ("head chunks").
PA_HD constexpr int opt_head_tiles(int group) { return group <= 8 ? 1 : 2; }
PA_HD constexpr int opt_head_chunks(int group) { return ceil_div(group, OptWorkspaceGeometry::kUnitHeads); }
// Query head -> unit of the stage 8 grid (inverse of opt_unit_first_head).
PA_HD int opt_unit_of_head(int head, int group, int head_chunks) {
  return (head / group) * head_chunks + (head % group) / OptWorkspaceGeometry::kUnitHeads;
}

}  // namespace pa
