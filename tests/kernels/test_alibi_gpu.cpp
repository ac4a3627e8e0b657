// ALiBi on the GPU, across the stages that write the attention output (5: v1,
// 6: V2, 7: cascade, 8: optimized), through the one runner:
// - zero slopes give, bit for bit, the output without ALiBi (the bias adds
//   exactly +-0 to every logit), in every kernel but the wgmma prefix kernel,
//   whose softmax rounds the biased logit before subtracting the max (without
//   ALiBi one fma does both): there zero slopes are within the dtype's tolerance;
// - the paper's slopes and slopes so steep that the last token takes nearly
//   all the weight match the reference (pa/reference/alibi.hpp) within the
//   dtype's tolerance, on ragged contexts with GQA and MQA;
// - every prefix kernel of the cascade (mma.sync with 4 and 8 warps, wgmma)
//   adds each row's own bias to the shared prefix;
// - what does not have ALiBi says so: context parallelism.
// The other GPU suites sample ALiBi on their own cases (spec.alibi).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "pa/core/alibi.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/shard_problem.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "../support/gpu_skip.hpp"
#include "../support/require_close.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using kernels::RunOptions;
using kernels::Stage;
using kernels::StageRunner;
using Catch::Matchers::ContainsSubstring;

namespace {

// The four stages that write the output, each with the options that make it
// do its work: V2 with several partitions, the cascade with a prefix.
constexpr Stage kStages[] = {Stage::warp_reduce, Stage::v2_partition, Stage::cascade_merge, Stage::optimized};

RunOptions options_for(Stage s) {
  RunOptions o;
  if (s == Stage::v2_partition) o.partition_size = 256;
  if (s == Stage::cascade_merge) o.cascade.prefix = PrefixKernel::mma_8warps;  // bit for bit: see above
  return o;
}

// A problem the stage supports: stage 8 is fp16/bf16 only; the cascade's
// sequences share their first 512 tokens.
ProblemSpec spec_for(Stage s, DType dt, int heads, int kv_heads, std::uint64_t salt) {
  std::vector<int> ctx = {1, 17, 600, 2100};
  if (s == Stage::cascade_merge) ctx = {512 + 1, 512 + 300, 512, 512 + 1500};
  ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, heads, kv_heads, ctx, salt);
  if (s == Stage::cascade_merge) spec.shared_prefix_len = 512;
  return spec;
}

