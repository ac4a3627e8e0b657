// Context parallelism on the CPU: the shard plan (pa/index/shard.hpp) puts
// every logical block in exactly one shard, each shard problem holds only its
// own pages, and the shards' states merged equal attention over the whole
// context, in either merge order.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "pa/index/shard.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/sharded.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"
#include "states.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;

namespace {
const Tolerance kRef = reference_tolerance();
// An lse matters only through differences (tolerance.hpp): compared with an
// absolute bound, the reference tolerance's.
const Tolerance kRefLse{kRef.abs, 0.0};
constexpr ShardPolicy kPolicies[] = {ShardPolicy::contiguous, ShardPolicy::round_robin};
constexpr int kAllTokens = std::numeric_limits<int>::max();

// Fresh random values on every run (the seed is printed on failure).
ProblemSpec spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx, std::uint64_t salt) {
  return test::fresh_spec_of(t, head, block, heads, kv_heads, std::move(ctx), salt);
}

using test::flat_lse;
using test::flat_out;

std::string describe(const ShardPlan& p) {
  std::ostringstream o;
  o << shard_policy_name(p.policy) << " N=" << p.num_shards << " block_size=" << p.block_size
    << " context_len=" << p.context_len;
  return o.str();
}

// Every property of a plan, by enumerating its blocks and tokens; the first
// violation found, or "" when there is none.
std::string at(const char* what, int shard, int index) {
  return std::string(what) + " (shard " + std::to_string(shard) + ", " + std::to_string(index) + ")";
}

std::string plan_violation(const ShardPlan& p) {
  const int n = p.num_shards, nb = p.num_blocks(), bs = p.block_size;
  std::vector<int> owner(nb, -1);
  std::vector<int> table(nb);  // a block table row: logical block b -> "physical" 1000 + b
  for (int b = 0; b < nb; ++b) table[b] = 1000 + b;
  std::vector<bool> token_seen(p.context_len, false);
  int blocks = 0, tokens = 0, max_blocks = 0, min_blocks = INT_MAX, max_tokens = 0, min_tokens = INT_MAX;
  for (int s = 0; s < n; ++s) {
    const int sb = p.shard_blocks(s), st = p.shard_tokens(s);
    int sum_tokens = 0;
    for (int i = 0; i < sb; ++i) {
      const int b = p.logical_block(s, i);
      if (b < 0 || b >= nb) return at("local block -> no logical block", s, i);
      if (owner[b] >= 0) return at("logical block already in another shard", s, b);
      owner[b] = s;
      if (p.shard_of(b) != s || p.local_of(b) != i) return at("shard_of / local_of of logical block", s, b);
      if (i > 0 && b <= p.logical_block(s, i - 1)) return at("local blocks out of logical order", s, i);
      // A shard is a sequence of its own: only its last local block may be partial.
      if (i + 1 < sb && p.block_tokens(b) != bs) return at("partial block before the shard's last", s, b);
      if (p.local_physical_block(s, i, table.data()) != 1000 + b) return at("local_physical_block", s, i);
      sum_tokens += p.block_tokens(b);
    }
    if (sum_tokens != st) return at("shard_tokens differs from its blocks' tokens", s, st);
    if ((st + bs - 1) / bs != sb) return at("ceil(shard tokens / block size) != shard blocks", s, st);
    for (int t = 0; t < st; ++t) {
      const int lt = p.logical_token(s, t);
      if (lt < 0 || lt >= p.context_len || token_seen[lt]) return at("logical_token out of range or repeated", s, t);
      token_seen[lt] = true;
    }
    blocks += sb;
    tokens += st;
    max_blocks = std::max(max_blocks, sb);
    min_blocks = std::min(min_blocks, sb);
    max_tokens = std::max(max_tokens, st);
    min_tokens = std::min(min_tokens, st);
  }
  if (blocks != nb) return "blocks sum to " + std::to_string(blocks) + ", the context has " + std::to_string(nb);
  if (tokens != p.context_len) return "tokens sum to " + std::to_string(tokens);
  if (p.max_shard_blocks() != max_blocks) return "max_shard_blocks " + std::to_string(p.max_shard_blocks());
  for (int b = 0; b < nb; ++b)
    if (owner[b] < 0) return "logical block " + std::to_string(b) + " in no shard";
  if (p.policy == ShardPolicy::round_robin) {
    for (int b = 0; b < nb; ++b)
      if (p.shard_of(b) != b % n || p.local_of(b) != b / n)
        return at("round robin: not at (b % N, b / N)", p.shard_of(b), b);
  } else {
    if (max_blocks - min_blocks > 1) return "contiguous shards differ by more than one block";
    if (max_tokens - min_tokens > bs) return "contiguous token counts differ by more than one block";
    if (p.block_begin(0) != 0 || p.block_end(n - 1) != nb) return "contiguous runs do not span the context";
    for (int s = 0; s < n; ++s) {
      if (s + 1 < n && (p.block_end(s) != p.block_begin(s + 1) || p.shard_blocks(s) > p.shard_blocks(s + 1)))
        return at("contiguous: not adjacent to the next shard, or longer than it", s, p.shard_blocks(s));
      for (int i = 0; i < p.shard_blocks(s); ++i)
        if (p.logical_block(s, i) != p.block_begin(s) + i) return at("contiguous: not one run of blocks", s, i);
      const TokenRange r = p.token_range(s);
      if (r.begin % bs != 0 || r.len_for(p.context_len) != p.shard_tokens(s) ||
          (p.shard_tokens(s) > 0 && r.begin_for(p.context_len) != p.logical_token(s, 0)))
        return at("contiguous: token_range, begin", s, r.begin);
    }
  }
  return "";
}
}  // namespace

