// Context parallelism on one GPU (label gpu; SKIPPED without a GPU): a
// problem's pages split over N shards (pa/index/shard.hpp), each shard
// uploaded as a device would hold it (ShardDecoder: only its pages) and
// decoded by stage 8 into its attention state, one after another, and the
// states merged by the merge kernel in shard order (run_sharded). The result
// must be unsharded attention (the reference) and the CPU reference of the
// sharded computation (ref_sharded). This is the computation the NCCL path
// spreads over devices, with the exchange left out; the multi-GPU test
// (test_context_parallel_nccl.cpp) checks that path against this one.
//
// The merged output comes back in the problem's dtype: compared with that
// dtype's tolerance, the lse absolutely (lse_tolerance). The fold of N
// states is a chain of two-state merges: it must equal the two-state merge
// kernel applied in the same order bit for bit, and the sums form of the
// merge (what an all-reduce computes) must agree with it within tolerance.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/shard_problem.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade_run.hpp"
#include "pa/kernels/context_parallel.hpp"
#include "pa/kernels/shard_merge.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/sharded.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using namespace pa::kernels;

namespace {

std::vector<double> ref_lse_of(const PagedProblem& p) {
  std::vector<double> lse;
  for (const AttentionState& s : ref_states(p, 0, std::numeric_limits<int>::max())) lse.push_back(s.lse);
  return lse;
}

// Shard s's slice of a shard-major vector of `per_shard` values.
std::vector<float> slice(const std::vector<float>& v, int s, std::size_t per_shard) {
  return {v.begin() + s * per_shard, v.begin() + (s + 1) * per_shard};
}


}  // namespace

TEST_CASE("context parallelism on one GPU: stage 8 per shard, merged in shard order, equals unsharded attention",
          "[gpu][shard]") {
  PA_REQUIRE_GPU();
  int ran = 0;
  for (DType dt : {DType::f16, DType::bf16}) {
    // 1000 and 517 tokens end in a partial block; 17 tokens are 2 blocks, so
    // with 3 or more shards some shards hold none of that sequence (empty
    // states), and with 8 shards contiguous the first six hold nothing of it.
    // GQA 4:1 and a long sequence that stage 8 splits.
    ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, 8, 2, {1000, 129, 517, 17, 5000}, 41);
    const PagedProblem p = make_problem(spec);
    const std::vector<double> want = ref_output(p), want_lse = ref_lse_of(p);
    for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::round_robin}) {
      for (int n : {1, 2, 3, 5, 8}) {
        INFO(dtype_name(dt) << " " << shard_policy_name(policy) << " x " << n);
        const ShardedRun got = run_sharded(p, policy, n);
        REQUIRE(got.plans.size() == static_cast<std::size_t>(n));
        test::require_close(want, got.out, tolerance_for(dt));
        test::require_close(want_lse, got.lse, lse_tolerance(dt));
        const ShardedRef ref = ref_sharded(p, policy, n);
        test::require_close(ref.out, got.out, tolerance_for(dt));
        // Each shard's state against the reference's state of that shard.
        const std::size_t rows = static_cast<std::size_t>(p.num_seqs()) * spec.num_heads;
        int empty = 0;
        for (int s = 0; s < n; ++s) {
          std::vector<float> lse = slice(got.states_lse, s, rows);
          const std::vector<float> out = slice(got.states_out, s, rows * spec.head_size);
          std::vector<double> ref_lse, ref_out;
          for (const AttentionState& st : ref.shards[s]) {
            ref_lse.push_back(st.lse);
            ref_out.insert(ref_out.end(), st.out.begin(), st.out.end());
          }
          for (std::size_t r = 0; r < rows; ++r) {
            if (ref_lse[r] != -std::numeric_limits<double>::infinity()) continue;
            // The empty state exactly: lse -inf, out 0.
            REQUIRE(lse[r] == -std::numeric_limits<float>::infinity());
            for (int d = 0; d < spec.head_size; ++d) REQUIRE(out[r * spec.head_size + d] == 0.f);
            lse[r] = 0;  // compared exactly above; the tolerance check below takes finite values
            ref_lse[r] = 0;
            ++empty;
          }
          test::require_close(ref_lse, lse, lse_tolerance(dt));  // stage 8 rounds P to the dtype
          test::require_close(ref_out, out, tolerance_for(dt));
        }
        // Sequence 3 (17 tokens, 2 blocks) is absent from n - 2 shards, for each of its 8 heads.
        if (n >= 3) CHECK(empty >= (n - 2) * spec.num_heads);
        ++ran;
      }
    }
  }
  CHECK(ran == 2 * 2 * 5);
}