std::vector<DType> dtypes_for(Stage s) {
  if (s == Stage::optimized) return {DType::f16, DType::bf16};
  return {DType::f32, DType::f16, DType::bf16};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("alibi: zero slopes are the kernels without ALiBi, bit for bit (stages 5-8)", "[gpu][alibi]") {
  PA_REQUIRE_GPU();
  int ran = 0;
  for (Stage s : kStages)
    for (DType dt : dtypes_for(s)) {
      const PagedProblem plain = make_problem(spec_for(s, dt, 8, 2, 10 + ran));
      PagedProblem zero = plain;
      zero.alibi_slopes.assign(8, 0.0f);
      INFO(kernels::stage_name(s) << " " << plain.spec.describe());
      const auto a = StageRunner(plain, s, options_for(s)).run();
      const auto b = StageRunner(zero, s, options_for(s)).run();
      CHECK(same_bits(a.out, b.out));
      ++ran;
    }
  CHECK(ran == 3 + 3 + 3 + 2);
}

TEST_CASE("alibi: the paper's slopes and steep slopes match the reference (stages 5-8, GQA, MQA)",
          "[gpu][alibi]") {
  PA_REQUIRE_GPU();
  struct Heads {
    int q, kv;
  };
  const Heads heads[] = {{8, 8}, {16, 4}, {12, 1}};
  int ran = 0;
  for (Stage s : kStages)
    for (DType dt : dtypes_for(s))
      for (const Heads& h : heads)
        for (int steep = 0; steep < 2; ++steep) {
          PagedProblem p = make_problem(spec_for(s, dt, h.q, h.kv, 100 + ran));
          // The paper's slopes; or 30 per head: the last token's logit leads the
          // one before it by about 30, so the output is nearly its V row.
          p.alibi_slopes = steep ? std::vector<float>(h.q, 30.0f) : alibi_slopes(h.q);
          INFO(kernels::stage_name(s) << " " << p.spec.describe() << (steep ? " steep slopes" : " paper slopes"));
          const auto got = StageRunner(p, s, options_for(s)).run();
          test::require_close(ref_output(p), got.out, tolerance_for(dt));
          ++ran;
        }
  CHECK(ran == (3 + 3 + 3 + 2) * 3 * 2);
}

TEST_CASE("alibi: every prefix kernel of the cascade, zero slopes as without, the paper's slopes close",
          "[gpu][alibi]") {
  PA_REQUIRE_GPU();
  constexpr PrefixKernel kKernels[] = {PrefixKernel::mma_4warps, PrefixKernel::mma_8warps, PrefixKernel::wgmma};
  int ran = 0;
  for (PrefixKernel pk : kKernels)
    for (DType dt : {DType::f16, DType::bf16}) {
      // 70 sequences x GQA 4: 280 query rows, several query tiles; ragged suffixes.
      std::vector<int> ctx;
      for (int i = 0; i < 70; ++i) ctx.push_back(1024 + (i * 37) % 300);
      ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, 16, 4, ctx, 300 + ran);
      spec.shared_prefix_len = 1024;
      const PagedProblem plain = make_problem(spec);
      PagedProblem zero = plain, paper = plain;
      zero.alibi_slopes.assign(16, 0.0f);
      paper.alibi_slopes = alibi_slopes(16);
      RunOptions o;
      o.cascade.prefix = pk;
      INFO(kernels::prefix_kernel_name(pk) << " " << spec.describe());
      const auto a = StageRunner(plain, Stage::cascade_merge, o).run();
      const auto b = StageRunner(zero, Stage::cascade_merge, o).run();
      CHECK(a.cascade->prefix_kernel == b.cascade->prefix_kernel);
      if (pk == PrefixKernel::wgmma)
        test::require_close(a.out, b.out, tolerance_for(dt));
      else
        CHECK(same_bits(a.out, b.out));
      const auto c = StageRunner(paper, Stage::cascade_merge, o).run();
      test::require_close(ref_output(paper), c.out, tolerance_for(dt));
      ++ran;
    }
  CHECK(ran == 3 * 2);
}

TEST_CASE("alibi: context parallelism refuses a problem with slopes", "[alibi]") {
  ProblemSpec spec = test::spec_of(DType::f16, 128, 16, 8, 2, {100, 40}, 3);
  spec.alibi = true;
  const PagedProblem p = make_problem(spec);
  CHECK_THROWS_WITH(shard_problem(p, ShardPolicy::contiguous, 2, 0),
                    ContainsSubstring("ALiBi") && ContainsSubstring("accepted"));
}

TEST_CASE("alibi: the kernels refuse slopes that are not one finite value per query head", "[alibi]") {
  PagedProblem p = make_problem(test::spec_of(DType::f16, 128, 16, 8, 2, {100}, 4));
  p.alibi_slopes.assign(7, 0.5f);
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::warp_reduce, p, 0),
                    ContainsSubstring("7 slopes for 8 query heads"));
  p.alibi_slopes.assign(8, 0.5f);
  p.alibi_slopes[3] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("slope of head 3 is inf"));
}

TEST_CASE("alibi: stages 6-8 refuse bad slopes before uploading anything", "[gpu][alibi]") {
  PA_REQUIRE_GPU();
  PagedProblem p = make_problem(test::spec_of(DType::f16, 128, 16, 8, 2, {100}, 5));
  p.alibi_slopes.assign(9, 0.5f);
  int refused = 0;
  for (Stage s : {Stage::v2_partition, Stage::cascade_merge, Stage::optimized}) {
    INFO(kernels::stage_name(s));
    CHECK_THROWS_WITH(StageRunner(p, s), ContainsSubstring("9 slopes for 8 query heads"));
    ++refused;
  }
  CHECK(refused == 3);
}
