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

// What constructing a runner with these arguments throws: an invalid_argument's
// message, or what else happened.
template <class... Args>
std::string refusal(const Args&... args) {
  try {
    StageRunner r(args...);
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

namespace {

// Two problems of one shape (different seeds) as two rotations over one
// pool: rotation r's K and V blocks are problem r's, shifted by the blocks
// before them; its Q and block tables follow the previous rotation's.
struct TwoRotations {
  kernels::DeviceBuffer q, k, v, tables, ctx;
  kernels::DeviceInputViews views;
  PagedProblem layout;
};

template <class T>
std::vector<T> joined(const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> j = a;
  j.insert(j.end(), b.begin(), b.end());
  return j;
}

void upload(kernels::DeviceBuffer& d, const void* src, std::size_t bytes) {
  d = kernels::DeviceBuffer(bytes);
  d.upload(src, bytes);
}

TwoRotations two_rotations(const PagedProblem& a, const PagedProblem& b) {
  REQUIRE(a.num_blocks == b.num_blocks);
  TwoRotations t;
  const std::vector<std::uint8_t> q = joined(a.q_bytes, b.q_bytes), k = joined(a.k_bytes, b.k_bytes),
                                  v = joined(a.v_bytes, b.v_bytes);
  std::vector<int> tables = a.block_tables;
  for (int blk : b.block_tables) tables.push_back(blk == kNoBlock ? kNoBlock : blk + a.num_blocks);
  upload(t.q, q.data(), q.size());
  upload(t.k, k.data(), k.size());
  upload(t.v, v.data(), v.size());
  upload(t.tables, tables.data(), tables.size() * sizeof(int));
  upload(t.ctx, a.context_lens.data(), a.context_lens.size() * sizeof(int));
  t.views = {t.q.get(), t.k.get(), t.v.get(), static_cast<const int*>(t.tables.get()),
             static_cast<const int*>(t.ctx.get()), 2};
  t.layout = problem_layout(a.spec, 2 * a.num_blocks);
  return t;
}

}  // namespace

TEST_CASE("over device inputs, the runner refuses stages 1-4, bad rotations and null pointers", "[runner]") {
  const PagedProblem p = make_problem(small_spec(3));
  const PagedProblem layout = problem_layout(p.spec, p.num_blocks);
  CHECK(layout.q_bytes.empty());
  CHECK(layout.block_tables.empty());
  CHECK(layout.cache.num_blocks == p.num_blocks);
  CHECK(layout.q_stride == p.q_stride);
  CHECK(layout.max_blocks_per_seq == p.max_blocks_per_seq);
  int dummy = 0;
  kernels::DeviceInputViews v{&dummy, &dummy, &dummy, &dummy, &dummy, 1};
  auto refused = [&](Stage s, const kernels::DeviceInputViews& views) { return refusal(layout, views, s); };
  int stages_refused = 0;
  for (int i = 1; i <= 4; ++i) {
    CHECK_THAT(refused(static_cast<Stage>(i), v),
               ContainsSubstring(kernels::stage_name(static_cast<Stage>(i))) && ContainsSubstring("stages 1-4"));
    ++stages_refused;
  }
  CHECK(stages_refused == 4);
  v.rotations = 0;
  CHECK_THAT(refused(Stage::optimized, v), ContainsSubstring("rotations 0"));
  v.rotations = 1;
  v.block_tables = nullptr;
  CHECK_THAT(refused(Stage::optimized, v), ContainsSubstring("null input pointer"));
  CHECK_THROWS_AS(problem_layout(p.spec, 0), std::invalid_argument);
}

TEST_CASE("over device inputs, each rotation's launch equals the runner on that problem, bit for bit",
          "[gpu][runner]") {
  PA_REQUIRE_GPU();
  ProblemSpec spec = small_spec(4);
  spec.extra_q_stride = 8;  // Q rows padded: each rotation's Q is q_stride elements a row
  ProblemSpec shared_spec = spec;
  shared_spec.context_lens = {32 + 1, 32 + 17, 32 + 100, 32 + 600};
  shared_spec.shared_prefix_len = 32;
  int launches_checked = 0;
  for (int i = 5; i <= 8; ++i) {
    const Stage s = static_cast<Stage>(i);
    INFO("stage " << kernels::stage_name(s));
    ProblemSpec sa = s == Stage::cascade_merge ? shared_spec : spec, sb = sa;
    sb.seed = sa.seed + 1;
    const PagedProblem a = make_problem(sa), b = make_problem(sb);
    TwoRotations t = two_rotations(a, b);
    StageRunner over_device(t.layout, t.views, s);
    CHECK(over_device.plan() == StageRunner(a, s).plan());
    const std::vector<float> want[2] = {StageRunner(a, s).run().out, StageRunner(b, s).run().out};
    REQUIRE(want[0] != want[1]);  // the two rotations hold different problems
    for (int r : {1, 0, 1}) {
      over_device.launch(r);
      CHECK(over_device.output() == want[r]);
      ++launches_checked;
    }
    CHECK_THROWS_WITH(over_device.launch(2), ContainsSubstring("rotation 2") && ContainsSubstring("0 to 1"));
  }
  CHECK(launches_checked == 4 * 3);
}

TEST_CASE("over device inputs, v1 past this GPU's shared memory is refused by name before any launch",
          "[gpu][runner]") {
  PA_REQUIRE_GPU();
  const kernels::GpuInfo g = kernels::gpu_info();
  ProblemSpec spec = small_spec(5);
  const int max_ctx = kernels::v1_max_context(spec.dtype, spec.head_size, spec.num_threads, g.smem_optin_bytes);
  spec.context_lens = {max_ctx + 1, 3};
  ProblemSpec other = spec;
  other.seed = spec.seed + 1;
  const PagedProblem a = make_problem(spec), b = make_problem(other);
  TwoRotations t = two_rotations(a, b);
  CHECK_THROWS_AS(StageRunner(t.layout, t.views, Stage::warp_reduce), std::invalid_argument);
  CHECK_THROWS_WITH(StageRunner(t.layout, t.views, Stage::warp_reduce),
                    ContainsSubstring(std::to_string(max_ctx + 1)) && ContainsSubstring("v2_partition"));
  // V2 and stage 8 take the same inputs.
  CHECK_NOTHROW(StageRunner(t.layout, t.views, Stage::v2_partition));
  CHECK_NOTHROW(StageRunner(t.layout, t.views, Stage::optimized));
}
