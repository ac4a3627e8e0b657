// Context parallelism on the CPU: shard problems, shard states, their merge.
#include "pa/reference/sharded.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace pa {

std::vector<AttentionState> merge_shard_states(const std::vector<ShardStates>& shards, const std::vector<int>& order) {
  const int n = static_cast<int>(shards.size());
  if (n < 1) throw std::invalid_argument("merge_shard_states: 0 shards; accepted: 1 or more");
  std::vector<bool> seen(n, false);
  if (static_cast<int>(order.size()) != n) {
    throw std::invalid_argument("merge_shard_states: order of " + std::to_string(order.size()) + " shards for " +
                                std::to_string(n) + "; accepted: a permutation of 0.." + std::to_string(n - 1));
  }
  for (int s : order) {
    if (s < 0 || s >= n || seen[s]) {
      throw std::invalid_argument("merge_shard_states: shard " + std::to_string(s) +
                                  " in the order is out of range or repeated; accepted: a permutation of 0.." +
                                  std::to_string(n - 1));
    }
    seen[s] = true;
  }
  const std::size_t rows = shards[0].size();
  for (int s = 1; s < n; ++s) {
    if (shards[s].size() != rows) {
      throw std::invalid_argument("merge_shard_states: shard " + std::to_string(s) + " has " +
                                  std::to_string(shards[s].size()) + " states, shard 0 has " +
                                  std::to_string(rows) + "; accepted: the same (seq, head) rows in every shard");
    }
  }
  std::vector<AttentionState> merged(rows);  // empty states, the identity of the merge
  for (int s : order)
    for (std::size_t r = 0; r < rows; ++r) merged[r] = merge_states(merged[r], shards[s][r]);
  return merged;
}

ShardedRef ref_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards) {
  make_shard_plan_checked(policy, num_shards, p.spec.block_size, 0);  // the error names the bad value
  ShardedRef r;
  r.policy = policy;
  r.num_shards = num_shards;
  for (int s = 0; s < num_shards; ++s) {
    r.shards.push_back(ref_states(shard_problem(p, policy, num_shards, s), 0, std::numeric_limits<int>::max()));
  }
  std::vector<int> order(num_shards);
  for (int s = 0; s < num_shards; ++s) order[s] = s;
  r.merged = merge_shard_states(r.shards, order);

  const int nh = p.spec.num_heads, hs = p.spec.head_size;
  r.out.assign(static_cast<std::size_t>(p.num_seqs()) * nh * hs, 0.0);
  r.lse.assign(static_cast<std::size_t>(p.num_seqs()) * nh, -std::numeric_limits<double>::infinity());
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < nh; ++h) {
      const AttentionState& m = r.merged[static_cast<std::size_t>(seq) * nh + h];
      r.lse[static_cast<std::size_t>(seq) * nh + h] = m.lse;
      for (int d = 0; d < hs; ++d) r.out[p.query.out_offset(seq, h, d)] = m.out[d];
    }
  return r;
}

}  // namespace pa
