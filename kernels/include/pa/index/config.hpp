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
#pragma once
#include <cstdint>

#include "pa/index/dtype.hpp"
#include "pa/index/hd.hpp"

namespace pa {

inline constexpr int kSupportedHeadSizes[] = {64, 80, 96, 112, 128, 192, 256};
inline constexpr int kSupportedBlockSizes[] = {8, 16, 32};
inline constexpr int kSupportedThreadCounts[] = {128};
inline constexpr int kDefaultPartitionSize = 512;

template <DType DT, int HEAD_SIZE, int BLOCK_SIZE, int NUM_THREADS = 128>
struct KernelConfig {
  static constexpr DType kDType = DT;
  static constexpr int kElemBytes = dtype_bytes(DT);
  static constexpr int kHeadSize = HEAD_SIZE;
  static constexpr int kBlockSize = BLOCK_SIZE;
  static constexpr int kNumThreads = NUM_THREADS;
  static constexpr int kNumWarps = NUM_THREADS / kWarpSize;

  // --- K cache / QK --------------------------------------------------------
  // Elements in one 16-byte chunk: the innermost dimension of the K layout.
  static constexpr int kX = 16 / kElemBytes;
  // Threads that cooperate on one token, so that a warp covers a whole block.
  static constexpr int kThreadGroupSize = cmax(kWarpSize / BLOCK_SIZE, 1);
  static constexpr int kNumThreadGroups = NUM_THREADS / kThreadGroupSize;
  static constexpr int kThreadGroupsPerWarp = kWarpSize / kThreadGroupSize;
  // A thread group loads 16 bytes of one token's K at a time in total.
  static constexpr int kVecSize = cmax(16 / (kThreadGroupSize * kElemBytes), 1);
  static constexpr int kVecBytes = kVecSize * kElemBytes;
  static constexpr int kNumElemsPerThread = HEAD_SIZE / kThreadGroupSize;
  static constexpr int kNumVecsPerThread = kNumElemsPerThread / kVecSize;

  // --- V cache / LV --------------------------------------------------------
  static constexpr int kVVecSize = cmin(16 / kElemBytes, BLOCK_SIZE);
  static constexpr int kVVecBytes = kVVecSize * kElemBytes;
  static constexpr int kNumVVecsPerRow = BLOCK_SIZE / kVVecSize;
  static constexpr int kNumRowsPerIter = kWarpSize / kNumVVecsPerRow;
  static constexpr int kNumRowsPerThread = ceil_div(HEAD_SIZE, kNumRowsPerIter);

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
