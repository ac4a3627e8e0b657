// Context parallelism: one long context decoded by several devices.
//
// What it adds. Stage 6 splits a context into partitions inside one GPU and
// stage 7 merges attention states (out, lse); the merge is associative and
// commutative, so the slices need not live on one GPU at all. Each device
// holds only some of a sequence's pages (KV blocks), computes the state of
// its slice, and the states of all devices are merged: the state of the
// whole context. This header is the plan: which logical blocks each device
// (a "shard") holds, how many tokens that is, and how a device's compact
// block table (only its own pages) maps back to the sequence's logical
// blocks. Host and device, like every header here: the host plans and builds
// each device's tables, a kernel may ask the same plan where a token lives.
//
// The mapping is thread-free: it assigns blocks to devices, not to threads.
// Inside a device the slice is decoded by the single-GPU kernels unchanged,
// with their own thread mappings (mapping.hpp, optimized.hpp), because a
// shard's pages form a sequence of their own: local blocks in increasing
// logical order, every one full except possibly the last local block of the
// shard that holds the sequence's last logical block. Decoding attends to a
// set of tokens regardless of their order (a rotary position is applied to K
// before it is cached), so a shard's tokens need not be adjacent.
// A position-dependent bias (ALiBi) needs each token's logical position:
// ShardPlan::logical_token gives it.
//
// Two policies, both over whole blocks (a page is the unit a device holds):
// - contiguous: shard s holds one run of consecutive blocks, in shard order;
//   the runs are as even as possible (sizes differ by at most one block).
//   The remainder of blocks / shards goes one block each to the LAST shards:
//   the last logical block is the only partial one, so the shard that holds
//   it also gets an extra block, and the token counts then differ by at most
//   one block (with the extras at the front, the last shard could fall short
//   of the others by almost two blocks); with more shards than blocks, the
//   empty shards are the first ones. A contiguous shard is a token range
//   [block_begin * block_size, block_end * block_size) clamped to the
//   context, a TokenRange (cascade.hpp) as stage 6 decodes part of a context:
//   it can be decoded in place, through the full block table.
// - round_robin: block b goes to shard b % N, as local block b / N. Every
//   shard gets the same mix of old and new tokens, and the assignment does not
//   depend on the context length, so a page shared by several sequences (a
//   cascade prefix) lands on the same device for all of them; contiguous
//   boundaries move with each sequence's length, so a shared page can be
//   needed on several devices.
// Either way a shard may hold no blocks (more shards than blocks): its state
// is the empty state (out 0, lse -inf), the identity of the merge.
//
// The merge order is fixed: a left fold over shards 0, 1, ..., N-1. Floating
// point addition is not associative, so a fixed order is what lets the
// multi-device path and a one-device run of the same shards agree bit for bit.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "pa/index/cascade.hpp"
#include "pa/index/hd.hpp"

namespace pa {

enum class ShardPolicy : int { contiguous = 0, round_robin = 1 };

inline constexpr const char* shard_policy_name(ShardPolicy p) {
  return p == ShardPolicy::contiguous ? "contiguous" : p == ShardPolicy::round_robin ? "round_robin" : "?";
}
// The one parse of a policy name (shard_policy_name's spelling); nullopt for
// anything else (the caller names its flag in the error).
inline constexpr std::optional<ShardPolicy> shard_policy_from_name(std::string_view s) {
  if (s == "contiguous") return ShardPolicy::contiguous;
  if (s == "round_robin") return ShardPolicy::round_robin;
  return std::nullopt;
}
inline constexpr const char* kShardPolicyNamesText = "contiguous, round_robin";

// At most 8 shards: the GPUs of one host, which exchange states over NVLink
// (an 8-GPU board is the largest single host, and the largest machine this
// lab runs on). Past one host the exchange crosses the network and wants a
// hierarchical merge, which this plan does not model. The bound also lets
// device code keep one state per shard in a fixed-size array.
inline constexpr int kMaxShards = 8;

// What is wrong with a plan's parameters (none = valid).
enum class ShardPlanError : int { none = 0, policy, num_shards, block_size, context_len };

PA_HD constexpr ShardPlanError shard_plan_error(ShardPolicy policy, int num_shards, int block_size,
                                                int context_len) {
  if (policy != ShardPolicy::contiguous && policy != ShardPolicy::round_robin) return ShardPlanError::policy;
  if (num_shards < 1 || num_shards > kMaxShards) return ShardPlanError::num_shards;
  if (block_size < 1) return ShardPlanError::block_size;
  if (context_len < 0) return ShardPlanError::context_len;  // 0: a sequence with no tokens, all shards empty
  return ShardPlanError::none;
}

// The plan of one sequence. Every member is a closed formula (no loops, no
// tables), so a kernel can evaluate it per block. Preconditions: the
// parameters pass shard_plan_error (make_shard_plan_checked throws
// otherwise), 0 <= shard < num_shards, 0 <= local < shard_blocks(shard),
// 0 <= b < num_blocks().
struct ShardPlan {
  ShardPolicy policy = ShardPolicy::contiguous;
  int num_shards = 1;
  int block_size = 16;
  int context_len = 0;

