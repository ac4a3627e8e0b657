// Context parallelism's data: a problem's pages split over N shards
// (pa/index/shard.hpp's plan, one plan per sequence), and one shard as a
// device holds it, a PagedProblem of its own. Plain data manipulation, in the
// bottom layer: the kernels upload a shard (pa/kernels/context_parallel.hpp)
// and the reference computes its states (pa/reference/sharded.hpp) from the
// same shard problem.
#pragma once
#include "pa/core/paged_cache.hpp"
#include "pa/index/shard.hpp"

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
// Throws std::invalid_argument for a problem with ALiBi slopes (not supported
// across shards).
PagedProblem shard_problem(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard);

}  // namespace pa
