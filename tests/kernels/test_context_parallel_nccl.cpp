// Context parallelism over several GPUs through NCCL (label gpu; built where
// NCCL is found; SKIPPED with fewer than 2 GPUs). Rank r holds shard r's
// pages, decodes them with stage 8, and the states go through NCCL:
// - all_gather: every rank folds all N states in shard order, so every rank's
//   output and lse must equal, bit for bit, the same shards run in turn on
//   one GPU and merged by the same kernel (run_sharded);
// - sums: the all-reduce adds in its own order, so the output is checked
//   against the reference within the dtype's tolerance, and the ranks must
//   still agree with each other bit for bit (the all-reduce gives every rank
//   the same sums).
// Shards that hold none of a sequence (empty states) are included.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/context_parallel.hpp"
#include "pa/kernels/context_parallel_nccl.hpp"
#include "pa/reference/attention.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using namespace pa::kernels;

#define PA_REQUIRE_GPUS(n)                                                                                     \
  do {                                                                                                         \
    PA_REQUIRE_GPU();                                                                                          \
    if (cuda_device_count() < (n)) SKIP("needs " << (n) << " GPUs, this machine has " << cuda_device_count()); \
  } while (0)

TEST_CASE("context parallelism over GPUs: all_gather equals the one-GPU sharded run bit for bit", "[gpu][nccl]") {
  PA_REQUIRE_GPUS(2);
  const int max_n = std::min(cuda_device_count(), kMaxShards);
  int ran = 0;
  for (DType dt : {DType::f16, DType::bf16}) {
    // 17 tokens (2 blocks): with 3 or more GPUs some ranks hold none of it.
    const ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, 32, 8, {3000, 17, 1025, 4096}, 51);
    const PagedProblem p = make_problem(spec);
    const std::vector<double> want = ref_output(p);
    for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::round_robin}) {
      for (int n = 2; n <= max_n; ++n) {
        INFO(dtype_name(dt) << " " << shard_policy_name(policy) << " over " << n << " GPUs");
        const ShardedRun one = run_sharded(p, policy, n);
        ContextParallel cp(p, {n, policy, StateExchange::all_gather});
        const ContextParallelResult r = cp.run();
        CHECK(r.ranks_agree);
        CHECK(same_bits(r.out, one.out));
        CHECK(same_bits(r.lse, one.lse));
        test::require_close(want, r.out, tolerance_for(dt));
        // A second run on the same communicators gives the same bits (nothing left over from the first).
        const ContextParallelResult again = cp.run();
        CHECK(same_bits(again.out, r.out));
        ++ran;
      }
    }
  }
  CHECK(ran == 2 * 2 * (max_n - 1));
}

TEST_CASE("context parallelism over GPUs: sequence groups (exchange overlapping the next decode)", "[gpu][nccl]") {
  PA_REQUIRE_GPUS(2);
  const int max_n = std::min(cuda_device_count(), kMaxShards);
  const ProblemSpec spec = test::fresh_spec_of(DType::bf16, 128, 16, 32, 8, {3000, 17, 1025, 4096, 900}, 55);
  const PagedProblem p = make_problem(spec);
  const std::vector<double> want = ref_output(p);
  int ran = 0;
  for (int groups : {2, 5}) {
    for (StateExchange ex : {StateExchange::all_gather, StateExchange::sums}) {
      INFO(groups << " groups, " << state_exchange_name(ex) << ", " << max_n << " GPUs");
      ContextParallelOptions o{max_n, ShardPolicy::contiguous, ex, groups};
      ContextParallel cp(p, o);
      const ContextParallelResult r = cp.run();
      CHECK(r.ranks_agree);
      test::require_close(want, r.out, tolerance_for(DType::bf16));
      if (ex == StateExchange::all_gather) {
        // The same groups on one GPU: the same plans, the same fold, the same bits.
        const ShardedRun one = run_sharded(p, ShardPolicy::contiguous, max_n, groups);
        CHECK(same_bits(r.out, one.out));
        CHECK(same_bits(r.lse, one.lse));
      }
      const ContextParallelTiming t = cp.time(3, 1);
      CHECK(t.total_ms > 0.f);
      CHECK(t.exchange_ms >= 0.f);
      ++ran;
    }
  }
  CHECK(ran == 4);
}