  // Logical blocks of the context: ceil(context_len / block_size), written
  // so that a context near INT_MAX does not overflow.
  PA_HD constexpr int num_blocks() const { return context_len / block_size + (context_len % block_size != 0); }
  // Tokens in logical block b: block_size, except the last block's tail.
  PA_HD constexpr int block_tokens(int b) const {
    const int rest = context_len - b * block_size;
    return rest < block_size ? rest : block_size;
  }
  // Contiguous: q blocks per shard, and the last r = num_blocks % N shards one more.
  PA_HD constexpr int base_blocks() const { return num_blocks() / num_shards; }
  PA_HD constexpr int first_long_shard() const { return num_shards - num_blocks() % num_shards; }

  // Blocks shard s holds.
  PA_HD constexpr int shard_blocks(int s) const {
    if (policy == ShardPolicy::round_robin) {
      const int n = num_blocks() - s;  // blocks s, s + N, s + 2N, ... below num_blocks
      return n > 0 ? (n - 1) / num_shards + 1 : 0;
    }
    return base_blocks() + (s >= first_long_shard() ? 1 : 0);
  }
  // The most blocks any shard holds: the width of a compact block table.
  PA_HD constexpr int max_shard_blocks() const { return num_blocks() / num_shards + (num_blocks() % num_shards != 0); }

  // Contiguous: shard s holds logical blocks [block_begin(s), block_end(s)).
  PA_HD constexpr int block_begin(int s) const {
    const int extra = s - first_long_shard();
    return s * base_blocks() + (extra > 0 ? extra : 0);
  }
  PA_HD constexpr int block_end(int s) const { return block_begin(s) + shard_blocks(s); }
  // Contiguous: the shard's tokens as a range stage 6 can decode in place
  // (begin a multiple of block_size, end clamped to the context).
  PA_HD constexpr TokenRange token_range(int s) const {
    const std::int64_t e = static_cast<std::int64_t>(block_end(s)) * block_size;
    return TokenRange{block_begin(s) * block_size, e < context_len ? static_cast<int>(e) : context_len};
  }

  // Local block `local` of shard s -> logical block of the sequence.
  PA_HD constexpr int logical_block(int s, int local) const {
    return policy == ShardPolicy::round_robin ? local * num_shards + s : block_begin(s) + local;
  }
  // Logical block b -> the shard that holds it, and its local index there.
  PA_HD constexpr int shard_of(int b) const {
    if (policy == ShardPolicy::round_robin) return b % num_shards;
    const int q = base_blocks(), short_end = first_long_shard() * q;  // blocks of the short shards
    return b < short_end ? b / q : first_long_shard() + (b - short_end) / (q + 1);
  }
  PA_HD constexpr int local_of(int b) const {
    return policy == ShardPolicy::round_robin ? b / num_shards : b - block_begin(shard_of(b));
  }

  // Whether shard s holds the last logical block (the only one that may be partial).
  PA_HD constexpr bool holds_last_block(int s) const { return num_blocks() > 0 && shard_of(num_blocks() - 1) == s; }
  // Tokens shard s holds: its blocks, less the unfilled tail of the last block.
  PA_HD constexpr int shard_tokens(int s) const {
    const std::int64_t full = static_cast<std::int64_t>(shard_blocks(s)) * block_size;
    const int tail_gap = holds_last_block(s) ? block_size - block_tokens(num_blocks() - 1) : 0;
    return static_cast<int>(full - tail_gap);
  }
  // Local token t of shard s (0 <= t < shard_tokens(s)) -> its position in the sequence.
  PA_HD constexpr int logical_token(int s, int t) const {
    return logical_block(s, t / block_size) * block_size + t % block_size;
  }
  // Physical block of shard s's local block, from the sequence's full block
  // table row (logical -> physical): how a device's compact table is filled.
  PA_HD constexpr int local_physical_block(int s, int local, const int* table_row) const {
    return table_row[logical_block(s, local)];
  }
};

// The plan, unchecked (device code receives plans the host has checked).
PA_HD constexpr ShardPlan make_shard_plan(ShardPolicy policy, int num_shards, int block_size, int context_len) {
  return ShardPlan{policy, num_shards, block_size, context_len};
}

// The plan, checked: std::invalid_argument naming the bad value and what is accepted.
inline ShardPlan make_shard_plan_checked(ShardPolicy policy, int num_shards, int block_size, int context_len) {
  switch (shard_plan_error(policy, num_shards, block_size, context_len)) {
    case ShardPlanError::none: return make_shard_plan(policy, num_shards, block_size, context_len);
    case ShardPlanError::policy:
      throw std::invalid_argument("shard plan: policy " + std::to_string(static_cast<int>(policy)) +
                                  "; accepted: " + kShardPolicyNamesText);
    case ShardPlanError::num_shards:
      throw std::invalid_argument("shard plan: num_shards " + std::to_string(num_shards) + "; accepted: 1.." +
                                  std::to_string(kMaxShards) + " (the GPUs of one host)");
    case ShardPlanError::block_size:
      throw std::invalid_argument("shard plan: block_size " + std::to_string(block_size) + "; accepted: >= 1");
    case ShardPlanError::context_len:
      throw std::invalid_argument("shard plan: context_len " + std::to_string(context_len) +
                                  "; accepted: >= 0");
  }
  throw std::logic_error("shard plan: unknown ShardPlanError");
}

// The states of all shards side by side, shard-major: shard s's states are
// one StateGeometry block (out [num_seqs, num_heads, head_size], lse
// [num_seqs, num_heads]) at s times its size. This is what an all-gather
// produces when shard s is rank s (each rank's buffer concatenated in rank
// order), so the merge reads the gathered buffers without reshuffling.
struct ShardedStateGeometry {
  int num_shards = 1;
  int num_seqs = 0;
  StateGeometry state;

