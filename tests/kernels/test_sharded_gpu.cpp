// Context parallelism on one GPU (label gpu; SKIPPED without a GPU): a long
// problem's pages split over N shards (pa/index/shard.hpp), each shard run on
// its own pages as a device would hold them (shard_problem), one after
// another, through the stage 6 kernel (its output and lse are the shard's
// attention state), and the states merged by the merge kernel in shard order.
// The result must be unsharded attention (the reference), and what the CPU
// reference of the sharded computation says (ref_sharded). This is the
// computation an NCCL run spreads over devices, with the exchange left out.
//
// The shard outputs come back in the problem's dtype, so the merged output is
// compared with that dtype's tolerance and the lse absolutely (lse_tolerance).
// Merging with an empty state (a shard that holds no token of a sequence) must
// leave a state exactly as it was, whatever the empty state's output holds.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "gpu_skip.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/cascade_run.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/sharded.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using namespace pa::kernels;

TEST_CASE("context parallelism on one GPU: shards run in turn and merged equal unsharded attention",
          "[gpu][shard]") {
  PA_REQUIRE_GPU();
  int ran = 0;
  for (DType dt : {DType::f16, DType::bf16}) {
    // Every sequence has at least 8 blocks, so no shard of 8 or fewer is empty
    // for it (the runner, like the kernels, takes contexts of 1 or more);
    // 1000 and 517 tokens end in a partial block.
    ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, 8, 2, {1000, 129, 517}, 41);
    spec.partition_size = 256;
    const PagedProblem p = make_problem(spec);
    const std::vector<double> want = ref_output(p);
    std::vector<double> want_lse;
    for (const AttentionState& s : ref_states(p, 0, std::numeric_limits<int>::max())) want_lse.push_back(s.lse);
    const int seqs = p.num_seqs(), heads = spec.num_heads, hs = spec.head_size;
    for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::round_robin}) {
      for (int n : {1, 2, 3, 5, 8}) {
        INFO(dtype_name(dt) << " " << shard_policy_name(policy) << " x " << n);
        std::vector<float> out, lse;
        for (int s = 0; s < n; ++s) {
          const PagedProblem local = shard_problem(p, policy, n, s);
          const RunResult r = StageRunner(local, Stage::v2_partition).run();
          if (s == 0) {
            out = r.out;
            lse = r.lse;
            continue;
          }
          const MergeRun m = run_merge(out, lse, r.out, r.lse, seqs, heads, hs, DType::f32);
          out = m.out;
          lse = m.lse;
        }
        test::require_close(want, out, tolerance_for(dt));
        test::require_close(want_lse, lse, lse_tolerance(dt));
        const ShardedRef ref = ref_sharded(p, policy, n);
        test::require_close(ref.out, out, tolerance_for(dt));
        ++ran;
      }
    }
  }
  CHECK(ran == 2 * 2 * 5);
}

TEST_CASE("context parallelism: merging an empty shard's state changes nothing", "[gpu][shard]") {
  PA_REQUIRE_GPU();
  const ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 4, 4, {300, 20}, 42);
  const PagedProblem p = make_problem(spec);
  const RunResult r = StageRunner(p, Stage::v2_partition).run();
  const std::size_t rows = static_cast<std::size_t>(p.num_seqs()) * spec.num_heads;
  // The empty state: lse -inf, and an output that must never be read.
  const std::vector<float> empty_out(rows * spec.head_size, std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> empty_lse(rows, -std::numeric_limits<float>::infinity());
  int ran = 0;
  for (bool empty_first : {false, true}) {
    const MergeRun m = empty_first ? run_merge(empty_out, empty_lse, r.out, r.lse, p.num_seqs(), spec.num_heads,
                                               spec.head_size, DType::f32)
                                   : run_merge(r.out, r.lse, empty_out, empty_lse, p.num_seqs(), spec.num_heads,
                                               spec.head_size, DType::f32);
    INFO("empty state " << (empty_first ? "first" : "second"));
    REQUIRE(m.out.size() == r.out.size());
    for (std::size_t i = 0; i < m.out.size(); ++i) REQUIRE(m.out[i] == r.out[i]);
    for (std::size_t i = 0; i < rows; ++i) REQUIRE(m.lse[i] == r.lse[i]);
    ++ran;
  }
  CHECK(ran == 2);
}
