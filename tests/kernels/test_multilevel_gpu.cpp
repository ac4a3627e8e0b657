// The multi-level cascade on the GPU (pa/kernels/multilevel_cascade.hpp)
// against the CPU reference (ref_multilevel_cascade, itself checked against
// plain attention over the concatenated tokens in tests/reference): the
// merged output and lse, and every level's state. The pools come from
// make_cascade_problem: shuffled pages, NaN in the slots past each span's
// end (so a shared span that ends inside a page would poison the output if
// the prefix kernel copied them), spare garbage pages. Outputs and states
// are poisoned with NaN first. GPU cases SKIP without a device.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/multilevel_cascade.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/v2_partition.hpp"
#include "pa/reference/multilevel_cascade.hpp"
#include "../support/gpu_skip.hpp"
#include "../support/random_seed.hpp"

namespace {

using namespace pa;
using kernels::MultiLevelOptions;
using kernels::MultiLevelResult;
using Catch::Matchers::ContainsSubstring;
using Levels = std::vector<CascadeLevelSpec>;

CascadeLevelSpec level(std::vector<int> sizes, std::vector<int> tokens) { return {std::move(sizes), std::move(tokens)}; }

// The (fp16 / bf16, head, block) configurations both the prefix kernel and
// stage 8 are built for.
// (None without CUDA: stage 8's library exists in CUDA builds only.)
std::vector<kernels::KernelKey> built() {
  std::vector<kernels::KernelKey> v;
#if PA_HAVE_CUDA
  for (const kernels::KernelKey& k : kernels::v2_built_configs())
    if (k.dtype != DType::f32 && !is_fp8(k.kv_dtype) && optimized_supported(k.dtype, k.head_size, k.block_size))
      v.push_back(k);
#endif
  return v;
}

ProblemSpec base_of(const kernels::KernelKey& k, int heads, int kv_heads, std::uint64_t salt) {
  ProblemSpec s;
  s.dtype = k.dtype;
  s.head_size = k.head_size;
  s.block_size = k.block_size;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.context_lens = {1};
  s.seed = test::fresh_seed(salt);
  return s;
}

std::vector<double> states_out(const PagedProblem& q, const std::vector<AttentionState>& st) {
  std::vector<double> v(st.size() * q.spec.head_size);
  for (std::size_t r = 0; r < st.size(); ++r)
    for (int d = 0; d < q.spec.head_size; ++d) v[r * q.spec.head_size + d] = st[r].empty() ? 0.0 : st[r].out[d];
  return v;
}

// Runs the cascade and checks it against the reference: merged output and
// lse, and each level's state where the request has one (NaN exactly where
// its group at that level is empty: no kernel wrote those rows).
void check(const CascadeProblem& cp, const MultiLevelCascade& c, const MultiLevelOptions& opt,
           const std::string& what) {
  const MultiLevelRef want = ref_multilevel_cascade(cp.queries, cp.cache(KvLayout::vllm), c);
  const MultiLevelResult got = kernels::run_multilevel_cascade(cp.queries, cp.pool, c, opt);
  const DType dt = cp.queries.spec.dtype;
  INFO(what << " | " << cp.queries.spec.describe() << " | " << got.plan);
  const CompareResult out = compare(want.out.data(), got.out.data(), got.out.size(), tolerance_for(dt));
  INFO("merged output: " << out.summary());
  CHECK(out.num_nan == 0);
  CHECK(out.pass);
  const CompareResult lse = compare(want.lse.data(), got.lse.data(), got.lse.size(), lse_tolerance(dt));
  INFO("merged lse: " << lse.summary());
  CHECK(lse.pass);
  const int hs = cp.queries.spec.head_size;
  for (int l = 0; l < c.num_levels(); ++l) {
    std::vector<double> ref_out = states_out(cp.queries, want.levels[l]), ref_lse;
    std::vector<float> got_out, got_lse;
    std::size_t empty = 0;
    for (std::size_t r = 0; r < want.levels[l].size(); ++r) {
      const bool none = std::isnan(got.level_lse[l][r]);
      // A row without a state is exactly a row whose group is empty.
      CHECK(none == want.levels[l][r].empty());
      if (none) {
        ++empty;
        continue;
      }
      ref_lse.push_back(want.levels[l][r].lse);
      got_lse.push_back(got.level_lse[l][r]);
      for (int d = 0; d < hs; ++d) got_out.push_back(got.level_out[l][r * hs + d]);
    }
    std::vector<double> ref_kept;
    for (std::size_t r = 0; r < want.levels[l].size(); ++r)
      if (!want.levels[l][r].empty())
        ref_kept.insert(ref_kept.end(), ref_out.begin() + r * hs, ref_out.begin() + (r + 1) * hs);
    const CompareResult so = compare(ref_kept.data(), got_out.data(), got_out.size(), tolerance_for(dt));
    const CompareResult sl = compare(ref_lse.data(), got_lse.data(), got_lse.size(), lse_tolerance(dt));
    INFO("level " << l << " (" << empty << " rows without a state): out " << so.summary() << "; lse " << sl.summary());
    CHECK(so.num_nan == 0);
    CHECK(so.pass);
    CHECK(sl.pass);
  }
}

void check(const CascadeProblem& cp, const MultiLevelOptions& opt, const std::string& what) {
  check(cp, cp.cascade, opt, what);
}

}  // namespace