TEST_CASE("shard plan: every block in exactly one shard, tokens sum to the context", "[reference][sharded]") {
  const int block_sizes[] = {1, 3, 16, 32};
  constexpr int kMaxContext = 200;
  int cases = 0;
  for (ShardPolicy policy : kPolicies)
    for (int n = 1; n <= kMaxShards; ++n)
      for (int bs : block_sizes)
        for (int ctx = 0; ctx <= kMaxContext; ++ctx) {
          const ShardPlan plan = make_shard_plan_checked(policy, n, bs, ctx);
          const std::string v = plan_violation(plan);
          INFO(describe(plan) << ": " << v);
          REQUIRE(v.empty());
          ++cases;
        }
  REQUIRE(cases == 2 * kMaxShards * 4 * (kMaxContext + 1));
}

TEST_CASE("shard plan: contexts near INT_MAX stay exact", "[reference][sharded]") {
  int cases = 0;
  for (ShardPolicy policy : kPolicies)
    for (int n = 1; n <= kMaxShards; ++n)
      for (int bs : {1, 16})
        for (int ctx : {1 << 20, INT_MAX}) {
          const ShardPlan p = make_shard_plan_checked(policy, n, bs, ctx);
          INFO(describe(p));
          std::int64_t blocks = 0, tokens = 0;
          int lo = INT_MAX, hi = 0;
          for (int s = 0; s < n; ++s) {
            blocks += p.shard_blocks(s);
            tokens += p.shard_tokens(s);
            lo = std::min(lo, p.shard_blocks(s));
            hi = std::max(hi, p.shard_blocks(s));
            // The first and last local block come back to this shard.
            const int first = p.logical_block(s, 0), last = p.logical_block(s, p.shard_blocks(s) - 1);
            REQUIRE(p.shard_of(first) == s);
            REQUIRE(p.local_of(first) == 0);
            REQUIRE(p.shard_of(last) == s);
            REQUIRE(p.local_of(last) == p.shard_blocks(s) - 1);
            REQUIRE(p.logical_token(s, p.shard_tokens(s) - 1) < ctx);
          }
          REQUIRE(blocks == p.num_blocks());
          REQUIRE(tokens == ctx);
          REQUIRE(hi - lo <= 1);
          const int last_holder = p.shard_of(p.num_blocks() - 1);  // holds the context's last token
          REQUIRE(p.logical_token(last_holder, p.shard_tokens(last_holder) - 1) == ctx - 1);
          ++cases;
        }
  REQUIRE(cases == 2 * kMaxShards * 2 * 2);
}