TEST_CASE("context parallelism: the fold of N states equals the two-state merge kernel chained, bit for bit",
          "[gpu][shard]") {
  PA_REQUIRE_GPU();
  const ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 8, 8, {700, 33, 260}, 43);
  const PagedProblem p = make_problem(spec);
  const int n = 5, seqs = p.num_seqs(), heads = spec.num_heads, hs = spec.head_size;
  const std::size_t rows = static_cast<std::size_t>(seqs) * heads;
  int ran = 0;
  // Round robin: every shard holds some of each sequence. Contiguous: 33
  // tokens are 3 blocks, so the first two shards hold none of sequence 1
  // (empty states first in the fold).
  for (ShardPolicy policy : {ShardPolicy::round_robin, ShardPolicy::contiguous}) {
    INFO(shard_policy_name(policy));
    const ShardedRun got = run_sharded(p, policy, n);
    // merge(...merge(merge(s0, s1), s2)...) with float intermediates; the last in f16 as the fold writes it.
    std::vector<float> out = slice(got.states_out, 0, rows * hs), lse = slice(got.states_lse, 0, rows);
    for (int s = 1; s < n; ++s) {
      const MergeRun m = run_merge(out, lse, slice(got.states_out, s, rows * hs), slice(got.states_lse, s, rows),
                                   seqs, heads, hs, s + 1 == n ? DType::f16 : DType::f32);
      out = m.out;
      lse = m.lse;
    }
    CHECK(same_bits(out, got.out));
    CHECK(same_bits(lse, got.lse));
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("context parallelism on one GPU: shards that hold no page at all", "[gpu][shard]") {
  PA_REQUIRE_GPU();
  // 17 tokens (2 blocks) over 8 contiguous shards: shards 0-5 hold nothing
  // (an empty pool: one zero page, never read) and write empty states.
  const ProblemSpec spec = test::fresh_spec_of(DType::bf16, 128, 16, 4, 4, {17}, 47);
  const PagedProblem p = make_problem(spec);
  const ShardedRun got = run_sharded(p, ShardPolicy::contiguous, 8);
  const std::size_t rows = spec.num_heads;
  int empty = 0;
  for (int s = 0; s < 8; ++s)
    for (std::size_t r = 0; r < rows; ++r)
      if (got.states_lse[s * rows + r] == -std::numeric_limits<float>::infinity()) ++empty;
  CHECK(empty == 6 * spec.num_heads);
  test::require_close(ref_output(p), got.out, tolerance_for(DType::bf16));
  test::require_close(ref_lse_of(p), got.lse, lse_tolerance(DType::bf16));
}

TEST_CASE("context parallelism: the merge as sums (weigh, add, normalize) agrees with the fold", "[gpu][shard]") {
  PA_REQUIRE_GPU();
  const ProblemSpec spec = test::fresh_spec_of(DType::bf16, 128, 16, 4, 1, {900, 17, 64}, 44);
  const PagedProblem p = make_problem(spec);
  const int n = 4, hs = spec.head_size;
  const std::int64_t rows = static_cast<std::int64_t>(p.num_seqs()) * spec.num_heads;
  const ShardedRun got = run_sharded(p, ShardPolicy::contiguous, n);
  // Row 0 made empty in every shard (lse -inf, out NaN: never to be read):
  // the normalize step must give the empty state (out 0, lse -inf) for it.
  ShardedRun states = got;
  for (int s = 0; s < n; ++s) {
    states.states_lse[s * rows] = -std::numeric_limits<float>::infinity();
    for (int d = 0; d < hs; ++d) states.states_out[s * rows * hs + d] = std::numeric_limits<float>::quiet_NaN();
  }
  // The all-reduces done on the host: the max of the lse, then the sum of the weighted states.
  std::vector<float> max_lse(rows, -std::numeric_limits<float>::infinity());
  for (int s = 0; s < n; ++s)
    for (std::int64_t r = 0; r < rows; ++r) max_lse[r] = std::max(max_lse[r], states.states_lse[s * rows + r]);
  DeviceBuffer d_max(rows * 4), d_out(rows * hs * 4), d_lse(rows * 4), d_sums(state_sum_elems(rows, hs) * 4);
  d_max.upload(max_lse.data(), rows * 4);
  std::vector<double> sums(state_sum_elems(rows, hs), 0.0);
  for (int s = 0; s < n; ++s) {
    const std::vector<float> o = slice(states.states_out, s, rows * hs), l = slice(states.states_lse, s, rows);
    d_out.upload(o.data(), o.size() * 4);
    d_lse.upload(l.data(), l.size() * 4);
    d_sums.fill_bytes(0xFF);
    StateSumArgs a;
    a.state_out = static_cast<const float*>(d_out.get());
    a.state_lse = static_cast<const float*>(d_lse.get());
    a.max_lse = static_cast<const float*>(d_max.get());
    a.sums = static_cast<float*>(d_sums.get());
    a.rows = rows;
    a.head_size = hs;
    launch_weigh_state(a);
    const std::vector<float> w = download_floats(d_sums, sums.size());
    for (std::size_t i = 0; i < sums.size(); ++i) {
      REQUIRE(!std::isnan(w[i]));  // every element written, none NaN (an empty state is never read)
      sums[i] += w[i];
    }
  }
  std::vector<float> sums_f(sums.begin(), sums.end());
  d_sums.upload(sums_f.data(), sums_f.size() * 4);
  DeviceBuffer out(rows * hs * 2), lse(rows * 4);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  StateSumArgs a;
  a.max_lse = static_cast<const float*>(d_max.get());
  a.sums = static_cast<float*>(d_sums.get());
  a.out = out.get();
  a.out_dtype = DType::bf16;
  a.out_lse = static_cast<float*>(lse.get());
  a.rows = rows;
  a.head_size = hs;
  launch_normalize_sums(a);
  std::vector<float> o = download_decoded(out, rows * hs, DType::bf16), l = download_floats(lse, rows);
  CHECK(l[0] == -std::numeric_limits<float>::infinity());
  for (int d = 0; d < hs; ++d) REQUIRE(o[d] == 0.f);
  // The other rows against the fold and the reference (row 0 compared above).
  std::vector<double> fold_out(got.out.begin(), got.out.end()), fold_lse(got.lse.begin(), got.lse.end());
  std::vector<double> ref = ref_output(p);
  for (int d = 0; d < hs; ++d) fold_out[d] = ref[d] = 0.0;
  fold_lse[0] = 0.0;
  l[0] = 0.f;
  test::require_close(fold_out, o, tolerance_for(DType::bf16));
  test::require_close(fold_lse, l, lse_tolerance(DType::bf16));
  test::require_close(ref, o, tolerance_for(DType::bf16));
}

TEST_CASE("context parallelism: a batch decoded in sequence groups equals the reference", "[gpu][shard]") {
  PA_REQUIRE_GPU();
  const ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 8, 2, {3000, 17, 700, 1200, 64}, 46);
  const PagedProblem p = make_problem(spec);
  const std::vector<double> want = ref_output(p), want_lse = ref_lse_of(p);
  int ran = 0;
  for (int groups : {2, 3, 5}) {
    INFO(groups << " sequence groups");
    const ShardedRun got = run_sharded(p, ShardPolicy::round_robin, 3, groups);
    REQUIRE(got.plans.size() == 3);
    test::require_close(want, got.out, tolerance_for(DType::f16));
    test::require_close(want_lse, got.lse, lse_tolerance(DType::f16));
    ++ran;
  }
  CHECK(ran == 3);
}

