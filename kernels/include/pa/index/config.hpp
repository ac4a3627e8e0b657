// The compile-time kernel configuration and every constant derived from it.
// This is the single place where thread-group size, vector widths and loop
// trip counts are defined; kernels, the CPU reference (per-warp partials),
// the host trace model and the viewer all read them from here.
//
// Worked example, fp16, head size 128, block size 16, 128 threads:
//   thread group = 32/16 = 2 threads per token, 16 thread groups per warp,
//   so one warp covers one KV block per iteration;
//   x = 16 B / 2 B = 8 elements; K vec = 16 B / (2 threads * 2 B) = 4 elements
//   (the 2 threads of a group load the two 8-byte halves of one 16-byte x chunk);
//   64 elements per thread = 16 K vecs per thread;
//   V vec = 8 elements (16 B), 2 V vecs per block row, 16 rows per warp
//   iteration, 8 accumulator rows per thread.
//
// An fp8 cache (KV = fp8_e4m3 / fp8_e5m2) keeps every rule above and changes
// one number: a cache element is 1 byte, so 16 bytes hold 16 of them. Same
// example with an fp8 cache: x = 16; K vec = 16 B / (2 threads * 1 B) = 8
// elements (8 bytes of K; the Q vec it meets in shared memory is 8 fp16
// elements, 16 bytes); 64 elements per thread = 8 K vecs per thread; V vec =
// 16 elements (16 B) = the whole block row, 1 V vec per row, 32 rows per warp
// iteration, 4 accumulator rows per thread. Each load still moves the same
// bytes; it now brings twice the elements.
//
// Token rows (TOKEN_ROWS: the nhd and hnd layouts, pa/index/kv_layout.hpp)
// keep each token's head contiguous, in K and in V, so the two 16-byte
// pieces vLLM's layout forces apart are next to each other and the mapping
// follows the rows instead. K: a thread loads a whole 16-byte chunk of its
// token (kVecSize = x, or x/2 where the head does not split into the group's
// 16-byte chunks: heads 80 and 112 with block 8), so a thread group reads
// kThreadGroupSize x 16 consecutive bytes of one row per load. V: a lane
// loads a 16-byte chunk of one token's V row (x consecutive head dims) and
// keeps x accumulators, one per dim; kLvLanesPerToken lanes cover a token's
// row (the chunk count rounded up to a power of two, so lanes past the row
// idle at heads 80, 96, 112 and 192) and a warp takes kLvTokensPerIter tokens
// per load. Same example in nhd: K vec = 8 elements (16 B), 8 K vecs per
// thread, a group's 2 threads read 32 consecutive bytes; V: 16 chunks per
// row, 16 lanes per token, 2 tokens per load, 8 loads per block, 8
// accumulator dims per lane. 2-byte caches only, like stage 8's token rows.
#pragma once
#include <cstdint>

#include "pa/index/dtype.hpp"
#include "pa/index/hd.hpp"

namespace pa {

inline constexpr int kSupportedHeadSizes[] = {64, 80, 96, 112, 128, 192, 256};
inline constexpr int kSupportedBlockSizes[] = {8, 16, 32};
inline constexpr int kSupportedThreadCounts[] = {128};
inline constexpr int kDefaultPartitionSize = 512;

template <DType DT, int HEAD_SIZE, int BLOCK_SIZE, int NUM_THREADS = 128, KvDType KV = KvDType::same,
          bool TOKEN_ROWS = false>
struct KernelConfig {
  static constexpr DType kDType = DT;                    // Q and the output
  static constexpr KvDType kKvDType = KV;                // the cache: DT's own, or fp8
  static constexpr bool kTokenRows = TOKEN_ROWS;         // nhd / hnd: a token's head contiguous
  static constexpr int kElemBytes = dtype_bytes(DT);     // one Q / output element
  static constexpr int kKvBytes = kv_elem_bytes(DT, KV);  // one K / V cache element
  static constexpr int kHeadSize = HEAD_SIZE;
  static constexpr int kBlockSize = BLOCK_SIZE;
  static constexpr int kNumThreads = NUM_THREADS;
  static constexpr int kNumWarps = NUM_THREADS / kWarpSize;

  // --- K cache / QK --------------------------------------------------------
  // Elements in one 16-byte chunk: the innermost dimension of the K layout.
  static constexpr int kX = 16 / kKvBytes;
  // Threads that cooperate on one token, so that a warp covers a whole block.
  static constexpr int kThreadGroupSize = cmax(kWarpSize / BLOCK_SIZE, 1);
  static constexpr int kNumThreadGroups = NUM_THREADS / kThreadGroupSize;
  static constexpr int kThreadGroupsPerWarp = kWarpSize / kThreadGroupSize;
  // vLLM's layout: a thread group loads 16 bytes of one token's K at a time
  // in total (one x chunk; the token's next chunk is a block of tokens away).
  // Token rows: each thread loads a 16-byte chunk, the group's chunks
  // adjacent in the row, where the head splits into them.
  static constexpr int kVecSize = !TOKEN_ROWS ? cmax(16 / (kThreadGroupSize * kKvBytes), 1)
                                  : HEAD_SIZE % (kThreadGroupSize * kX) == 0 ? kX
                                                                             : kX / 2;
  static constexpr int kVecBytes = kVecSize * kKvBytes;    // one K vec in the cache
  static constexpr int kQVecBytes = kVecSize * kElemBytes;  // the Q vec it meets (shared memory)
  static constexpr int kNumElemsPerThread = HEAD_SIZE / kThreadGroupSize;
  static constexpr int kNumVecsPerThread = kNumElemsPerThread / kVecSize;

