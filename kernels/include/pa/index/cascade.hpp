// Index math of stages 6 and 7 beyond PartitionGeometry: token ranges for
// decoding part of a context (the cascade's suffix), attention-state layout,
// and the cascade prefix kernel's query rows, prefix chunks and shared-memory
// tiles. Host + device, like every header here: the kernels and the host model
// read the same functions.
#pragma once
#include <cstdint>

#include "pa/index/config.hpp"
#include "pa/index/hd.hpp"
#include "pa/index/layout.hpp"

namespace pa {

// ---- token ranges (stage 6 over part of a context) ---------------------------
// Decode only tokens [begin, end) of each sequence, clamped to its context;
// end < 0 means "up to the context length". begin must be a multiple of the
// block size (partitions then start on block boundaries, as the warp-to-block
// mapping needs). The cascade decodes its suffixes with {prefix_len, -1}.
struct TokenRange {
  int begin = 0;
  int end = -1;
  PA_HD int end_for(int context_len) const {
    return (end < 0 || end > context_len) ? context_len : end;
  }
  PA_HD int begin_for(int context_len) const { return begin < context_len ? begin : context_len; }
  PA_HD int len_for(int context_len) const {
    const int n = end_for(context_len) - begin_for(context_len);
    return n > 0 ? n : 0;
  }
};

// Partition idx of the range: absolute tokens [begin + idx*size, ...) and the
// logical blocks that hold them. Same rule as partition_range() shifted by
// range.begin; partition_size 0 = the whole range in one partition.
PA_HD PartitionRange partition_range_in(TokenRange range, int context_len, int block_size,
                                        int partition_size, int partition_idx) {
  const int b = range.begin_for(context_len);
  PartitionRange r = partition_range(range.len_for(context_len), block_size, partition_size, partition_idx);
  r.token_begin += b;
  r.token_end += b;
  r.block_begin = r.token_begin / block_size;
  r.block_end = ceil_div(r.token_end, block_size);
  return r;
}
PA_HD int num_partitions_in(TokenRange range, int context_len, int partition_size) {
  const int n = range.len_for(context_len);
  return n > 0 ? num_partitions(n, partition_size) : 0;
}

// ---- attention states (stage 7) -------------------------------------------
// A state is (out, lse): out[head_size] the attention output normalized over
// its token set, lse = log(sum_t exp(logit_t)) in NATURAL log (logit = scale *
// q.k). The empty state is (0, -inf). Stored as float:
//   out [num_seqs, num_heads, head_size], lse [num_seqs, num_heads].
struct StateGeometry {
  int num_heads = 0;
  int head_size = 0;
  PA_HD std::int64_t row(int seq, int head) const {
    return static_cast<std::int64_t>(seq) * num_heads + head;
  }
  PA_HD std::int64_t out_offset(int seq, int head, int d) const { return row(seq, head) * head_size + d; }
  PA_HD std::int64_t lse_offset(int seq, int head) const { return row(seq, head); }
  // Vectorized merge: state row r, element d (a multiple of the vector width).
  PA_HD std::int64_t row_elem_offset(std::int64_t r, int d) const { return r * head_size + d; }
};

// ---- the cascade prefix kernel ------------------------------------------
// Bytes of a 16-byte V copy (8 consecutive tokens of one dim, V's
// [head][block] region) whose first token is `token`, in a span that ends at
// `span_end`: the tokens before the end, 2 bytes each (cp.async fills the
// rest of the 16 bytes with zeros). A span that ends inside a page (a
// multi-level cascade's shared group) leaves slots past its end holding
// anything, NaN included, and a masked probability of 0 times a NaN of V is
// still NaN in the P V product: those slots must not reach shared memory.
// K needs no such care: its logits past the end are replaced by -inf.
PA_HD constexpr int prefix_v_copy_bytes(int token, int span_end) {
  const int n = span_end - token;
  return n >= 8 ? 16 : n > 0 ? 2 * n : 0;
}
static_assert(prefix_v_copy_bytes(0, 64) == 16 && prefix_v_copy_bytes(56, 61) == 10 && prefix_v_copy_bytes(64, 61) == 0,
              "whole copies, a copy cut by the span's end, a copy past it");

// Tokens per shared-memory tile: 64 keeps S (16 x 64 floats per warp) and the
// tiles small; heads > 128 halve it so registers (O is 16 x head_size floats
// per warp) and shared memory still fit. Always whole KV blocks.
PA_HD constexpr int prefix_tile_tokens(int head_size, int block_size) {
  return cmax(head_size <= 128 ? 64 : 32, block_size);
}

// One thread block = (query tile, KV head, prefix chunk). Its queries are all
// the query heads of all sequences that use this KV head: query row r of KV
// head h is (sequence r / ratio, head h * ratio + r % ratio), ratio =
// num_heads / num_kv_heads. A warp owns 16 rows (one mma.m16n8k16 A tile).
// The prefix chunk is streamed through shared memory in tiles of kTileTokens
// tokens (whole KV blocks), copied as 16-byte chunks with cp.async, double
// buffered; every warp multiplies its rows with the same tile, so each K/V
// byte of the chunk is read from global memory once per query tile.
// TILE_TOKENS 0 = prefix_tile_tokens(); STAGES = shared-memory tile buffers
// in the cp.async pipeline (STAGES - 1 tiles in flight while one is computed).
template <class Cfg, int NUM_WARPS = 4, int TILE_TOKENS = 0, int STAGES = 2>
struct PrefixTiling {
  static_assert(Cfg::kElemBytes == 2, "the tensor-core prefix kernel is for fp16/bf16");
  static_assert(Cfg::kHeadSize % 16 == 0, "mma k-steps of 16 head dimensions");
  static constexpr int kHead = Cfg::kHeadSize;
  static constexpr int kBlock = Cfg::kBlockSize;
  static constexpr int kElemsPerChunk = 8;  // 16 bytes of fp16/bf16 (= the K layout's x)
  static_assert(Cfg::kX == kElemsPerChunk, "K's x must be one 16-byte chunk");
  static_assert(kBlock >= 8, "V tiles are read as 8-token rows: block size >= 8");
  static constexpr int kNumWarps = NUM_WARPS;
  static constexpr int kNumThreads = NUM_WARPS * kWarpSize;
  static constexpr int kRowsPerWarp = 16;
  static constexpr int kRows = NUM_WARPS * kRowsPerWarp;
  static constexpr int kTileTokens = TILE_TOKENS > 0 ? cmax(TILE_TOKENS, kBlock) : prefix_tile_tokens(kHead, kBlock);
  static constexpr int kStages = STAGES;
  static_assert(STAGES >= 2, "at least double buffering");
  static_assert(kTileTokens % kBlock == 0 && kTileTokens % 16 == 0, "tiles are whole blocks and mma k-steps");
  static constexpr int kBlocksPerTile = kTileTokens / kBlock;
  // 16-byte chunks of one (physical block, KV head) region of K (or V): the
  // region [head_size/x][block][x] (K) or [head_size][block] (V) is contiguous.
  static constexpr int kChunksPerBlock = kHead * kBlock / kElemsPerChunk;
  static constexpr int kTileChunks = kBlocksPerTile * kChunksPerBlock;
  // Q rows padded by one chunk: an odd row stride in chunks makes the 8 row
  // addresses of an ldmatrix hit 8 different bank groups.
  static constexpr int kQStride = kHead + kElemsPerChunk;
  static constexpr int kQBytes = kRows * kQStride * 2;
  static constexpr int kStageBytes = 2 * kTileChunks * 16;  // K tile + V tile
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes;

