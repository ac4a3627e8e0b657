// A ProblemSpec from its shape, for tests: dtype, head size, block size,
// query heads, KV heads, context lengths and the seed of its random values.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "pa/core/problem.hpp"
#include "random_seed.hpp"

namespace pa::test {

inline ProblemSpec spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx,
                           std::uint64_t seed) {
  ProblemSpec s;
  s.dtype = t;
  s.head_size = head;
  s.block_size = block;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.context_lens = std::move(ctx);
  s.seed = seed;
  return s;
}

// The same with fresh random values on every run (random_seed.hpp: the seed
// is printed on failure).
inline ProblemSpec fresh_spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx,
                                 std::uint64_t salt) {
  return spec_of(t, head, block, heads, kv_heads, std::move(ctx), fresh_seed(salt));
}

}  // namespace pa::test
