// Stage 8 (optimized decode kernel) against the CPU reference.
//
// CPU part (always runs): the stage-8 chunk/tile math agrees with
// CacheGeometry::k_offset / v_offset, and the split plan's invariants.
// GPU part ([gpu], SKIPped without a GPU): every built dtype x head size x
// block size, sampled across GQA ratios (incl. MQA and groups > 16), ragged
// contexts (1, bs-1, bs, bs+1, long), NaN tails, Q row padding, forced split
// counts (1, 2, 3, many) and the heuristic; outputs poisoned with NaN first.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>


#include <algorithm>
#include <cstdint>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "pa/index/config.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/optimized.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/dtype_convert.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "../support/gpu_skip.hpp"

namespace {

using namespace pa;



// Runs stage 8 on the problem through the runner; returns the output decoded
// to float. Twice: the second run proves the arrival counters were reset
// (the runner zeroes the workspace once, and poisons the output before each run).
std::vector<float> run_optimized(const PagedProblem& pp, int force_splits, OptimizedPlan* plan_out) {
  kernels::RunOptions o;
  o.splits = force_splits;
  kernels::StageRunner runner(pp, kernels::Stage::optimized, o);
  (void)runner.run();
  const kernels::RunResult r = runner.run();
  if (plan_out) *plan_out = *r.optimized;
  return r.out;
}

void check_case(const ProblemSpec& spec, int force_splits) {
  const PagedProblem pp = make_problem(spec);
  OptimizedPlan plan;
  const std::vector<float> got = run_optimized(pp, force_splits, &plan);
  const std::vector<double> ref = ref_output(pp);
  const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(spec.dtype));
  INFO(spec.describe() << " force_splits=" << force_splits << " plan: " << plan.describe());
  INFO(r.summary());
  CHECK(r.num_nan == 0);
  CHECK(r.pass);
}

// The configurations this build compiles for stage 8 (tests/kernels/optimized.cmake
// passes the head sizes of pa_kernels_optimized's instance files; a quick build
// instantiates block size 16 only, a full one every supported block size).
constexpr int kInstanceHeadSizes[] = {PA_OPT_INSTANCE_HEAD_SIZES};
#if PA_QUICK_KERNELS
constexpr int kInstanceBlockSizes[] = {16};
#else
constexpr auto& kInstanceBlockSizes = kSupportedBlockSizes;
#endif
constexpr DType kOptDTypes[] = {DType::f16, DType::bf16};

template <class List>
bool contains(const List& list, int v) {
  return std::find(std::begin(list), std::end(list), v) != std::end(list);
}

std::vector<int> built_head_sizes() {
  std::vector<int> hs;
  for (int h : kSupportedHeadSizes)
    if (optimized_supported(DType::f16, h, 16)) hs.push_back(h);
  return hs;
}
std::vector<int> built_block_sizes() {
  std::vector<int> bs;
  for (int b : kSupportedBlockSizes)
    if (optimized_supported(DType::f16, 128, b)) bs.push_back(b);
  return bs;
}

}  // namespace

TEST_CASE("stage 8 chunk math matches the cache layouts", "[optimized]") {
  using Cfg16 = OptConfig<DType::f16, 128, 16, 1>;
  using Cfg8 = OptConfig<DType::bf16, 80, 8, 2>;
  using Cfg32 = OptConfig<DType::f16, 256, 32, 1>;
  auto check = [](auto cfg_tag, int hs, int bs) {
    using Cfg = decltype(cfg_tag);
    CacheGeometry g{7, 3, hs, bs, Cfg::kX};
    for (int L = 0; L < Cfg::kTileChunks; ++L) {
      const int kd = Cfg::k_chunk_dim(L), kt = Cfg::k_chunk_token(L);
      REQUIRE(g.k_offset(5, 2, kd, kt) == g.k_offset(5, 2, 0, 0) + Cfg::chunk_elem_offset(L));
      const int vd = Cfg::v_chunk_dim(L), vt = Cfg::v_chunk_first_token(L);
      REQUIRE(g.v_offset(5, 2, vd, vt) == g.v_offset(5, 2, 0, 0) + Cfg::chunk_elem_offset(L));
    }
    // The swizzle is a permutation of each 8-chunk line.
    std::vector<int> seen(Cfg::kStepChunks, 0);
    for (int s = 0; s < Cfg::kStepChunks; ++s) seen[Cfg::swizzle(s)]++;
    for (int c : seen) REQUIRE(c == 1);
    // The 8 rows of every ldmatrix land in 8 distinct 16-byte bank groups.
    for (int c = 0; c < hs / Cfg::kX; ++c)
      for (int t0 = 0; t0 < Cfg::kStepTokens; t0 += 8) {
        int mask = 0;
        for (int i = 0; i < 8; ++i) mask |= 1 << (Cfg::swizzle(Cfg::k_row_chunk(t0 + i, c)) % 8);
        REQUIRE(mask == 0xFF);
      }
    for (int d0 = 0; d0 < hs; d0 += 8)
      for (int q = 0; q < Cfg::kStepTokens / 8; ++q) {
        int mask = 0;
        for (int i = 0; i < 8; ++i) mask |= 1 << (Cfg::swizzle(Cfg::v_row_chunk(d0 + i, q)) % 8);
        REQUIRE(mask == 0xFF);
      }
  };
  check(Cfg16{}, 128, 16);
  check(Cfg8{}, 80, 8);
  check(Cfg32{}, 256, 32);
}

