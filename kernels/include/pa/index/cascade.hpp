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

// Prefix kernel variants (07_cascade_merge.cuh, PrefixVariant) as the host
// plan sees them: query rows per thread block and tokens per tile.
//   0: 4 warps (64 rows), prefix_tile_tokens() tiles, 2 buffers;
//   1: 4 warps, 32-token tiles, 3 buffers (heads <= 128; else as 0);
//   2: 8 warps (128 rows: every K/V tile feeds twice the rows of 0/1), Q held
//      in registers, 32-token tiles, 4 buffers, one block per SM (heads <= 128;
//      else as 0);
//   3: as 2 with 64-token tiles, 3 buffers.
PA_HD constexpr bool prefix_variant_wide(int variant, int head_size) {
  return (variant == 2 || variant == 3) && head_size <= 128;
}
PA_HD constexpr int prefix_rows_per_block(int variant, int head_size) {
  return prefix_variant_wide(variant, head_size) ? 128 : 64;
}
PA_HD constexpr int prefix_variant_tile_tokens(int variant, int head_size, int block_size) {
  return prefix_variant_wide(variant, head_size) ? cmax(variant == 2 ? 32 : 64, block_size)
         : (variant == 1 && head_size <= 128)   ? cmax(32, block_size)
                                                : prefix_tile_tokens(head_size, block_size);
}
// Query tiles per KV head (host planning); rows_per_block 64 = the 4-warp kernels.
PA_HD constexpr int prefix_query_tiles(int num_seqs, int ratio, int rows_per_block = 64) {
  return ceil_div(num_seqs * ratio, rows_per_block);
}

// The one-wave split rule (variant 2: one block per SM, long-lived): as many
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