  // XOR swizzle of 16-byte chunks inside each aligned group of 8 (128 bytes):
  // the 8 rows an ldmatrix reads (8 tokens of K, 8 dims of V) land in 8
  // different bank groups for every block size. An involution.
  PA_HD static int swizzle(int c) { return c ^ ((c >> 3) & 7); }
  // Tile chunk c (copy order) comes from region chunk `within` of tile block b.
  PA_HD static int tile_block_of_chunk(int c) { return c / kChunksPerBlock; }
  PA_HD static int region_chunk_of(int c) { return c % kChunksPerBlock; }
  // Element offset in the K (or V) cache of region chunk `within` of (physical block, KV head).
  PA_HD static std::int64_t region_chunk_offset(const CacheGeometry& g, int physical_block, int kv_head,
                                               int within) {
    return g.k_offset(physical_block, kv_head, 0, 0) + static_cast<std::int64_t>(within) * kElemsPerChunk;
  }
  // Shared chunk holding K dims [d, d+8) of tile token t (d a multiple of 8).
  PA_HD static int k_smem_chunk(int t, int d) {
    return swizzle((t / kBlock) * kChunksPerBlock + (d / kElemsPerChunk) * kBlock + t % kBlock);
  }
  // Shared chunk holding V tokens [t, t+8) of dim d (t a multiple of 8).
  PA_HD static int v_smem_chunk(int t, int d) {
    return swizzle((t / kBlock) * kChunksPerBlock + (d * kBlock + t % kBlock) / kElemsPerChunk);
  }
  PA_HD static int q_smem_elem(int row, int d) { return row * kQStride + d; }
  // What region chunk w of a block holds (trace events): K chunk = 8 dims of
  // one token, V chunk = 8 tokens of one dim; token offsets within the block.
  PA_HD static int k_chunk_token(int w) { return w % kBlock; }
  PA_HD static int k_chunk_dim(int w) { return (w / kBlock) * kElemsPerChunk; }
  PA_HD static int v_chunk_token(int w) { return (w * kElemsPerChunk) % kBlock; }
  PA_HD static int v_chunk_dim(int w) { return (w * kElemsPerChunk) / kBlock; }
  // Byte offsets in the block's dynamic shared memory: [Q tile][stage 0: K tile,
  // V tile][stage 1: ...]; a 16-byte chunk index becomes a byte offset in its tile.
  PA_HD static int k_tile_byte(int stage) { return kQBytes + stage * kStageBytes; }
  PA_HD static int v_tile_byte(int stage) { return k_tile_byte(stage) + kTileChunks * 16; }
  PA_HD static int chunk_byte(int chunk) { return chunk * 16; }

