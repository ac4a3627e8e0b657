// Stages 1-5 on the GPU against the CPU reference. Every test draws fresh
// random inputs (seed from Catch2's --rng-seed, printed on failure), every
// run poisons the outputs with NaN first (run_stage), and check_stage fails
// any element left unwritten (NaN) or written past a context.
// Without a GPU every test here reports SKIPPED.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "pa/index/config.hpp"
#include "pa/kernels/api.hpp"
#include "pa/reference/check_stage.hpp"
#include "pa/core/paged_cache.hpp"
#include "../support/gpu_skip.hpp"
#include "../support/random_seed.hpp"

using namespace pa;
using kernels::Stage;

namespace {

constexpr Stage kV1Stages[] = {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce};

// Runs every stage 1-5 on the problem (one upload) and checks each.
void check_all_stages(const ProblemSpec& spec) {
  const PagedProblem p = make_problem(spec);
  kernels::DeviceProblem d(p);
  for (Stage s : kV1Stages) {
    const auto out = kernels::run_stage(s, d);
    const auto c = check_stage(p, out);
    INFO("stage " << kernels::stage_name(s) << "; problem " << spec.describe() << "\n" << c.summary());
    CHECK(c.pass);
  }
}

// How many (dtype, cache dtype, head, block) instances of stages 1-5 this
// build holds, counted from the registry the instance list is drawn from
// (pa/index/config.hpp, pa/kernels/instances.hpp): each dtype with its own
// cache, plus fp16 and bf16 with each fp8 cache; a PA_QUICK_KERNELS build
// compiles head 128 x block 16 for each, a full build every supported head
// size x block size. A loop over built_configs() must run this many.
std::size_t expected_built_configs() {
  const std::size_t dtypes = std::size(kAllDTypes) + 2 * 2;
  if (kernels::quick_kernels_build()) return dtypes;
  return dtypes * std::size(kSupportedHeadSizes) * std::size(kSupportedBlockSizes);
}

ProblemSpec base_spec(DType dt, int head, int block, std::uint64_t salt) {
  ProblemSpec s;
  s.dtype = dt;
  s.head_size = head;
  s.block_size = block;
  s.seed = test::fresh_seed(salt);
  return s;
}

}  // namespace

TEST_CASE("every built configuration: all stages, ragged contexts, GQA sampled", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  // GQA ratios cycled over the configurations: MHA, 4, 8, MQA.
  const int kv_heads_cycle[] = {8, 2, 1, 1};
  const int heads_cycle[] = {8, 8, 8, 4};
  int idx = 0;
  for (const auto& key : kernels::built_configs()) {
    ProblemSpec s = base_spec(key.dtype, key.head_size, key.block_size, 100 + idx);
    s.num_heads = heads_cycle[idx % 4];
    s.num_kv_heads = kv_heads_cycle[idx % 4];
    const int bs = key.block_size;
    // 1, bs-1, bs, bs+1, a few hundred: the masking cases of the last block,
    // and more blocks than warps.
    s.context_lens = {1, bs - 1, bs, bs + 1, 333 + idx};
    s.alibi = idx % 2 == 1;  // every other configuration with ALiBi's slopes
    // fp8 caches: scales from the data, or given ones (every other pair of
    // configurations): |K|, |V| < 6 stay in range at 1/40 and 1/30.
    s.kv_dtype = key.kv_dtype;
    if (is_fp8(key.kv_dtype) && (idx / 2) % 2 == 0) {  // independent of the ALiBi choice
      s.k_scale = 0.025f;
      s.v_scale = 1.0f / 30.0f;
    }
    INFO("config " << kernels::describe(key) << " heads " << s.num_heads << " kv " << s.num_kv_heads << " seed "
                   << s.seed);
    check_all_stages(s);
    ++idx;
  }
  CHECK(static_cast<std::size_t>(idx) == expected_built_configs());
}

TEST_CASE("long and ragged contexts, several sequences per launch", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto built = kernels::built_configs();
  std::size_t ran = 0;
  for (DType dt : kAllDTypes) {
    kernels::KernelKey key{dt, 128, 16, 128};
    if (std::find(built.begin(), built.end(), key) == built.end()) {
      const auto any = std::find_if(built.begin(), built.end(), [&](const auto& k) { return k.dtype == dt; });
      REQUIRE(any != built.end());  // every dtype is built
      key = *any;
    }
    ProblemSpec s = base_spec(dt, key.head_size, key.block_size, 200 + static_cast<int>(dt));
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.context_lens = {2000, 1, 4097, 17, 511, 1024};
    INFO("dtype " << dtype_name(dt) << " seed " << s.seed);
    check_all_stages(s);
    ++ran;
  }
  CHECK(ran == std::size(kAllDTypes));
}