TEST_CASE("stage 8's dispatcher holds exactly the instances the build compiles", "[optimized]") {
  CHECK(std::size(kInstanceHeadSizes) >= 1);
  for (DType dt : kAllDTypes)
    for (int hs : kSupportedHeadSizes)
      for (int bs : kSupportedBlockSizes) {
        INFO(dtype_name(dt) << " head " << hs << " block " << bs);
        const bool instantiated =
            dt != DType::f32 && contains(kInstanceHeadSizes, hs) && contains(kInstanceBlockSizes, bs);
        CHECK(optimized_supported(dt, hs, bs) == instantiated);
      }
}

TEST_CASE("stage 8 rejects what it does not support", "[optimized]") {
  OptimizedArgs a;
  a.dtype = DType::f32;
  a.num_seqs = 1;
  a.num_heads = 8;
  a.num_kv_heads = 2;
  a.max_context_len = 10;
  CHECK_THROWS_AS(plan_optimized(a), std::invalid_argument);
  a.dtype = DType::f16;
  a.num_kv_heads = 3;
  CHECK_THROWS_AS(plan_optimized(a), std::invalid_argument);
  CHECK_FALSE(optimized_supported(DType::f16, 100, 16));
  CHECK(optimized_supported_list().find("fp16") != std::string::npos);
}

TEST_CASE("stage 8 rejects a bad cascade-suffix range or half a state", "[optimized]") {
  OptimizedArgs a;  // fp16 / 128 / 16, checked before any device call
  a.num_seqs = 1;
  a.num_heads = 8;
  a.num_kv_heads = 8;
  a.max_context_len = 100;
  const auto message = [&] {
    try {
      (void)plan_optimized(a);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  a.first_token = 8;  // not a multiple of the block size 16
  CHECK(message().find("first_token=8: need >= 0 and a multiple of the block size 16") != std::string::npos);
  a.first_token = -16;
  CHECK(message().find("first_token=-16") != std::string::npos);
  a.first_token = 16;
  float dummy = 0.f;
  a.state_out = &dummy;  // without state_lse
  CHECK(message().find("state_out and state_lse go together") != std::string::npos);
  a.state_out = nullptr;
  a.state_lse = &dummy;
  CHECK(message().find("state_out and state_lse go together") != std::string::npos);
}

TEST_CASE("stage 8 matches the reference: every dtype x head size x block size", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const int sample = GENERATE(0, 1);
  std::size_t ran = 0;
  for (DType dt : kOptDTypes)
    for (int hs : built_head_sizes())
      for (int bs : built_block_sizes()) {
        ProblemSpec s;
        s.dtype = dt;
        s.head_size = hs;
        s.block_size = bs;
        // GQA ratio sampled per configuration: 1, 4, 8 heads per kv head.
        const int ratios[] = {1, 4, 8};
        const int ratio = ratios[(hs / 16 + bs + sample) % 3];
        s.num_kv_heads = 2;
        s.num_heads = 2 * ratio;
        s.context_lens = {1, bs - 1, bs, bs + 1, 300 + 37 * sample, 1000};
        s.seed = 1000 + hs * 7 + bs + 13 * sample + (dt == DType::bf16 ? 5 : 0);
        s.extra_q_stride = sample ? 8 : 0;
        s.alibi = sample == 1;  // every configuration once without ALiBi, once with
        check_case(s, sample == 0 ? 0 : 3);
        ++ran;
      }
  CHECK(ran == std::size(kOptDTypes) * std::size(kInstanceHeadSizes) * std::size(kInstanceBlockSizes));
}

TEST_CASE("stage 8: GQA ratios incl. MQA and groups over 16", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const auto [heads, kv_heads] = GENERATE(table<int, int>(
      {{8, 8}, {8, 1}, {12, 4}, {32, 8}, {32, 2}, {40, 4}, {64, 2}, {48, 1}}));
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = heads;
    s.num_kv_heads = kv_heads;
    s.context_lens = {17, 1, 513, 64};
    s.seed = 77 + heads + kv_heads;
    s.alibi = dt == DType::bf16;  // every group size with ALiBi too (slopes per query head of the unit)
    check_case(s, 0);
    check_case(s, 2);
  }
}

TEST_CASE("stage 8: split counts and long ragged contexts", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const int splits = GENERATE(1, 2, 3, 7, 64, 256);
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.context_lens = {5000, 1, 16, 2049, 333};
    s.seed = 4242 + splits;
    s.alibi = dt == DType::f16;  // ALiBi across splits: positions from the sequence's end in every split
    check_case(s, splits);
  }
}

TEST_CASE("stage 8: heuristic split on one long sequence", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = 32;
    s.num_kv_heads = 8;
    s.context_lens = {20000};
    s.seed = 99;
    const PagedProblem pp = make_problem(s);
    OptimizedPlan plan;
    const std::vector<float> got = run_optimized(pp, 0, &plan);
    INFO(plan.describe());
    CHECK(plan.splits > 1);  // one sequence of 8 kv heads must be split to fill the GPU
    const std::vector<double> ref = ref_output(pp);
    const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(dt));
    INFO(r.summary());
    CHECK(r.pass);
  }
}