  // Query rows of a KV head.
  PA_HD static int rows_per_kv_head(int num_seqs, int ratio) { return num_seqs * ratio; }
  PA_HD static int row_seq(int row, int ratio) { return row / ratio; }
  PA_HD static int row_head(int row, int kv_head, int ratio) { return kv_head * ratio + row % ratio; }
  PA_HD static int num_query_tiles(int num_seqs, int ratio) { return ceil_div(num_seqs * ratio, kRows); }
  // mma fragment coordinates (PTX m16n8k16): accumulator element j of a lane
  // is (row lane/4 + 8*(j/2), column 2*(lane%4) + j%2) of the 16 x 8 tile.
  PA_HD static int frag_row(int lane, int j) { return lane / 4 + 8 * (j / 2); }
  PA_HD static int frag_col(int lane, int j) { return 2 * (lane % 4) + j % 2; }
  // ldmatrix.x4 row address owners: lane supplies row (lane % 8) of matrix lane / 8.
  // A (Q, 16 rows x 16 dims): matrices (rows 0-7|8-15) x (dims lo|hi), order a0..a3.
  PA_HD static int lda_row(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
  PA_HD static int lda_dim(int lane) { return (lane >> 4) * 8; }
  // B from K (two 8-token n-tiles x 16 dims): (tile nt dims lo, nt hi, nt+1 lo, nt+1 hi).
  PA_HD static int ldk_token(int lane) { return (lane >> 4) * 8 + (lane & 7); }
  PA_HD static int ldk_dim(int lane) { return ((lane >> 3) & 1) * 8; }
  // B from V (16 tokens x two 8-dim n-tiles): (dims dn tokens lo, dn hi, dn+1 lo, dn+1 hi).
  PA_HD static int ldv_dim(int lane) { return (lane >> 4) * 8 + (lane & 7); }
  PA_HD static int ldv_token(int lane) { return ((lane >> 3) & 1) * 8; }
};

// Trace label of a prefix kernel block (query tile qt, KV head): the (seq,
// head) of its first query row. Its events carry that label (and partition =
// chunk, relabelled kPrefixBlockBase + chunk), so one label names one block.
struct PrefixBlockLabel {
  int seq, head;
};
PA_HD PrefixBlockLabel prefix_block_label(int query_tile, int kv_head, int ratio, int rows_per_block) {
  const int r0 = query_tile * rows_per_block;
  return {r0 / ratio, kv_head * ratio + r0 % ratio};
}
// The block label whose block computes query row (seq, head).
PA_HD PrefixBlockLabel prefix_block_label_of(int seq, int head, int ratio, int rows_per_block) {
  const int row = seq * ratio + head % ratio;
  return prefix_block_label(row / rows_per_block, head / ratio, ratio, rows_per_block);
}
// The cascade's prefix kernels (CascadeOptions::prefix). Each is a variant of
// the same computation; the numbers are the kernels' template arguments
// (PrefixVariant in 07_cascade_prefix_mma.cuh), the names what a caller picks:
//   mma_4warps (1): mma.sync, 4 warps x 16 query rows = 64 rows per block,
//      32-token tiles, 3 buffers. The one traces show (it has trace hooks).
//   mma_8warps (3): mma.sync, 8 warps = 128 rows (every K/V tile feeds twice
//      the rows), Q held in registers, 64-token tiles, 3 buffers, one block
//      per SM; the default where wgmma does not run.
//   wgmma (8): Hopper's warpgroup kernel (07_cascade_prefix_wgmma.cuh): two
//      consumer warpgroups = 128 rows and a producer warpgroup, 64-token
//      tiles, 4 buffers; the default on sm_90a builds for head 128 (elsewhere
//      the planner falls back to mma_8warps).
// Heads > 128 do not fit the 128-row or 32-token-tile forms: both mma.sync
// kernels then run 4 warps with prefix_tile_tokens() tiles and 2 buffers (the
// geometry numbered 0).
enum class PrefixKernel : int { automatic = -1, mma_4warps = 1, mma_8warps = 3, wgmma = 8 };
// The prefix kernel traces run (record_stage and the host model).
inline constexpr int kCascadeTracePrefixVariant = static_cast<int>(PrefixKernel::mma_4warps);

// The geometry of a prefix kernel as the host plan sees it (variant = the
// PrefixKernel number): query rows per thread block and tokens per tile.
PA_HD constexpr bool prefix_variant_wide(int variant, int head_size) {
  return (variant == 3 || variant == 8) && head_size <= 128;
}
PA_HD constexpr int prefix_rows_per_block(int variant, int head_size) {
  return prefix_variant_wide(variant, head_size) ? 128 : 64;
}
// Blocks per SM the one-wave chunk rule plans for (the 128-row kernels; the
// others use cascade_chunk_len's waves).
PA_HD constexpr int prefix_blocks_per_sm(int variant, int head_size) {
  return prefix_variant_wide(variant, head_size) ? 1 : 0;
}
PA_HD constexpr int prefix_variant_tile_tokens(int variant, int head_size, int block_size) {
  return prefix_variant_wide(variant, head_size) ? cmax(64, block_size)
         : (variant == 1 && head_size <= 128)   ? cmax(32, block_size)
                                                : prefix_tile_tokens(head_size, block_size);
}
// ---- the warpgroup (wgmma, sm_90a) prefix kernel ----------------------------
// Two warpgroups of 4 warps, 64 query rows each (128 per block, as
// mma_8warps). Each K/V tile is read from shared memory by the tensor cores once per
// warpgroup (wgmma's B operand comes straight from shared memory through a
// descriptor), not once per warp as with ldmatrix + mma.sync: a quarter of the
// shared-memory reads per multiply-add. Q (A of S = Q K^T) and P (A of
// O = P V) stay in registers, in the same fragment layout as mma.sync's.
// Shared tiles use wgmma's K-major layouts (a row = consecutive k elements of
// one n index; rows of 8 n indices form an atom, SBO = bytes between atoms
// adjacent in n):
//   K tile (B of S: k = head dim, n = token): [head/8][tile tokens][8 dims],
//     without swizzle: 8 x 8 "core matrices" of 8 rows of 16 bytes, LBO =
//     bytes between core matrices adjacent in k. The cache's K region
//     [head/8][block][8] is rows of 16 bytes already.
//   V tile (B of O: k = token, n = head dim): per cache block, the cache's V
//     region [head][block] as it is, rows of 2 x block bytes (all of a
//     block's tokens of one dim), under wgmma's swizzle of that row width
//     (none at 16 bytes, then 32, 64, 128: the 16-byte chunks of a row
//     XOR-ed with address bits 7 and up, v_swizzle). Rows of the full width
//     matter to the copy, not to wgmma: a 16-byte cp.async is served in
//     4-sector L2 requests only if each 128-byte line of the source lands in
//     one 128-byte span of shared memory, in one request per sector if only
//     each 32-byte sector lands in one 32-byte span, and in one request per
//     16 bytes (a whole sector each) otherwise. With 16-byte rows at block
//     16, each V copy took 8 times the requests and twice the sectors, and
//     the prefix kernel, L2-bound, 4.5 times the requests and 1.5 times the
//     sectors of its bytes (kernels/NOTES.md).
// Head 128 only: the head-64 instances gave wrong outputs for fp16 on chunks
// of several tiles on an H100 (kernels/NOTES.md; cause not found), so the
// planner sends head 64 to the mma.sync kernels.
PA_HD constexpr bool prefix_wgmma_head_ok(int head_size) { return head_size == 128; }

// wgmma's swizzle of K-major rows of row_bytes (16 to 128): the 16-byte
// chunk bits [4, 4 + s) of a shared-memory byte address XOR-ed with bits
// [7, 7 + s), s = log2(row_bytes / 16); none for 16-byte rows.
PA_HD constexpr int wgmma_swizzle_byte(int byte, int row_bytes) { return byte ^ (((byte >> 7) & (row_bytes / 16 - 1)) << 4); }

template <class Cfg, int TILE_TOKENS = 64, int STAGES = 3, int WARPGROUPS = 2>
struct PrefixWgmmaTiling {
  static_assert(Cfg::kElemBytes == 2, "the tensor-core prefix kernel is for fp16/bf16");
  static_assert(Cfg::kX == 8, "K's x must be one 16-byte chunk");
  static_assert(Cfg::kBlockSize >= 8, "V rows of 8 tokens: block size >= 8");
  static constexpr int kHead = Cfg::kHeadSize;
  static_assert(kHead == 64 || kHead == 128, "wgmma N of O = head size: the shapes generated are 64 and 128");
  static constexpr int kBlock = Cfg::kBlockSize;
  static_assert(WARPGROUPS == 1 || WARPGROUPS == 2, "64 or 128 query rows per block");
  static constexpr int kNumWarps = 4 * WARPGROUPS;
  static constexpr int kNumThreads = kNumWarps * kWarpSize;
  static constexpr int kRowsPerWarp = 16;
  static constexpr int kRowsPerWarpgroup = 64;
  static constexpr int kRows = 64 * WARPGROUPS;
  static constexpr int kTileTokens = cmax(TILE_TOKENS, kBlock);
  static_assert(kTileTokens == 64 || kTileTokens == 128, "wgmma N of S = 64 or 128 tokens (the shapes generated here)");
  static constexpr int kStages = STAGES;
  static_assert(STAGES >= 2, "at least double buffering");
  static_assert(kTileTokens % kBlock == 0, "tiles are whole blocks");
  static constexpr int kBlocksPerTile = kTileTokens / kBlock;
  static constexpr int kChunksPerBlock = kHead * kBlock / 8;
  static constexpr int kTileChunks = kBlocksPerTile * kChunksPerBlock;
  // Q staging: rows of kHead elements, the 16-byte chunks of row r XOR-ed with
  // r % 8 so the 8 rows one ldmatrix reads hit 8 different bank groups (no
  // padding: 2 KB less than padded rows).
  static constexpr int kQBytes = kRows * kHead * 2;
  static constexpr int kTileBytes = kTileTokens * kHead * 2;
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kSmemBytes = kQBytes + STAGES * kStageBytes;
  static_assert(kQBytes % 1024 == 0 && kTileBytes % 1024 == 0, "K and V tiles 1024-byte aligned (the widest swizzle's period)");
  // V rows: one cache block's tokens of one dim; a block's region; the
  // swizzle's period (8 rows), to which every V region is aligned.
  static constexpr int kVRowBytes = 2 * kBlock;
  static_assert(kVRowBytes >= 16 && kVRowBytes <= 128, "wgmma swizzles rows of 16 to 128 bytes: block size 8 to 64");
  static constexpr int kVRegionBytes = kHead * kVRowBytes;
  static_assert(kVRegionBytes % (8 * kVRowBytes) == 0, "whole swizzle atoms per region");
  // Descriptor strides (bytes). With a swizzle wgmma takes a k16 step's 32
  // bytes from within one row, so V's LBO is unused (16, by convention).
  static constexpr int kKLbo = kTileTokens * 16, kKSbo = 128;
  static constexpr int kVLbo = kVRowBytes == 16 ? kVRegionBytes : 16, kVSbo = 8 * kVRowBytes;