TEST_CASE("shard plan: bad parameters are refused with the value named", "[reference][sharded]") {
  int refused = 0;
  for (int n : {0, -1, kMaxShards + 1}) {
    REQUIRE_THROWS_WITH(make_shard_plan_checked(ShardPolicy::contiguous, n, 16, 100),
                        ContainsSubstring("num_shards " + std::to_string(n)) && ContainsSubstring("1..8"));
    ++refused;
  }
  REQUIRE(refused == 3);
  REQUIRE_THROWS_WITH(make_shard_plan_checked(ShardPolicy::round_robin, 2, 0, 100),
                      ContainsSubstring("block_size 0") && ContainsSubstring(">= 1"));
  REQUIRE_THROWS_WITH(make_shard_plan_checked(ShardPolicy::round_robin, 2, 16, -3),
                      ContainsSubstring("context_len -3") && ContainsSubstring(">= 0"));
  REQUIRE_THROWS_WITH(make_shard_plan_checked(static_cast<ShardPolicy>(7), 2, 16, 100),
                      ContainsSubstring("policy 7") && ContainsSubstring("contiguous, round_robin"));
  for (ShardPolicy policy : kPolicies) REQUIRE(shard_policy_from_name(shard_policy_name(policy)) == policy);
  REQUIRE(!shard_policy_from_name("striped"));

  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 2, 2, {40}, 100));
  REQUIRE_THROWS_WITH(shard_problem(p, ShardPolicy::contiguous, 3, 3),
                      ContainsSubstring("shard 3") && ContainsSubstring("0..2"));
  REQUIRE_THROWS_WITH(shard_problem(p, ShardPolicy::contiguous, 3, -1), ContainsSubstring("shard -1"));
  REQUIRE_THROWS_WITH(ref_sharded(p, ShardPolicy::round_robin, 0), ContainsSubstring("num_shards 0"));
  REQUIRE_THROWS_WITH(ref_sharded(p, ShardPolicy::round_robin, 9), ContainsSubstring("num_shards 9"));
  const ShardedRef r = ref_sharded(p, ShardPolicy::round_robin, 2);
  REQUIRE_THROWS_WITH(merge_shard_states(r.shards, {0, 0}),
                      ContainsSubstring("shard 0") && ContainsSubstring("permutation"));
  REQUIRE_THROWS_WITH(merge_shard_states(r.shards, {0}), ContainsSubstring("order of 1 shards for 2"));
  REQUIRE_THROWS_WITH(merge_shard_states(r.shards, {1, 2}), ContainsSubstring("shard 2"));
  REQUIRE_THROWS_WITH(merge_shard_states({}, {}), ContainsSubstring("0 shards"));
  REQUIRE_THROWS_WITH(merge_shard_states({r.shards[0], ShardStates(1)}, {0, 1}),
                      ContainsSubstring("shard 1 has 1 states"));
}

TEST_CASE("sharded states merged equal unsharded attention (both policies, 1-8 shards, GQA/MQA)",
          "[reference][sharded]") {
  const auto dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  // Contexts: 1 token, a partial block, one full block, uneven block counts,
  // and one of 3 blocks (shards beyond 3 hold nothing of it). The second
  // problem is so short that most shards hold nothing at all.
  const std::vector<std::vector<int>> contexts = {{1, 15, 16, 37, 200, 33}, {1, 20}};
  const std::pair<int, int> heads[] = {{4, 4}, {8, 2}, {8, 1}};  // MHA, GQA, MQA
  int cases = 0;
  for (std::size_t ci = 0; ci < contexts.size(); ++ci)
    for (const auto& [nh, nkv] : heads) {
      const PagedProblem p = make_problem(spec_of(dt, 64, 16, nh, nkv, contexts[ci], 200 + ci * 10 + nh + nkv));
      INFO(p.spec.describe());
      const auto expected = ref_output(p);
      const auto whole = ref_states(p, 0, kAllTokens);
      for (ShardPolicy policy : kPolicies)
        for (int n = 1; n <= kMaxShards; ++n) {
          INFO(shard_policy_name(policy) << ", " << n << " shards");
          const ShardedRef r = ref_sharded(p, policy, n);
          REQUIRE(static_cast<int>(r.shards.size()) == n);
          test::require_close(expected, r.out, kRef);
          test::require_close(flat_lse(whole), r.lse, kRefLse);
          REQUIRE(flat_lse(r.merged) == r.lse);

          // Merge order: the reverse fold agrees within rounding.
          std::vector<int> reverse(n);
          for (int s = 0; s < n; ++s) reverse[s] = n - 1 - s;
          const auto backwards = merge_shard_states(r.shards, reverse);
          test::require_close(flat_out(r.merged), flat_out(backwards), kRef);
          test::require_close(flat_lse(r.merged), flat_lse(backwards), kRefLse);
          // The fold is the one its order names (rounding depends on it): the
          // fixed order 0..N-1 and a rotation, folded here by hand, bit for bit.
          std::vector<int> forward(n), rotated(n);
          for (int s = 0; s < n; ++s) forward[s] = s, rotated[s] = (s + 1) % n;
          for (const auto& [order, merged] : {std::pair{forward, r.merged},
                                              std::pair{rotated, merge_shard_states(r.shards, rotated)}}) {
            for (std::size_t row = 0; row < merged.size(); ++row) {
              AttentionState acc;
              for (int s : order) acc = merge_states(acc, r.shards[s][row]);
              REQUIRE(acc.out == merged[row].out);
              REQUIRE(acc.lse == merged[row].lse);
            }
          }

          for (int seq = 0; seq < p.num_seqs(); ++seq) {
            const ShardPlan plan = shard_plan_of(p, seq, policy, n);
            for (int s = 0; s < n; ++s) {
              // Contiguous shards are token ranges: the same arithmetic as
              // ref_states over that range, so the same bits.
              std::vector<AttentionState> in_place;
              if (policy == ShardPolicy::contiguous) {
                const TokenRange tr = plan.token_range(s);
                in_place = ref_states(p, tr.begin, tr.end_for(p.context_len(seq)));
              }
              for (int h = 0; h < nh; ++h) {
                const std::size_t row = static_cast<std::size_t>(seq) * nh + h;
                const AttentionState& st = r.shards[s][row];
                // Empty exactly when the shard holds none of the sequence: (0, -inf).
                REQUIRE(st.empty() == (plan.shard_tokens(s) == 0));
                if (st.empty()) REQUIRE(st.out == std::vector<double>(64, 0.0));
                if (n == 1) {  // one shard: the whole context, bit for bit
                  REQUIRE(st.out == whole[row].out);
                  REQUIRE(st.lse == whole[row].lse);
                }
                if (policy == ShardPolicy::contiguous) {
                  REQUIRE(st.out == in_place[row].out);
                  REQUIRE(st.lse == in_place[row].lse);
                }
              }
            }
          }
          ++cases;
        }
    }
  REQUIRE(cases == 2 * 3 * 2 * kMaxShards);
}