  // --- V cache / LV --------------------------------------------------------
  // vLLM's layout: a V vec is kVVecSize consecutive tokens of one head dim
  // (a "row" of the block), kNumVVecsPerRow lanes cover a row, and a lane
  // accumulates kNumRowsPerThread rows kNumRowsPerIter apart.
  // Token rows: a V vec is kVVecSize = x consecutive dims of one token, and
  // a lane accumulates those x dims (kNumRowsPerThread = x).
  static constexpr int kVVecSize = TOKEN_ROWS ? kX : cmin(16 / kKvBytes, BLOCK_SIZE);
  static constexpr int kVVecBytes = kVVecSize * kKvBytes;
  static constexpr int kNumVVecsPerRow = TOKEN_ROWS ? 1 : BLOCK_SIZE / kVVecSize;
  static constexpr int kNumRowsPerIter = TOKEN_ROWS ? 0 : kWarpSize / kNumVVecsPerRow;  // vLLM's layout only
  static constexpr int kLvChunksPerToken = HEAD_SIZE / kX;                 // token rows: 16-byte chunks of a V row
  static constexpr int kLvLanesPerToken = TOKEN_ROWS ? pow2_ceil(kLvChunksPerToken) : 0;
  static constexpr int kLvTokensPerIter = TOKEN_ROWS ? kWarpSize / kLvLanesPerToken : 0;
  static constexpr int kLvTokenSteps = TOKEN_ROWS ? BLOCK_SIZE / kLvTokensPerIter : 0;  // loads per lane per block
  static constexpr int kNumRowsPerThread = TOKEN_ROWS ? kX : ceil_div(HEAD_SIZE, kNumRowsPerIter);

  // --- constraints ---------------------------------------------------------
  static_assert(NUM_THREADS % kWarpSize == 0, "threads must be whole warps");
  static_assert(is_pow2(kNumWarps), "the cross-warp tree reduction needs a power-of-two warp count");
  static_assert(BLOCK_SIZE > 0 && is_pow2(BLOCK_SIZE), "block size must be a power of two");
  static_assert(BLOCK_SIZE <= kWarpSize, "a warp covers one block per iteration: block size <= 32");
  static_assert(kWarpSize % kThreadGroupSize == 0, "thread groups must tile a warp");
  static_assert(HEAD_SIZE % kX == 0, "head size must be a whole number of 16-byte chunks");
  static_assert(HEAD_SIZE % (kThreadGroupSize * kVecSize) == 0,
                "each thread of a group must own whole K vecs");
  static_assert(kX % kVecSize == 0, "a K vec must not straddle two x chunks");
  static_assert(HEAD_SIZE % kThreadGroupSize == 0, "head size must split evenly across a thread group");
  static_assert(BLOCK_SIZE % kVVecSize == 0, "V vecs must tile a block row");
  static_assert(kWarpSize % kNumVVecsPerRow == 0, "V vecs per row must divide the warp");
  static_assert(kNumThreadGroups * kThreadGroupSize == NUM_THREADS, "thread groups must tile the block");
  static_assert(!is_fp8(KV) || DT == DType::f16 || DT == DType::bf16, "an fp8 cache takes fp16 or bf16 queries");
  static_assert(!TOKEN_ROWS || kKvBytes == 2, "token-row layouts (nhd, hnd): 2-byte caches only");
  static_assert(!TOKEN_ROWS || kLvChunksPerToken <= kWarpSize, "token rows: one warp covers a token's V row");
  static_assert(!TOKEN_ROWS || BLOCK_SIZE % kLvTokensPerIter == 0, "token rows: a block is whole V loads of a warp");
};

// Partition (V2 split-KV) geometry for a sequence, shared by kernels, the
// reference and the host model.
struct PartitionRange {
  int token_begin, token_end;  // [begin, end) tokens of the sequence
  int block_begin, block_end;  // [begin, end) logical blocks
  PA_HD bool empty() const { return token_begin >= token_end; }
};

// partition_size == 0 means "one partition covering the whole context" (v1).
PA_HD PartitionRange partition_range(int context_len, int block_size, int partition_size,
                                     int partition_idx) {
  const int size = partition_size > 0 ? partition_size : context_len;
  int begin = partition_idx * size;
  int end = begin + size;
  if (end > context_len) end = context_len;
  if (begin > context_len) begin = context_len;
  return {begin, end, begin / block_size, ceil_div(end, block_size)};
}

PA_HD int num_partitions(int context_len, int partition_size) {
  return partition_size > 0 ? ceil_div(context_len, partition_size) : 1;
}

}  // namespace pa