  // wgmma's swizzle of V's rows (wgmma_swizzle_byte), applied to addresses
  // relative to a 1024-byte aligned tile, the same as to the absolute ones
  // wgmma swizzles.
  PA_HD static constexpr int v_swizzle(int byte) { return wgmma_swizzle_byte(byte, kVRowBytes); }
  // Byte of element (token t, dim d) in a K tile / V tile.
  PA_HD static int k_smem_byte(int t, int d) { return (d / 8) * kKLbo + t * 16 + (d % 8) * 2; }
  PA_HD static int v_smem_byte(int t, int d) {
    return (t / kBlock) * kVRegionBytes + v_swizzle(d * kVRowBytes + (t % kBlock) * 2);
  }
  // Copy order: tile chunk c = region chunk `w` of tile block b.
  PA_HD static int tile_block_of_chunk(int c) { return c / kChunksPerBlock; }
  PA_HD static int region_chunk_of(int c) { return c % kChunksPerBlock; }
  // The (physical block, KV head) region starts at k_offset(block, head, 0, 0)
  // = (block * kv_heads + head) * head_size * block_size (= v_offset's start),
  // written with this tiling's compile-time head and block sizes so the
  // kernel's per-chunk address is one wide multiply-add (the runtime
  // geometry's head_size / x is an integer division per chunk otherwise);
  // the geometry must match them (the dispatch picks the instance by both).
  PA_HD static std::int64_t region_base(const CacheGeometry& g, int physical_block, int kv_head) {
    return static_cast<std::int64_t>(physical_block) * (g.num_kv_heads * kHead * kBlock) + kv_head * (kHead * kBlock);
  }
  PA_HD static std::int64_t region_chunk_offset(const CacheGeometry& g, int physical_block, int kv_head, int within) {
    return region_base(g, physical_block, kv_head) + within * 8;
  }
  // Where tile chunk c lands: K region chunk w = (dim chunk w / block, token w % block);
  // V region chunk w = (dim w / (block/8), tokens 8 (w % (block/8)) ...).
  PA_HD static int k_copy_byte(int c) {
    const int b = c / kChunksPerBlock, w = c % kChunksPerBlock;
    return k_smem_byte(b * kBlock + w % kBlock, (w / kBlock) * 8);
  }
  PA_HD static int v_copy_byte(int c) {
    const int b = c / kChunksPerBlock, w = c % kChunksPerBlock;
    return v_smem_byte(b * kBlock + (w % (kBlock / 8)) * 8, w / (kBlock / 8));
  }
  // The k16 step kk of a product starts at core-matrix column 2 kk (K), at
  // token 16 kk's region and row offset (V; unswizzled: its column 2 kk).
  PA_HD static int k_step_byte(int kk) { return 2 * kk * kKLbo; }
  PA_HD static int v_step_byte(int kk) { return (16 * kk / kBlock) * kVRegionBytes + (16 * kk % kBlock) * 2; }
  // wgmma's swizzle mode field of V's descriptor (PTX ISA, matrix descriptor:
  // 0 none, 1 128-byte, 2 64-byte, 3 32-byte).
  static constexpr int kVSwizzleMode = kVRowBytes == 16 ? 0 : kVRowBytes == 32 ? 3 : kVRowBytes == 64 ? 2 : 1;
  // How wgmma reads a K-major operand (what the descriptor means): the byte
  // of element (k, n) of the 16 x N operand whose descriptor starts at
  // `start`, rows of row_bytes (16: no swizzle, LBO between the two core
  // matrices of k; wider: the swizzle of that width on the whole address).
  PA_HD static int kmajor_operand_byte(int start, int k, int n, int lbo, int sbo, int row_bytes) {
    if (row_bytes == 16) return start + (k / 8) * lbo + (n / 8) * sbo + (n % 8) * 16 + (k % 8) * 2;
    return wgmma_swizzle_byte(start + (n / 8) * sbo + (n % 8) * row_bytes + k * 2, row_bytes);
  }
  PA_HD static int q_smem_elem(int row, int d) { return row * kHead + (d ^ ((row % 8) * 8)); }  // chunk d / 8 XOR row % 8
  PA_HD static int k_tile_byte(int stage) { return kQBytes + stage * kStageBytes; }
  PA_HD static int v_tile_byte(int stage) { return k_tile_byte(stage) + kTileBytes; }
  PA_HD static int rows_per_kv_head(int num_seqs, int ratio) { return num_seqs * ratio; }
  PA_HD static int row_seq(int row, int ratio) { return row / ratio; }
  PA_HD static int row_head(int row, int kv_head, int ratio) { return kv_head * ratio + row % ratio; }
  PA_HD static int num_query_tiles(int num_seqs, int ratio) { return ceil_div(num_seqs * ratio, kRows); }
  // Register fragments: as mma.sync m16n8k16 per warp (PrefixTiling's).
  PA_HD static int frag_row(int lane, int j) { return lane / 4 + 8 * (j / 2); }
  PA_HD static int frag_col(int lane, int j) { return 2 * (lane % 4) + j % 2; }
  PA_HD static int lda_row(int lane) { return (lane & 7) + ((lane >> 3) & 1) * 8; }
  PA_HD static int lda_dim(int lane) { return (lane >> 4) * 8; }
};

// Query tiles per KV head (host planning); rows_per_block 64 = the 4-warp kernels.
PA_HD constexpr int prefix_query_tiles(int num_seqs, int ratio, int rows_per_block = 64) {
  return ceil_div(num_seqs * ratio, rows_per_block);
}

// The tiling of the mma.sync prefix kernels, mma_4warps (1) and mma_8warps
// (3) (PrefixVariant in 07_cascade_prefix_mma.cuh adds the register caps): one
// definition for the kernel and the host model of its trace.
template <class Cfg, int VARIANT>
struct PrefixVariantTiling {
  static_assert(VARIANT == 1 || VARIANT == 3, "the mma.sync prefix kernels: mma_4warps (1), mma_8warps (3)");
  static constexpr bool kWide = prefix_variant_wide(VARIANT, Cfg::kHeadSize);
  static constexpr bool kSmall = VARIANT == 1 && Cfg::kHeadSize <= 128;
  using Tiling = PrefixTiling<Cfg, kWide ? 8 : 4, kWide ? 64 : kSmall ? 32 : 0, kWide ? 3 : kSmall ? 3 : 2>;
  static constexpr bool kQInRegs = kWide;
};

// The one-wave split rule (128-row kernels: one block per SM, long-lived): as many
// chunks as fit the GPU's block slots in ONE wave (a second, partial wave
// would idle most SMs at the end, and each chunk writes a float state per
// query row), at least one, never more than the tiles; chunks are whole tiles.
PA_HD int cascade_chunk_len_one_wave(int prefix_len, int tile_tokens, int ctas_per_chunk, int block_slots) {
  if (prefix_len <= 0) return tile_tokens;
  const int max_chunks = ceil_div(prefix_len, tile_tokens);
  int chunks = block_slots / (ctas_per_chunk > 0 ? ctas_per_chunk : 1);
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  return ceil_div(ceil_div(prefix_len, chunks), tile_tokens) * tile_tokens;
}

// The prefix split rule: enough chunks that the prefix kernel's grid covers
// the GPU about `waves` times over (it runs ~2 blocks per SM), chunks a whole
// number of tiles, and never more chunks than tiles. More chunks cost merge
// traffic (each chunk writes a float state per query row), so no more than needed.
PA_HD int cascade_chunk_len(int prefix_len, int tile_tokens, int ctas_per_chunk, int num_sms,
                            int waves = 4) {
  if (prefix_len <= 0) return tile_tokens;
  const int max_chunks = ceil_div(prefix_len, tile_tokens);
  int chunks = ceil_div(waves * num_sms, ctas_per_chunk > 0 ? ctas_per_chunk : 1);
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  return ceil_div(ceil_div(prefix_len, chunks), tile_tokens) * tile_tokens;
}

}  // namespace pa
