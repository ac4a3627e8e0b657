// The memory layouts of the paged-attention tensors (vLLM's), as element
// offsets. Every address a kernel touches and every address the host model
// reports is computed here and nowhere else.
//
//   Q            [num_seqs, num_heads, head_size]      (row stride q_stride >= num_heads*head_size)
//   K cache      [num_blocks, num_kv_heads, head_size/x, block_size, x]
//   V cache      [num_blocks, num_kv_heads, head_size, block_size]
//   block_tables [num_seqs, max_blocks_per_seq]          int32, logical -> physical block
//   output       [num_seqs, num_heads, head_size]
//   V2 buffers   part_out [num_seqs, num_heads, max_partitions, head_size] (float)
//                part_max / part_sum [num_seqs, num_heads, max_partitions] (float)
#pragma once
#include <cstdint>

#include "pa/index/hd.hpp"

namespace pa {

struct CacheGeometry {
  int num_blocks = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int block_size = 0;
  int x = 0;  // elements per 16 bytes

  constexpr PA_HD std::int64_t block_elems() const {
    return static_cast<std::int64_t>(num_kv_heads) * head_size * block_size;
  }
  constexpr PA_HD std::int64_t total_elems() const { return block_elems() * num_blocks; }

  // First element of (physical block, kv head): its K (or V) is head_size x
  // block_size elements from here. 64-bit; the offsets inside it are int.
  PA_HD std::int64_t head_block_offset(int physical_block, int kv_head) const {
    return (static_cast<std::int64_t>(physical_block) * num_kv_heads + kv_head) * (head_size * block_size);
  }
  // K element (dim d, token t within the block) of (physical block, kv head).
  PA_HD std::int64_t k_offset(int physical_block, int kv_head, int d, int t) const {
    return head_block_offset(physical_block, kv_head) + (d / x) * (block_size * x) + t * x + d % x;
  }
  // V element (dim d, token t within the block).
  PA_HD std::int64_t v_offset(int physical_block, int kv_head, int d, int t) const {
    return head_block_offset(physical_block, kv_head) + d * block_size + t;
  }

  // Inverses of k_offset / v_offset (the viewer decodes traced byte ranges
  // into the cells it draws). Element offset -> (physical block, kv head, d, t).
  struct Coords {
    int physical_block, kv_head, d, t;
  };
  PA_HD Coords k_coords(std::int64_t off) const {
    const int xi = static_cast<int>(off % x);
    off /= x;
    const int t = static_cast<int>(off % block_size);
    off /= block_size;
    const int chunk = static_cast<int>(off % (head_size / x));
    off /= (head_size / x);
    return {static_cast<int>(off / num_kv_heads), static_cast<int>(off % num_kv_heads), chunk * x + xi, t};
  }
  PA_HD Coords v_coords(std::int64_t off) const {
    const int t = static_cast<int>(off % block_size);
    off /= block_size;
    const int d = static_cast<int>(off % head_size);
    off /= head_size;
    return {static_cast<int>(off / num_kv_heads), static_cast<int>(off % num_kv_heads), d, t};
  }
};

struct QueryGeometry {
  int num_seqs = 0;
  int num_heads = 0;
  int head_size = 0;
  int q_stride = 0;  // elements between consecutive sequences' rows

  PA_HD std::int64_t q_offset(int seq, int head, int d) const {
    return static_cast<std::int64_t>(seq) * q_stride + static_cast<std::int64_t>(head) * head_size + d;
  }
  // The output is dense: [num_seqs, num_heads, head_size].
  PA_HD std::int64_t out_offset(int seq, int head, int d) const {
    return (static_cast<std::int64_t>(seq) * num_heads + head) * head_size + d;
  }
};

// GQA/MQA: query heads share a KV head in consecutive groups.
PA_HD int kv_head_of(int head, int num_heads, int num_kv_heads) {
  return head / (num_heads / num_kv_heads);
}

// context_lens [num_seqs] int32.
PA_HD std::int64_t context_len_offset(int seq) { return seq; }

struct BlockTableGeometry {
  int max_blocks_per_seq = 0;
  PA_HD std::int64_t offset(int seq, int logical_block) const {
    return static_cast<std::int64_t>(seq) * max_blocks_per_seq + logical_block;
  }
};

// V2 per-partition buffers.
struct PartitionGeometry {
  int num_heads = 0;
  int max_partitions = 0;
  int head_size = 0;
  PA_HD std::int64_t stat_offset(int seq, int head, int partition) const {
    return (static_cast<std::int64_t>(seq) * num_heads + head) * max_partitions + partition;
  }
  PA_HD std::int64_t out_offset(int seq, int head, int partition, int d) const {
    return stat_offset(seq, head, partition) * head_size + d;
  }
};

// Observable outputs of stages 1-4 (float, dense), checked against the reference.
//   q_smem   [num_seqs, num_heads, head_size]   Q as read back from q_vecs, slot order
//   logits   [num_seqs, num_heads, max_context_len]   (stage 2 logits, stage 3 probabilities;
//                                                   tokens >= the sequence's context are not written)
//   stats    [num_seqs, num_heads]               stage 3 max and sum (two arrays)
//   partials [num_seqs, num_heads, num_warps, head_size]   stage 4 per-warp partial outputs
struct StageOutGeometry {
  int num_heads = 0;
  int head_size = 0;
  int max_context_len = 0;
  int num_warps = 0;

  PA_HD std::int64_t row(int seq, int head) const {
    return static_cast<std::int64_t>(seq) * num_heads + head;
  }
  PA_HD std::int64_t q_smem_offset(int seq, int head, int e) const { return row(seq, head) * head_size + e; }
  PA_HD std::int64_t logit_offset(int seq, int head, int token) const {
    return row(seq, head) * max_context_len + token;
  }
  PA_HD std::int64_t stat_offset(int seq, int head) const { return row(seq, head); }
  PA_HD std::int64_t partial_offset(int seq, int head, int warp, int d) const {
    return (row(seq, head) * num_warps + warp) * head_size + d;
  }
};

// Shared memory of the v1-style kernels. Static: q_vecs (head_size elements)
// and the reduction scratch (max and sum, one float per warp each). Dynamic:
// logits float[tokens], reused after the LV loop as the cross-warp out
// scratch float[num_warps / 2][head_size] (whichever is larger).
PA_HD constexpr std::int64_t v1_static_smem_bytes(int head_size, int elem_bytes, int num_warps) {
  return static_cast<std::int64_t>(head_size) * elem_bytes + 2 * num_warps * 4;
}
PA_HD constexpr std::int64_t v1_dynamic_smem_bytes(int tokens, int head_size, int num_warps) {
  const std::int64_t logits = static_cast<std::int64_t>(tokens) * 4;
  const std::int64_t scratch = static_cast<std::int64_t>(num_warps / 2) * head_size * 4;
  return logits > scratch ? logits : scratch;
}
// Offsets inside those shared tensors, in bytes (trace events report them).
PA_HD constexpr std::int64_t logits_smem_byte(int token_in_range) { return static_cast<std::int64_t>(token_in_range) * 4; }
PA_HD constexpr std::int64_t red_scratch_byte(int slot) { return static_cast<std::int64_t>(slot) * 4; }

}  // namespace pa
