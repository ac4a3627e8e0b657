// The one runner (pa/kernels/runner.hpp): every stage through the same
// StageRunner, checked against the CPU reference and timed; and the options
// it refuses before touching the device (those cases run without a GPU too).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/check_stage.hpp"
#include "../support/gpu_skip.hpp"
#include "../support/random_seed.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using kernels::RunOptions;
using kernels::Stage;
using kernels::StageRunner;
using Catch::Matchers::ContainsSubstring;

namespace {

ProblemSpec small_spec(std::uint64_t salt) {
  // One token, a partial block, several blocks, several partitions.
  ProblemSpec s = test::spec_of(DType::f16, 128, 16, 4, 2, {1, 17, 100, 600}, test::fresh_seed(salt));
  s.partition_size = 256;
  return s;
}

std::string refusal(const PagedProblem& p, Stage s, const RunOptions& o) {
  try {
    StageRunner r(p, s, o);
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not refused: ") + e.what();
  }
  return "not refused";
}

}  // namespace

TEST_CASE("the runner refuses a stage's bad options before touching the device", "[runner]") {
  const PagedProblem p = make_problem(small_spec(1));
  RunOptions o;
  o.partition_size = 24;
  CHECK_THAT(refusal(p, Stage::v2_partition, o),
             ContainsSubstring("partition size 24") && ContainsSubstring("multiple of the block size 16"));
  o = {};
  o.partition_size = -16;
  CHECK_THAT(refusal(p, Stage::v2_partition, o), ContainsSubstring("partition size -16"));
  o = {};
  o.range.begin = 5;
  CHECK_THAT(refusal(p, Stage::v2_partition, o), ContainsSubstring("token range begin 5"));
  o = {};
  o.chunk_len = -1;
  CHECK_THAT(refusal(p, Stage::cascade_merge, o), ContainsSubstring("chunk length -1"));
  o = {};
  o.splits = -2;
  CHECK_THAT(refusal(p, Stage::optimized, o), ContainsSubstring("splits -2"));
}

TEST_CASE("every stage runs and is timed through the one runner", "[gpu][runner]") {
  PA_REQUIRE_GPU();
  ProblemSpec spec = small_spec(2);
  const PagedProblem plain = make_problem(spec);
  // Stage 7 on the same shape with a shared 32-token prefix.
  spec.context_lens = {32 + 1, 32 + 17, 32 + 100, 32 + 600};
  spec.shared_prefix_len = 32;
  const PagedProblem shared = make_problem(spec);
  const Tolerance tol = tolerance_for(DType::f16);
  int stages_run = 0;
  for (int i = 1; i <= 8; ++i) {
    const Stage s = static_cast<Stage>(i);
    const PagedProblem& p = s == Stage::cascade_merge ? shared : plain;
    INFO("stage " << kernels::stage_name(s));
    StageRunner r(p, s);
    CHECK(r.stage() == s);
    CHECK(r.plan().empty() == (i <= 5));  // stages 6-8 say what their planner chose
    const kernels::RunResult got = r.run();
    CHECK(got.stage == s);
    if (i <= 5) {
      const StageCheck c = check_stage(p, got.stage_output);
      INFO(c.summary());
      CHECK(c.pass);
    }
    if (i >= 5) {  // the attention output, every element written and right
      const std::vector<double> ref = ref_output(p);
      REQUIRE(got.out.size() == ref.size());
      const CompareResult c = compare(ref.data(), got.out.data(), ref.size(), tol);
      INFO(c.summary());
      CHECK(c.num_nan == 0);
      CHECK(c.pass);
    }
    if (i == 6 || i == 7) CHECK(got.lse.size() == static_cast<std::size_t>(p.num_seqs() * p.spec.num_heads));
    CHECK(got.cascade.has_value() == (i == 7));
    CHECK(got.optimized.has_value() == (i == 8));
    // A second run of the same runner (outputs poisoned again, stage 8's
    // counters left at zero by the first) gives the same output.
    if (i >= 5) CHECK(r.run().out == got.out);
    const kernels::StageTiming t = r.time(5, 1);
    REQUIRE(t.ms.size() == 5);
    CHECK(t.median_ms > 0.f);
    CHECK(t.median_ms >= *std::min_element(t.ms.begin(), t.ms.end()));
    CHECK(t.median_ms <= *std::max_element(t.ms.begin(), t.ms.end()));
    ++stages_run;
  }
  CHECK(stages_run == 8);
}