  PA_HD constexpr std::int64_t rows_per_shard() const { return static_cast<std::int64_t>(num_seqs) * state.num_heads; }
  PA_HD constexpr std::int64_t out_elems_per_shard() const { return rows_per_shard() * state.head_size; }
  PA_HD std::int64_t out_offset(int shard, int seq, int head, int d) const {
    return shard * out_elems_per_shard() + state.out_offset(seq, head, d);
  }
  PA_HD std::int64_t lse_offset(int shard, int seq, int head) const {
    return shard * rows_per_shard() + state.lse_offset(seq, head);
  }
  // Bytes one shard contributes to the exchange: float out and lse per (seq, head).
  PA_HD constexpr std::int64_t state_bytes_per_shard() const {
    return rows_per_shard() * (state.head_size + 1) * static_cast<std::int64_t>(sizeof(float));
  }
};

// ---- static checks of the formulas ---------------------------------------
// 65 tokens in blocks of 16 = 5 blocks, the last holding 1 token.
namespace shard_detail {
inline constexpr ShardPlan kContig2 = make_shard_plan(ShardPolicy::contiguous, 2, 16, 65);
inline constexpr ShardPlan kRound3 = make_shard_plan(ShardPolicy::round_robin, 3, 16, 65);
inline constexpr ShardPlan kSparse = make_shard_plan(ShardPolicy::contiguous, 8, 16, 33);  // 3 blocks, 8 shards
}  // namespace shard_detail
static_assert(shard_detail::kContig2.num_blocks() == 5 && shard_detail::kContig2.block_tokens(4) == 1,
              "ceil(65 / 16) blocks, the last partial");
static_assert(shard_detail::kContig2.shard_blocks(0) == 2 && shard_detail::kContig2.shard_blocks(1) == 3,
              "contiguous: the left-over block goes to the last shard");
static_assert(shard_detail::kContig2.shard_tokens(0) == 32 && shard_detail::kContig2.shard_tokens(1) == 33,
              "contiguous: token counts 32 + 33 (the partial block evens them)");
static_assert(shard_detail::kContig2.shard_of(2) == 1 && shard_detail::kContig2.local_of(2) == 0 &&
                  shard_detail::kContig2.logical_block(1, 2) == 4,
              "contiguous: block 2 opens shard 1");
static_assert(shard_detail::kRound3.shard_blocks(0) == 2 && shard_detail::kRound3.shard_blocks(2) == 1 &&
                  shard_detail::kRound3.logical_block(1, 1) == 4 && shard_detail::kRound3.shard_tokens(1) == 17,
              "round robin: shard 1 holds blocks 1 and 4 (16 + 1 tokens)");
static_assert(shard_detail::kSparse.shard_blocks(4) == 0 && shard_detail::kSparse.shard_blocks(5) == 1 &&
                  shard_detail::kSparse.shard_tokens(7) == 1 && shard_detail::kSparse.shard_of(0) == 5,
              "more shards than blocks: the first shards are empty, the last three hold one block each");
static_assert(shard_plan_error(ShardPolicy::contiguous, 9, 16, 1) == ShardPlanError::num_shards &&
                  shard_plan_error(ShardPolicy::round_robin, 1, 0, 1) == ShardPlanError::block_size &&
                  shard_plan_error(ShardPolicy::round_robin, 8, 16, 0) == ShardPlanError::none,
              "the checked bounds");

}  // namespace pa
