// Context parallelism on the CPU: a problem's pages split over N shards
// (pa/index/shard.hpp's plan, one plan per sequence), each shard's attention
// state computed from its own pages only, and the N states merged.
//
// A shard is modelled as the device would hold it: a PagedProblem of its own
// (shard_problem, pa/core/shard_problem.hpp) whose pool contains only the shard's physical pages and
// whose block tables are compact (local block i of a sequence = the plan's
// logical_block(shard, i)). Its states are then ref_states over that local
// problem, and the merge is merge_states: the reference's one state
// computation and one merge, not new copies of them. What a GPU shard run
// must produce is therefore exactly what this file computes.
#pragma once
#include <vector>

#include "pa/core/shard_problem.hpp"
#include "pa/index/shard.hpp"
#include "pa/reference/attention.hpp"

namespace pa {

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
