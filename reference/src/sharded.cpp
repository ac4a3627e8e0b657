// Context parallelism on the CPU: shard problems, shard states, their merge.
#include "pa/reference/sharded.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace pa {

ShardPlan shard_plan_of(const PagedProblem& p, int seq, ShardPolicy policy, int num_shards) {
  if (seq < 0 || seq >= p.num_seqs()) {
    throw std::invalid_argument("shard_plan_of: seq " + std::to_string(seq) + "; accepted: 0.." +
                                std::to_string(p.num_seqs() - 1));
  }
  return make_shard_plan_checked(policy, num_shards, p.spec.block_size, p.context_len(seq));
}

PagedProblem shard_problem(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard) {
  const int ns = p.num_seqs();
  std::vector<ShardPlan> plans;
  plans.reserve(ns);
  for (int seq = 0; seq < ns; ++seq) plans.push_back(shard_plan_of(p, seq, policy, num_shards));
  if (shard < 0 || shard >= num_shards) {
    throw std::invalid_argument("shard_problem: shard " + std::to_string(shard) + "; accepted: 0.." +
                                std::to_string(num_shards - 1) + " (num_shards " + std::to_string(num_shards) +
                                ")");
  }

  PagedProblem l;
  l.spec = p.spec;
  l.spec.shared_prefix_len = 0;
  l.spec.spare_blocks = 0;
  l.context_lens.resize(ns);
  for (int seq = 0; seq < ns; ++seq) {
    l.context_lens[seq] = plans[seq].shard_tokens(shard);
    l.max_blocks_per_seq = std::max(l.max_blocks_per_seq, plans[seq].shard_blocks(shard));
  }
  l.spec.context_lens = l.context_lens;
  l.table = BlockTableGeometry{l.max_blocks_per_seq};

  // Compact tables; each distinct physical page gets one local page.
  l.block_tables.assign(static_cast<std::size_t>(ns) * l.max_blocks_per_seq, kNoBlock);
  std::vector<int> local_page(static_cast<std::size_t>(p.num_blocks), kNoBlock);
  std::vector<int> pages;  // local page -> physical page of p
  for (int seq = 0; seq < ns; ++seq) {
    for (int i = 0; i < plans[seq].shard_blocks(shard); ++i) {
      const int phys = p.physical_block(seq, plans[seq].logical_block(shard, i));
      if (local_page[phys] == kNoBlock) {
        local_page[phys] = static_cast<int>(pages.size());
        pages.push_back(phys);
      }
      l.block_tables[l.table.offset(seq, i)] = local_page[phys];
    }
  }
  l.num_blocks = static_cast<int>(pages.size());
  l.cache = p.cache;
  l.cache.num_blocks = l.num_blocks;

  // Whole pages: the block region of the layout is contiguous, in the floats
  // and in the stored bytes alike.
  const std::size_t elems = static_cast<std::size_t>(p.cache.block_elems());
  const std::size_t elem_bytes = p.k_cache.empty() ? 0 : p.k_bytes.size() / p.k_cache.size();
  l.k_cache.resize(elems * pages.size());
  l.v_cache.resize(elems * pages.size());
  l.k_bytes.resize(elems * elem_bytes * pages.size());
  l.v_bytes.resize(elems * elem_bytes * pages.size());
  for (std::size_t i = 0; i < pages.size(); ++i) {
    const std::size_t from = static_cast<std::size_t>(pages[i]) * elems, to = i * elems;
    std::copy_n(p.k_cache.begin() + from, elems, l.k_cache.begin() + to);
    std::copy_n(p.v_cache.begin() + from, elems, l.v_cache.begin() + to);
    std::copy_n(p.k_bytes.begin() + from * elem_bytes, elems * elem_bytes, l.k_bytes.begin() + to * elem_bytes);
    std::copy_n(p.v_bytes.begin() + from * elem_bytes, elems * elem_bytes, l.v_bytes.begin() + to * elem_bytes);
  }

  // Every device decodes the same queries.
  l.query = p.query;
  l.q_stride = p.q_stride;
  l.q = p.q;
  l.q_bytes = p.q_bytes;
  return l;
}

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
