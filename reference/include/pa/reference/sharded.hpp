// Context parallelism on the CPU: a problem's pages split over N shards
// (pa/index/shard.hpp's plan, one plan per sequence), each shard's attention
// state computed from its own pages only, and the N states merged.
//
// A shard is modelled as the device would hold it: a PagedProblem of its own
// (shard_problem) whose pool contains only the shard's physical pages and
// whose block tables are compact (local block i of a sequence = the plan's
// logical_block(shard, i)). Its states are then ref_states over that local
// problem, and the merge is merge_states: the reference's one state
// computation and one merge, not new copies of them. What a GPU shard run
// must produce is therefore exactly what this file computes.
#pragma once
#include <vector>

#include "pa/index/shard.hpp"
#include "pa/reference/attention.hpp"

namespace pa {

// The plan of sequence seq of p (checked: std::invalid_argument naming the
// bad value for a policy or shard count the plan refuses).
ShardPlan shard_plan_of(const PagedProblem& p, int seq, ShardPolicy policy, int num_shards);

// Shard `shard` of p as a device holds it:
// - pool: the distinct physical pages the shard's blocks use, each once (a
//   page shared by several sequences, a cascade prefix, stays shared), in
//   order of first use (sequence by sequence, local block by local block),
//   with their K/V bytes and decoded floats copied whole (tails included);
// - block_tables [num_seqs, max over sequences of the shard's blocks],
//   local -> local physical page, kNoBlock past each sequence's blocks;
// - context_lens and spec.context_lens: the shard's token counts, which may be
//   0 (the shard holds none of that sequence). ProblemSpec::validate refuses
//   0, so the local problem is not re-validated; its states for such a
//   sequence are empty.
// - Q, dtype, heads, seed: those of p. spec.shared_prefix_len = 0 and
//   spec.spare_blocks = 0: the pool has no spare pages, and a shard's first
//   local blocks are not in general the same pages for every sequence.
// Throws std::invalid_argument for shard outside [0, num_shards).
PagedProblem shard_problem(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard);

// States of one shard: index seq * num_heads + head.
using ShardStates = std::vector<AttentionState>;

// Left fold of the shards' states in `order` (a permutation of 0..N-1):
// merge_states(...merge_states(merge_states(empty, s[order[0]]), s[order[1]])...).
// The empty start is the identity, so the first shard's state comes through
// unchanged. Throws std::invalid_argument when order is not a permutation of
// the shards or the shards disagree on the number of (seq, head) rows.
std::vector<AttentionState> merge_shard_states(const std::vector<ShardStates>& shards, const std::vector<int>& order);

struct ShardedRef {
  ShardPolicy policy = ShardPolicy::contiguous;
  int num_shards = 1;
  std::vector<ShardStates> shards;     // [shard][seq * num_heads + head]
  std::vector<AttentionState> merged;  // shards merged in order 0, 1, ..., N-1
  std::vector<double> out;             // merged outputs, [seq][head][head_size]
  std::vector<double> lse;             // merged lse (natural log), [seq][head]
};
// The states of every shard (over shard_problem) and their merge in the
// fixed order. Throws std::invalid_argument for a policy or shard count the
// plan refuses.
ShardedRef ref_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards);

}  // namespace pa
