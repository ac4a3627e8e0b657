// fp8 KV caches on the GPU, across the stages that write the attention output
// (5: v1, 6: V2, 8: optimized), through the one runner:
// - every format (e4m3, e5m2) with fp16 and bf16 queries, MHA, GQA and MQA,
//   ragged contexts (1 token, part of a block, many partitions), scales from
//   the data, given scales and power-of-two scales, matches the reference over
//   the read-back values (ref_output of the fp8 problem, whose float cache is
//   exactly float(code) * scale) within the output dtype's tolerance: the
//   kernels dequantize exactly, so fp8 costs the reference nothing here;
// - stage 8 on every head size and both block sizes this build holds for fp8;
// - against the same problem with an fp16 cache, the fp8 output stays within
//   the bound that fp8_output_error_bound derives (what fp8 costs in accuracy);
// - what does not take fp8 says so by name: the cascade (stage 7) and stage 8
//   with blocks of 8 tokens.
// The stage 1-5 suite (test_stages_gpu.cpp) runs every built fp8 instance too,
// and the recording suites compare fp8 traces with the host model.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "pa/core/fp8.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/fp8_cache.hpp"
#include "../support/gpu_skip.hpp"
#include "../support/require_close.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using kernels::RunOptions;
using kernels::Stage;
using kernels::StageRunner;
using Catch::Matchers::ContainsSubstring;

namespace {

constexpr Stage kStages[] = {Stage::warp_reduce, Stage::v2_partition, Stage::optimized};
constexpr KvDType kFp8[] = {KvDType::fp8_e4m3, KvDType::fp8_e5m2};

RunOptions options_for(Stage s) {
  RunOptions o;
  if (s == Stage::v2_partition) o.partition_size = 256;  // several partitions for the long sequences
  return o;
}

// The scales a case runs with: 0 = from the data; given ones that leave
// headroom (|K|, |V| < 6 here); powers of two, for which code * scale is exact
// in any float format.
struct Scales {
  const char* name;
  float k, v;
};
constexpr Scales kScales[] = {{"from the data", 0.0f, 0.0f}, {"given", 0.021f, 0.037f}, {"powers of two", 0.0625f, 0.03125f}};

}  // namespace

TEST_CASE("fp8 cache: stages 5, 6 and 8 match the reference over the read-back values", "[gpu][fp8]") {
  PA_REQUIRE_GPU();
  struct Heads {
    int q, kv;
  };
  const Heads heads[] = {{8, 8}, {16, 4}, {12, 1}};
  int ran = 0;
  for (Stage s : kStages)
    for (KvDType kv : kFp8)
      for (DType dt : {DType::f16, DType::bf16})
        for (const Heads& h : heads)
          for (const Scales& sc : kScales) {
            ProblemSpec spec = test::fresh_spec_of(dt, 128, 16, h.q, h.kv, {1, 17, 600, 2100}, 10 + ran);
            spec.kv_dtype = kv;
            spec.k_scale = sc.k;
            spec.v_scale = sc.v;
            // Every other head configuration with ALiBi, across every scale (the bias is added after the K scale).
            spec.alibi = (ran / 3) % 2 == 1;
            const PagedProblem p = make_problem(spec);
            INFO(kernels::stage_name(s) << " " << spec.describe() << " scales " << sc.name << " (k " << p.k_scale
                                        << ", v " << p.v_scale << ")");
            const auto got = StageRunner(p, s, options_for(s)).run();
            test::require_close(ref_output(p), got.out, tolerance_for(dt));
            ++ran;
          }
  CHECK(ran == 3 * 2 * 2 * 3 * 3);
}