TEST_CASE("GQA ratios 1, 4, 8 and MQA on the complete v1 kernel", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto key = kernels::built_configs().front();
  const int ratio = GENERATE(1, 4, 8, 16);
  ProblemSpec s = base_spec(DType::f16, 128, 16, 300 + ratio);
  const auto built = kernels::built_configs();
  if (std::find(built.begin(), built.end(), kernels::KernelKey{DType::f16, 128, 16, 128}) == built.end()) {
    s.dtype = key.dtype;
    s.head_size = key.head_size;
    s.block_size = key.block_size;
  }
  s.num_heads = 16;
  s.num_kv_heads = 16 / ratio;  // ratio 16: MQA
  s.context_lens = {100, 37, 260};
  INFO("ratio " << ratio << " seed " << s.seed);
  check_all_stages(s);
}

TEST_CASE("padded Q rows and zero tails", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto key = kernels::built_configs().back();
  ProblemSpec s = base_spec(key.dtype, key.head_size, key.block_size, 400);
  s.extra_q_stride = 16;  // a multiple of every Q vec; the padding holds NaN
  s.nan_tails = false;
  s.context_lens = {50, 3};
  check_all_stages(s);
}

TEST_CASE("v1 up to the shared-memory limit, a clear error past it", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto key = kernels::built_configs().front();
  const auto g = kernels::gpu_info();
  const int max_ctx = kernels::v1_max_context(key.dtype, key.head_size, 128, g.smem_optin_bytes);
  INFO("GPU " << g.name << " v1 max context " << max_ctx);
  REQUIRE(max_ctx > 4096);

  ProblemSpec s = base_spec(key.dtype, key.head_size, key.block_size, 500);
  s.num_heads = 2;
  s.num_kv_heads = 1;
  s.context_lens = {max_ctx, 5};
  {
    const PagedProblem p = make_problem(s);
    kernels::DeviceProblem d(p);
    const auto c = check_stage(p, kernels::run_stage(Stage::warp_reduce, d));
    INFO(c.summary());
    CHECK(c.pass);
  }
  s.context_lens = {max_ctx + 1};
  const PagedProblem p = make_problem(s);
  REQUIRE_THROWS_WITH(kernels::DeviceProblem(p), Catch::Matchers::ContainsSubstring("v2_partition"));
}

TEST_CASE("device out of memory: a clear error, and the next allocation still works", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto g = kernels::gpu_info();
  const auto too_big = static_cast<std::size_t>(g.global_mem_bytes) * 2;
  INFO("GPU " << g.name << ", " << g.global_mem_bytes << " bytes");
  try {
    kernels::DeviceBuffer b(too_big);
    FAIL("a buffer of twice the device memory was allocated");
  } catch (const kernels::DeviceOutOfMemory& e) {
    using Catch::Matchers::ContainsSubstring;
    CHECK_THAT(e.what(), ContainsSubstring("device out of memory") &&
                             ContainsSubstring(std::to_string(too_big) + " bytes") && ContainsSubstring("free of") &&
                             ContainsSubstring("accepted:"));
  }
  // The failed cudaMalloc left no error behind for the next call.
  kernels::DeviceBuffer small(1 << 20);
  CHECK(small.get() != nullptr);
  small.fill_bytes(0);
}

// Not a speed check (numbers about speed come from pa-bench): the timing loop
// returns one positive, finite sample per requested launch, and the median it
// reports is the sample median (odd count: the middle sample; even: the mean
// of the two middle ones), between the fastest and the slowest sample.
TEST_CASE("timing: the requested sample count and a median consistent with the samples", "[gpu][kernels]") {
  PA_REQUIRE_GPU();
  const auto key = kernels::built_configs().front();
  ProblemSpec s = base_spec(key.dtype, key.head_size, key.block_size, 600);
  s.context_lens = {256, 256};
  const PagedProblem p = make_problem(s);
  kernels::DeviceProblem d(p);
  for (int iters : {1, 6, 9}) {
    INFO("iters " << iters);
    const auto t = kernels::time_stage(Stage::warp_reduce, d, iters, 1);
    REQUIRE(t.ms.size() == static_cast<std::size_t>(iters));
    for (float ms : t.ms) {
      CHECK(std::isfinite(ms));
      CHECK(ms > 0.f);
    }
    std::vector<float> sorted = t.ms;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t h = sorted.size() / 2;
    const float median = sorted.size() % 2 ? sorted[h] : 0.5f * (sorted[h - 1] + sorted[h]);
    CHECK(t.median_ms == median);
    CHECK(sorted.front() <= t.median_ms);
    CHECK(t.median_ms <= sorted.back());
  }
}