TEST_CASE("sharded: a context of one token comes through the merge unchanged", "[reference][sharded]") {
  const PagedProblem p = make_problem(spec_of(DType::bf16, 64, 16, 4, 2, {1, 1}, 300));
  const auto whole = ref_states(p, 0, kAllTokens);
  int cases = 0;
  for (ShardPolicy policy : kPolicies)
    for (int n = 1; n <= kMaxShards; ++n) {
      INFO(shard_policy_name(policy) << ", " << n << " shards");
      const ShardedRef r = ref_sharded(p, policy, n);
      // The one block is on shard 0 (round robin) or on the last shard
      // (contiguous: the left-over block goes to the last shards).
      const int holder = policy == ShardPolicy::round_robin ? 0 : n - 1;
      for (int seq = 0; seq < 2; ++seq)
        for (int h = 0; h < 4; ++h) {
          const std::size_t row = static_cast<std::size_t>(seq) * 4 + h;
          for (int s = 0; s < n; ++s) REQUIRE(r.shards[s][row].empty() == (s != holder));
          // Merging with empty states is exact: the output is V of the token, p = 1.
          REQUIRE(r.merged[row].lse == whole[row].lse);
          for (int d = 0; d < 64; ++d) REQUIRE(r.merged[row].out[d] == double(p.v_at(seq, p.kv_head(h), 0, d)));
        }
      ++cases;
    }
  REQUIRE(cases == 2 * kMaxShards);
}

