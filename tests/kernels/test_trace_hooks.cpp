// The trace hooks compile with a real tracer and emit the counts that the
// emission contract (kernels/stages/EVENTS.md) implies, per step / op / tensor.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>

#include "counting_tracer.hpp"
#include "pa/index/config.hpp"
#include "pa/kernels/api.hpp"
#include "pa/core/paged_cache.hpp"
#include "../support/gpu_skip.hpp"

using namespace pa;
using trace::Op;
using trace::Stage;
using trace::Step;
using trace::Tensor;

namespace {
unsigned long long at(const std::vector<unsigned long long>& c, Step s, Op o, Tensor t) {
  return c[test::event_slot(static_cast<int>(s), static_cast<int>(o), static_cast<int>(t))];
}
}  // namespace

TEST_CASE("trace hooks emit the contract's event counts (fp16, head 128, block 16)", "[gpu][kernels][trace]") {
  PA_REQUIRE_GPU();
  using Cfg = KernelConfig<DType::f16, 128, 16, 128>;
  // In every build, quick or full (pa/kernels/instances.hpp).
  const auto built = kernels::built_configs();
  REQUIRE(std::find(built.begin(), built.end(), kernels::KernelKey{DType::f16, 128, 16, 128}) != built.end());
  ProblemSpec s;
  s.dtype = DType::f16;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.context_lens = {1, 15, 16, 17, 200};
  const PagedProblem p = make_problem(s);
  kernels::DeviceProblem d(p);
  const auto a = d.args();

  unsigned long long tokens = 0, blocks = 0;
  for (int len : s.context_lens) {
    tokens += len;
    blocks += (len + 15) / 16;
  }
  const unsigned long long tb = s.context_lens.size() * s.num_heads;  // thread blocks
  tokens *= s.num_heads;
  blocks *= s.num_heads;
  constexpr int V = Cfg::kNumVecsPerThread, TGlog = 1;  // thread group of 2: one shuffle

  SECTION("qk") {
    const auto c = test::count_events_f16_128_16(Stage::qk, a);
    CHECK(at(c, Step::q_load, Op::global_load, Tensor::q) == tb * Cfg::kHeadSize / Cfg::kVecSize);
    CHECK(at(c, Step::q_smem_store, Op::shared_store, Tensor::q_smem) == tb * Cfg::kHeadSize / Cfg::kVecSize);
    CHECK(at(c, Step::block_table_load, Op::global_load, Tensor::context_lens) == tb * 128);
    CHECK(at(c, Step::block_table_load, Op::global_load, Tensor::block_table) == blocks * 32);
    CHECK(at(c, Step::k_load, Op::global_load, Tensor::k_cache) == blocks * 32 * V);
    CHECK(at(c, Step::q_smem_load, Op::shared_load, Tensor::q_smem) == blocks * 32 * V);
    CHECK(at(c, Step::qk_dot, Op::compute, Tensor::none) == blocks * 32);
    CHECK(at(c, Step::qk_group_reduce, Op::shuffle, Tensor::none) == blocks * 32 * TGlog);
    CHECK(at(c, Step::logit_store, Op::shared_store, Tensor::logits) == tokens);
    CHECK(at(c, Step::barrier, Op::barrier, Tensor::none) == tb * 128 * 2);
    CHECK(at(c, Step::stage_output, Op::global_store, Tensor::stage_out) == tokens);
  }
  SECTION("warp_reduce (complete v1)") {
    const auto c = test::count_events_f16_128_16(Stage::warp_reduce, a);
    // barriers: q 1, qk 1, max 1, sum 1, prob 1, pre-reduce 1, 2 rounds x 2
    CHECK(at(c, Step::barrier, Op::barrier, Tensor::none) == tb * 128 * 10);
    CHECK(at(c, Step::max_reduce, Op::shared_load, Tensor::logits) == tokens);
    CHECK(at(c, Step::max_reduce, Op::shared_store, Tensor::red_scratch) == tb * 4);
    CHECK(at(c, Step::max_reduce, Op::shared_load, Tensor::red_scratch) == tb * 4 * 4);
    CHECK(at(c, Step::max_reduce, Op::shuffle, Tensor::none) == tb * 128 * (5 + 2 + 1));
    CHECK(at(c, Step::prob_store, Op::shared_store, Tensor::logits) == tokens);
    CHECK(at(c, Step::v_load, Op::global_load, Tensor::v_cache) == blocks * 32 * Cfg::kNumRowsPerThread);
    CHECK(at(c, Step::accumulate, Op::shuffle, Tensor::none) == tb * 128 * Cfg::kNumRowsPerThread * 1);
    // round 0: warps 2,3 store; round 1: warp 1 stores -> 3 warps x head rows
    CHECK(at(c, Step::warp_reduce, Op::shared_store, Tensor::out_scratch) == tb * 3 * Cfg::kHeadSize);
    CHECK(at(c, Step::warp_reduce, Op::shared_load, Tensor::out_scratch) == tb * 3 * Cfg::kHeadSize);
    CHECK(at(c, Step::out_store, Op::global_store, Tensor::output) == tb * Cfg::kHeadSize);
  }
}