TEST_CASE("context parallelism over GPUs: the sums exchange agrees with the reference and across ranks",
          "[gpu][nccl]") {
  PA_REQUIRE_GPUS(2);
  const int max_n = std::min(cuda_device_count(), kMaxShards);
  int ran = 0;
  for (DType dt : {DType::f16, DType::bf16}) {
    const ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, 16, 2, {2500, 17, 700}, 52);
    const PagedProblem p = make_problem(spec);
    const std::vector<double> want = ref_output(p);
    std::vector<double> want_lse;
    for (const AttentionState& s : ref_states(p, 0, std::numeric_limits<int>::max())) want_lse.push_back(s.lse);
    for (ShardPolicy policy : {ShardPolicy::contiguous, ShardPolicy::round_robin}) {
      for (int n = 2; n <= max_n; ++n) {
        INFO(dtype_name(dt) << " " << shard_policy_name(policy) << " over " << n << " GPUs");
        ContextParallel cp(p, {n, policy, StateExchange::sums});
        const ContextParallelResult r = cp.run();
        CHECK(r.ranks_agree);
        test::require_close(want, r.out, tolerance_for(dt));
        test::require_close(want_lse, r.lse, lse_tolerance(dt));
        ++ran;
      }
    }
  }
  CHECK(ran == 2 * 2 * (max_n - 1));
}

TEST_CASE("context parallelism over GPUs: ranks that hold no page at all", "[gpu][nccl]") {
  PA_REQUIRE_GPUS(2);
  const int max_n = std::min(cuda_device_count(), kMaxShards);
  // 17 and 5 tokens: 2 blocks and 1. Contiguous shards over N GPUs give the
  // blocks to the last ranks, so with 3 or more GPUs the first ranks hold no
  // page of either sequence (an empty pool: one zero page, never read).
  const ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 8, 2, {17, 5}, 56);
  const PagedProblem p = make_problem(spec);
  const std::vector<double> want = ref_output(p);
  int ran = 0;
  for (StateExchange ex : {StateExchange::all_gather, StateExchange::sums}) {
    INFO(state_exchange_name(ex) << " over " << max_n << " GPUs");
    ContextParallel cp(p, {max_n, ShardPolicy::contiguous, ex});
    const ContextParallelResult r = cp.run();
    CHECK(r.ranks_agree);
    test::require_close(want, r.out, tolerance_for(DType::f16));
    if (ex == StateExchange::all_gather) {
      const ShardedRun one = run_sharded(p, ShardPolicy::contiguous, max_n);
      CHECK(same_bits(r.out, one.out));
    }
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("context parallelism over GPUs: timing reports every part", "[gpu][nccl]") {
  PA_REQUIRE_GPUS(2);
  const PagedProblem p = make_problem(test::spec_of(DType::f16, 128, 16, 32, 8, {8192, 8192}, 53));
  int ran = 0;
  for (StateExchange ex : {StateExchange::all_gather, StateExchange::sums}) {
    ContextParallel cp(p, {2, ShardPolicy::contiguous, ex});
    const ContextParallelTiming t = cp.time(5, 2);
    INFO(state_exchange_name(ex));
    CHECK(t.iters == 5);
    REQUIRE(t.decode_ms.size() == 2);
    REQUIRE(t.kv_bytes.size() == 2);
    CHECK(t.kv_bytes[0] + t.kv_bytes[1] == p.spec.kv_bytes());
    for (float d : t.decode_ms) CHECK(d > 0.f);
    CHECK(t.exchange_ms > 0.f);
    CHECK(t.merge_ms > 0.f);
    // The parts of the slowest path fit in the total (each a median, so allow a small excess).
    CHECK(t.total_ms >= *std::max_element(t.decode_ms.begin(), t.decode_ms.end()) * 0.99f);
    CHECK(t.exchange_bytes > 0);
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("context parallelism over GPUs: bad options name the value", "[gpu][nccl]") {
  PA_REQUIRE_GPU();
  const PagedProblem p = make_problem(test::spec_of(DType::f16, 128, 16, 4, 4, {100}, 54));
  int ran = 0;
  for (int n : {0, cuda_device_count() + 1, kMaxShards + 1}) {
    try {
      ContextParallel cp(p, {n, ShardPolicy::contiguous, StateExchange::all_gather});
      FAIL("accepted devices " << n);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("devices " + std::to_string(n)) != std::string::npos);
      ++ran;
    }
  }
  try {
    ContextParallel cp(p, {1, ShardPolicy::contiguous, static_cast<StateExchange>(7)});
    FAIL("accepted exchange 7");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("exchange 7") != std::string::npos);
    ++ran;
  }
  try {
    ContextParallel cp(p, {1, static_cast<ShardPolicy>(5), StateExchange::all_gather});
    FAIL("accepted policy 5");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("policy 5") != std::string::npos);
    ++ran;
  }
  for (int g : {0, 2}) {  // the problem has one sequence
    try {
      ContextParallel cp(p, {1, ShardPolicy::contiguous, StateExchange::all_gather, g});
      FAIL("accepted sequence_groups " << g);
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("sequence_groups " + std::to_string(g)) != std::string::npos);
      ++ran;
    }
  }
  CHECK(ran == 7);
}