TEST_CASE("shard problems hold only their own pages, copied whole", "[reference][sharded]") {
  const auto prefix = GENERATE(0, 64);  // 64: a cascade prefix of 4 pages shared by both sequences
  // An fp8 cache too: its codes and the whole cache's scales go with the pages.
  const auto kv = GENERATE(KvDType::same, KvDType::fp8_e5m2);
  ProblemSpec s = spec_of(DType::f16, 64, 16, 4, 2, {64, 256, 100}, 400 + prefix);
  s.shared_prefix_len = prefix;
  s.kv_dtype = kv;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const int pages_used = p.num_blocks - s.spare_blocks;
  const std::size_t elems = static_cast<std::size_t>(p.cache.block_elems());
  const std::size_t elem_bytes = static_cast<std::size_t>(kv_elem_bytes(s.dtype, s.kv_dtype));
  int cases = 0;
  for (ShardPolicy policy : kPolicies)
    for (int n = 1; n <= kMaxShards; ++n) {
      INFO(shard_policy_name(policy) << ", " << n << " shards");
      int pool_sum = 0;
      for (int sh = 0; sh < n; ++sh) {
        const PagedProblem l = shard_problem(p, policy, n, sh);
        std::set<int> pages;
        int widest = 0;
        for (int seq = 0; seq < p.num_seqs(); ++seq) {
          const ShardPlan plan = shard_plan_of(p, seq, policy, n);
          REQUIRE(l.context_len(seq) == plan.shard_tokens(sh));
          REQUIRE(l.num_logical_blocks(seq) == plan.shard_blocks(sh));
          widest = std::max(widest, plan.shard_blocks(sh));
          for (int i = 0; i < l.max_blocks_per_seq; ++i) {
            const int local = l.block_tables[l.table.offset(seq, i)];
            if (i >= plan.shard_blocks(sh)) {
              REQUIRE(local == kNoBlock);
              continue;
            }
            REQUIRE((local >= 0 && local < l.num_blocks));
            const int phys = p.physical_block(seq, plan.logical_block(sh, i));
            pages.insert(phys);
            // The page's bytes, NaN tail included, are the original's.
            REQUIRE(std::memcmp(l.k_bytes.data() + local * elems * elem_bytes,
                                p.k_bytes.data() + phys * elems * elem_bytes, elems * elem_bytes) == 0);
            REQUIRE(std::memcmp(l.v_bytes.data() + local * elems * elem_bytes,
                                p.v_bytes.data() + phys * elems * elem_bytes, elems * elem_bytes) == 0);
          }
          // Token by token, through both block tables: the same K and V.
          for (int t = 0; t < l.context_len(seq); ++t)
            for (int kvh = 0; kvh < 2; ++kvh)
              for (int d = 0; d < 64; ++d) {
                REQUIRE(l.k_at(seq, kvh, t, d) == p.k_at(seq, kvh, plan.logical_token(sh, t), d));
                REQUIRE(l.v_at(seq, kvh, t, d) == p.v_at(seq, kvh, plan.logical_token(sh, t), d));
              }
        }
        REQUIRE(l.num_blocks == static_cast<int>(pages.size()));  // each page once, no others
        REQUIRE(l.k_cache.size() == static_cast<std::size_t>(l.cache.total_elems()));
        REQUIRE(l.k_bytes.size() == l.k_cache.size() * elem_bytes);
        REQUIRE(l.max_blocks_per_seq == widest);
        REQUIRE(l.spec.max_blocks_per_seq() == widest);
        REQUIRE(l.q == p.q);
        REQUIRE(l.k_scale == p.k_scale);
        REQUIRE(l.v_scale == p.v_scale);
        pool_sum += l.num_blocks;
      }
      if (policy == ShardPolicy::round_robin || prefix == 0) {
        REQUIRE(pool_sum == pages_used);  // every page on exactly one shard
      } else if (n == 2) {
        // Contiguous with a shared prefix: sequence 0 (4 blocks) puts prefix
        // blocks 2-3 on shard 1, sequence 1 (16 blocks) on shard 0: both hold them.
        REQUIRE(pool_sum == pages_used + 2);
      } else {
        REQUIRE(pool_sum >= pages_used);
      }
      ++cases;
    }
  REQUIRE(cases == 2 * kMaxShards);
}

TEST_CASE("sharded state layout: shard-major, as an all-gather concatenates", "[reference][sharded]") {
  int cases = 0;
  for (int n = 1; n <= kMaxShards; ++n) {
    const ShardedStateGeometry g{n, 3, StateGeometry{4, 8}};
    std::int64_t next_out = 0, next_lse = 0;
    for (int s = 0; s < n; ++s)
      for (int seq = 0; seq < 3; ++seq)
        for (int h = 0; h < 4; ++h) {
          REQUIRE(g.lse_offset(s, seq, h) == next_lse++);
          for (int d = 0; d < 8; ++d) REQUIRE(g.out_offset(s, seq, h, d) == next_out++);
        }
    REQUIRE(next_out == n * g.out_elems_per_shard());
    REQUIRE(next_lse == n * g.rows_per_shard());
    REQUIRE(g.state_bytes_per_shard() == 12 * (8 + 1) * static_cast<std::int64_t>(sizeof(float)));
    ++cases;
  }
  REQUIRE(cases == kMaxShards);
}
