// Device view of stage 6 (V2 split-KV): StageArgs (the paged inputs) plus
// the partition buffers, the token range and the attention-state outputs
// (stage 7 reuses them for the cascade's suffix). Plain data, built on the
// host without nvcc.
#pragma once
#include <cstdint>

#include "pa/index/cascade.hpp"
#include "pa/index/layout.hpp"
#include "pa/kernels/stage_args.hpp"

namespace pa::kernels {

// V1 or V2 for a problem: the one place this rule lives (pa-lab, the benchmark
// and the cascade call it).
// Why: V1 launches one thread block per (sequence, head); when that grid
// covers the GPU several times over and contexts are short, V2's extra reduce
// launch and partition traffic are pure cost. V2 wins when the (seq, head)
// grid cannot fill the SMs (few sequences, long contexts) or when a context
// exceeds what one block's shared-memory logits can hold. The thresholds are
// first guesses, not fitted to measurements (stage 8 replaced this choice
// where it is built):
//   - any context > max_v1_context (v1's shared-memory limit)    -> V2
//   - max context <= partition_size (V2 would be one partition)  -> V1
//   - seqs * heads < 2 * num_sms and max context >= 2 partitions -> V2
//   - otherwise: V2 when max context > 4096 tokens, else V1.
enum class DecodeKernel { v1, v2 };
inline DecodeKernel choose_decode_kernel(int num_seqs, int num_heads, int max_context_len, int partition_size,
                                         int num_sms, int max_v1_context) {
  if (max_v1_context > 0 && max_context_len > max_v1_context) return DecodeKernel::v2;
  if (partition_size <= 0 || max_context_len <= partition_size) return DecodeKernel::v1;
  const long long blocks = static_cast<long long>(num_seqs) * num_heads;
  if (blocks < 2LL * num_sms && max_context_len >= 2 * partition_size) return DecodeKernel::v2;
  return max_context_len > 4096 ? DecodeKernel::v2 : DecodeKernel::v1;
}

// Stage 6. Partition p of sequence s covers range tokens partition_range_in(
// range, context_len, block_size, partition_size, p); grid z = max partitions.
struct V2Args {
  StageArgs base;          // inputs; base.partition_size > 0 (a multiple of block_size)
  TokenRange range;        // {0, -1}: the whole context
  int max_partitions = 0;  // grid z, >= num_partitions_in(range, max context, partition_size)
  float* part_out = nullptr;  // [seq, head, max_partitions, head_size], PartitionGeometry
  float* part_max = nullptr;  // [seq, head, max_partitions]
  float* part_sum = nullptr;
  PartitionGeometry pg;
  // Final outputs. out (dtype, base.out) and/or out_state (float) [seq, head, head_size];
  // lse (float, natural log) [seq, head]. Null pointers are not written.
  float* out_state = nullptr;
  float* lse = nullptr;
  StateGeometry stg;
  // true: a sequence with exactly one partition writes its final output from
  // the partition kernel and the reduce kernel skips it (its part_* entries are
  // then not written). false: every partition goes through part_* (tests use
  // it to see partition outputs of single-partition sequences).
  bool single_partition_direct = true;
};

}  // namespace pa::kernels