TEST_CASE("multi-level cascade equals the reference: levels, partial pages, empty groups, GQA", "[gpu][cascade]") {
  PA_REQUIRE_GPU();
  std::size_t ran = 0, configs = 0;
  std::uint64_t salt = 9100;
  const std::vector<kernels::KernelKey> keys = built();
  REQUIRE(!keys.empty());
  for (const kernels::KernelKey& k : keys) {
    ++configs;
    const int bs = k.block_size;
    INFO(kernels::describe(k));
    // Prefix kernels and stream counts rotate with the configuration.
    MultiLevelOptions opt;
    const PrefixKernel kernels_[] = {PrefixKernel::automatic, PrefixKernel::mma_8warps, PrefixKernel::mma_4warps};
    opt.prefix = kernels_[configs % 3];
    opt.streams = configs % 2 == 0 ? 1 : 4;

    // Three levels: a system prompt ending inside a page, groups (one of a
    // single request, one empty), each request's own tokens (one of them none).
    check(make_cascade_problem(base_of(k, 8, 2, ++salt),
                               Levels{level({6}, {5 * bs + 3}), level({2, 1, 3}, {2 * bs, 0, bs + 1}),
                                      level({1, 1, 1, 1, 1, 1}, {1, bs, 37, 0, 2 * bs - 1, 300})}),
          opt, "three levels");
    // An empty level in the middle, MQA, a span of one token at level 0.
    check(make_cascade_problem(base_of(k, 8, 1, ++salt),
                               Levels{level({4}, {1}), level({4}, {0}), level({1, 1, 1, 1}, {bs, 3, 700, 1})}),
          opt, "an empty level");
    // One level: stage 8 alone, then the fold.
    check(make_cascade_problem(base_of(k, 4, 4, ++salt), Levels{level({1, 1, 1}, {1, bs + 5, 513})}), opt,
          "one level");
    // The last level empty for every request: no stage 8 launch.
    check(make_cascade_problem(base_of(k, 8, 2, ++salt), Levels{level({3}, {4 * bs}), level({1, 1, 1}, {0, 0, 0})}),
          opt, "an empty last level");
    // 70 requests x GQA 2 = 140 query rows: two query tiles in one group.
    check(make_cascade_problem(base_of(k, 4, 2, ++salt),
                               Levels{level({70}, {1024 + 7}), CascadeLevelSpec::uniform(70, 1, 17)}),
          opt, "two query tiles");
    ran += 5;
  }
  CHECK(configs == keys.size());
  CHECK(ran == 5 * keys.size());
}

TEST_CASE("multi-level cascade: groups of requests that are not neighbours (Q reordered per level)",
          "[gpu][cascade]") {
  PA_REQUIRE_GPU();
  const std::vector<kernels::KernelKey> keys = built();
  REQUIRE(!keys.empty());
  const kernels::KernelKey k = keys.front();
  std::size_t ran = 0;
  for (int streams : {1, 4}) {
    CascadeProblem cp = make_cascade_problem(
        base_of(k, 32, 8, 9200 + streams),
        Levels{level({12}, {2048}), level({4, 4, 4}, {512, 256 + 5, 64}), CascadeLevelSpec::uniform(12, 1, 40)});
    // Level 1's groups dealt round-robin instead of in runs: request r reads group r % 3.
    MultiLevelCascade c = cp.cascade;
    for (int r = 0; r < c.num_requests; ++r) c.levels[1].group_of[r] = r % 3;
    MultiLevelOptions opt;
    opt.streams = streams;
    check(cp, c, opt, "round-robin groups, streams " + std::to_string(streams));
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("multi-level cascade: refusals name the value and what is accepted", "[gpu][cascade]") {
  PA_REQUIRE_GPU();
  const std::vector<kernels::KernelKey> keys = built();
  REQUIRE(!keys.empty());
  const CascadeProblem cp = make_cascade_problem(base_of(keys.front(), 8, 2, 9300),
                                                 Levels{level({2}, {64}), level({1, 1}, {5, 9})});
  auto refused = [&](const PagedProblem& q, const MultiLevelCascade& c, const std::string& part) {
    try {
      (void)kernels::run_multilevel_cascade(q, cp.pool, c);
      FAIL("no error; expected one naming: " << part);
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), ContainsSubstring(part));
    }
  };
  MultiLevelCascade c = cp.cascade;
  c.levels[1].group_of[0] = 7;
  refused(cp.queries, c, "request 0 reads group 7");
  c = cp.cascade;
  c.num_requests = 3;
  c.levels[0].group_of.push_back(0);
  c.levels[1].group_of.push_back(0);
  refused(cp.queries, c, "3 requests for 2 query rows");
  c = cp.cascade;
  c.num_pages = cp.pool.num_blocks + 5;
  refused(cp.queries, c, "accepted: at most the pool's");
  c = cp.cascade;
  while (c.num_levels() <= kernels::kMaxCascadeLevels) c.levels.push_back(c.levels.back());
  refused(cp.queries, c, "levels; accepted: 1..8");
  PagedProblem fp32 = cp.queries;
  fp32.spec.dtype = DType::f32;
  CHECK_THROWS_AS(kernels::run_multilevel_cascade(fp32, cp.pool, cp.cascade), std::invalid_argument);
  MultiLevelOptions bad;
  bad.streams = 0;
  try {
    (void)kernels::run_multilevel_cascade(cp.queries, cp.pool, cp.cascade, bad);
    FAIL("no error for streams 0");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), ContainsSubstring("streams 0; accepted: 1..16"));
  }
}
