// A problem's shards as devices hold them (pa/core/shard_problem.hpp).
#include "pa/core/shard_problem.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace pa {

ShardPlan shard_plan_of(const PagedProblem& p, int seq, ShardPolicy policy, int num_shards) {
  if (seq < 0 || seq >= p.num_seqs()) {
    throw std::invalid_argument("shard_plan_of: seq " + std::to_string(seq) + "; accepted: 0.." +
                                std::to_string(p.num_seqs() - 1));
  }
  return make_shard_plan_checked(policy, num_shards, p.spec.block_size, p.context_len(seq));
}

PagedProblem shard_problem(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard) {
  if (p.has_alibi()) {
    // A shard's kernels would measure ALiBi positions from the end of the
    // shard's tokens, not of the sequence's.
    throw std::invalid_argument("shard_problem: a problem with ALiBi slopes (context parallelism does not "
                                "support ALiBi; accepted: a problem without ALiBi)");
  }
  const int ns = p.num_seqs();
  std::vector<ShardPlan> plans;
  plans.reserve(ns);
  for (int seq = 0; seq < ns; ++seq) plans.push_back(shard_plan_of(p, seq, policy, num_shards));
  if (shard < 0 || shard >= num_shards) {
    throw std::invalid_argument("shard_problem: shard " + std::to_string(shard) + "; accepted: 0.." +
                                std::to_string(num_shards - 1) + " (num_shards " + std::to_string(num_shards) + ")");
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
  // An fp8 cache's scales are the whole cache's (chosen from all of its data
  // when the spec left them at 0): the shard's codes were quantized with them.
  l.k_scale = p.k_scale;
  l.v_scale = p.v_scale;
  if (is_fp8(p.spec.kv_dtype)) {
    l.spec.k_scale = p.k_scale;
    l.spec.v_scale = p.v_scale;
  }

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

}  // namespace pa