TEST_CASE("fp8 cache: stage 8 on every head size and block size built for fp8", "[gpu][fp8]") {
  PA_REQUIRE_GPU();
  int ran = 0, expected = 0;
  for (int hs : kSupportedHeadSizes)
    for (int bs : {16, 32}) {
      const KvDType kv = kFp8[(hs / 16 + bs / 16) % 2];
      const DType dt = (hs / 16) % 2 ? DType::bf16 : DType::f16;
#if PA_HAVE_CUDA
      const bool built = optimized_supported(dt, hs, bs, kv);
#else
      const bool built = false;  // stage 8's library exists in CUDA builds only (and this test skips)
#endif
      expected += kernels::quick_kernels_build() ? (hs == 128 && bs == 16) : 1;
      if (!built) continue;
      ProblemSpec spec = test::fresh_spec_of(dt, hs, bs, 8, 2, {1, bs - 1, bs + 1, 1000}, 200 + ran);
      spec.kv_dtype = kv;
      const PagedProblem p = make_problem(spec);
      INFO(spec.describe());
      const auto got = StageRunner(p, Stage::optimized).run();
      test::require_close(ref_output(p), got.out, tolerance_for(dt));
      ++ran;
    }
  // Quick builds hold head 128 x block 16; full builds every head size x {16, 32}.
  CHECK(ran == expected);
  CHECK(expected == (kernels::quick_kernels_build() ? 1 : 7 * 2));
}

TEST_CASE("fp8 cache: the output stays within what fp8 can cost against an fp16 cache", "[gpu][fp8]") {
  PA_REQUIRE_GPU();
  int ran = 0;
  for (KvDType kv : kFp8)
    for (float spread : {1.0f, 4.0f, 12.0f}) {
      ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 8, 2, {300, 1500}, 300 + ran);
      spec.logit_spread = spread;
      const PagedProblem p16 = make_problem(spec);
      spec.kv_dtype = kv;
      const PagedProblem p8 = make_problem(spec);
      // The same codes as the reference's quantization of the fp16 problem.
      const Fp8KvCache c = quantize_kv_cache(p16, fp8_format_of(kv));
      REQUIRE(c.k_codes == p8.k_bytes);
      REQUIRE(c.v_codes == p8.v_bytes);
      const std::vector<double> bound = fp8_output_error_bound(p16, c);
      const std::vector<double> exact = ref_output(p16);
      const auto got = StageRunner(p8, Stage::optimized).run();
      REQUIRE(got.out.size() == exact.size());
      const Tolerance t = tolerance_for(DType::f16);
      std::size_t outside = 0;
      for (std::size_t i = 0; i < exact.size(); ++i) {
        const double err = std::fabs(static_cast<double>(got.out[i]) - exact[i]);
        if (!(err <= bound[i] + t.abs + t.rel * std::fabs(exact[i]))) ++outside;
      }
      INFO(spec.describe() << ": " << outside << " of " << exact.size() << " outputs beyond the fp8 bound");
      CHECK(outside == 0);
      ++ran;
    }
  CHECK(ran == 2 * 3);
}

TEST_CASE("fp8 cache: the cascade and stage 8 with 8-token blocks refuse it by name", "[gpu][fp8]") {
  PA_REQUIRE_GPU();
  ProblemSpec spec = test::fresh_spec_of(DType::f16, 128, 16, 8, 2, {600, 700}, 400);
  spec.kv_dtype = KvDType::fp8_e4m3;
  spec.shared_prefix_len = 512;
  const PagedProblem p = make_problem(spec);
  RunOptions o;
  o.shared_prefix_len = 512;
  CHECK_THROWS_WITH(StageRunner(p, Stage::cascade_merge, o).run(),
                    ContainsSubstring("fp8_e4m3") && ContainsSubstring("stages 1-6 and 8 take fp8 caches"));
  ProblemSpec s8 = test::fresh_spec_of(DType::bf16, 128, 8, 8, 2, {100}, 401);
  s8.kv_dtype = KvDType::fp8_e5m2;
  CHECK_THROWS_WITH(StageRunner(make_problem(s8), Stage::optimized).run(),
                    ContainsSubstring("kv cache fp8_e5m2") && ContainsSubstring("block size 8") &&
                        ContainsSubstring("whole 16-byte copies"));
}