TEST_CASE("context parallelism: even sequence groups", "[shard]") {
  CHECK(even_sequence_groups(5, 1) == std::vector<int>{0, 5});
  CHECK(even_sequence_groups(5, 2) == std::vector<int>{0, 3, 5});
  CHECK(even_sequence_groups(4, 4) == std::vector<int>{0, 1, 2, 3, 4});
  CHECK(even_sequence_groups(7, 3) == std::vector<int>{0, 3, 5, 7});
  int ran = 0;
  for (int g : {0, 6}) {
    try {
      (void)even_sequence_groups(5, g);
      FAIL("accepted " << g << " groups of 5 sequences");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(std::to_string(g) + " groups of 5 sequences") != std::string::npos);
      ++ran;
    }
  }
  CHECK(ran == 2);
}

TEST_CASE("context parallelism: bad shard arguments name the value", "[gpu][shard]") {
  PA_REQUIRE_GPU();
  const PagedProblem p = make_problem(test::spec_of(DType::f16, 128, 16, 4, 4, {100}, 45));
  int ran = 0;
  for (int n : {0, kMaxShards + 1}) {
    try {
      (void)run_sharded(p, ShardPolicy::contiguous, n);
      FAIL("accepted num_shards " << n);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("num_shards " + std::to_string(n)) != std::string::npos);
      ++ran;
    }
  }
  CHECK(ran == 2);
}
