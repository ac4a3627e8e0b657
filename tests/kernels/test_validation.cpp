// Argument validation and the stage table: plain C++, runs without a GPU.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "pa/kernels/api.hpp"
#include "pa/core/paged_cache.hpp"
#include "../support/gpu_skip.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;
using kernels::Stage;

namespace {
PagedProblem small_problem() {
  ProblemSpec s;
  const auto key = kernels::built_configs().front();
  s.dtype = key.dtype;
  s.head_size = key.head_size;
  s.block_size = key.block_size;
  s.context_lens = {40, 7};
  return make_problem(s);
}
}  // namespace

TEST_CASE("stage names parse and list", "[kernels]") {
  CHECK(kernels::parse_stage("qk") == Stage::qk);
  CHECK(kernels::parse_stage("5") == Stage::warp_reduce);
  CHECK(kernels::parse_stage("v1") == Stage::warp_reduce);
  CHECK_FALSE(kernels::parse_stage("nope").has_value());
  CHECK(kernels::stages().size() == 8);
  CHECK_THAT(kernels::stage_names_text(), ContainsSubstring("q_to_smem") && ContainsSubstring("v2_partition"));
}

TEST_CASE("a valid problem validates", "[kernels]") {
  const PagedProblem p = small_problem();
  for (int s = 1; s <= 5; ++s) CHECK_NOTHROW(kernels::validate_problem(static_cast<Stage>(s), p, 0));
}

TEST_CASE("unsupported or unbuilt configurations list what is supported", "[kernels]") {
  PagedProblem p = small_problem();
  p.spec.head_size = 100;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0),
                    ContainsSubstring("head 100") && ContainsSubstring("head sizes 64, 80, 96, 112, 128, 192, 256"));
  p = small_problem();
  p.spec.num_threads = 256;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("threads 128"));
  if (kernels::quick_kernels_build()) {
    p = small_problem();
    p.spec.head_size = 64;
    CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("not built in this configuration"));
  }
}

TEST_CASE("heads, contexts and block tables are checked", "[kernels]") {
  PagedProblem p = small_problem();
  p.spec.num_kv_heads = 3;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("num_kv_heads (3)"));

  p = small_problem();
  p.context_lens[1] = 0;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring(">= 1"));

  p = small_problem();
  p.context_lens[1] = p.max_blocks_per_seq * p.spec.block_size + 1;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("exceeds what its block table holds"));

  p = small_problem();
  p.block_tables[p.table.offset(0, 1)] = p.cache.num_blocks;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("outside the pool"));
  p.block_tables[p.table.offset(0, 1)] = -1;
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::qk, p, 0), ContainsSubstring("outside the pool"));
}

TEST_CASE("Q rows must stay vector aligned", "[kernels]") {
  // fp16, block 16: 8-byte Q vecs, so one extra element (2 bytes) misaligns every other row.
  ProblemSpec s;
  s.dtype = DType::f16;
  s.head_size = 128;
  s.block_size = 16;
  s.context_lens = {40, 7};
  s.extra_q_stride = 1;
  const PagedProblem p = make_problem(s);
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::q_to_smem, p, 0), ContainsSubstring("extra_q_stride"));
}

TEST_CASE("contexts past v1's shared memory point to V2", "[kernels]") {
  PagedProblem p = small_problem();
  const std::int64_t limit = 227 * 1024;  // an H100's per-block opt-in limit
  const int max_ctx = kernels::v1_max_context(p.spec.dtype, p.spec.head_size, 128, limit);
  CHECK(kernels::v1_smem_bytes(Stage::qk, p.spec.dtype, p.spec.head_size, 128, max_ctx) <= limit);
  CHECK(kernels::v1_smem_bytes(Stage::qk, p.spec.dtype, p.spec.head_size, 128, max_ctx + 1) > limit);
  ProblemSpec s = p.spec;
  s.context_lens = {max_ctx + 1};
  const PagedProblem big = make_problem(s);
  CHECK_THROWS_WITH(kernels::validate_problem(Stage::softmax, big, limit),
                    ContainsSubstring("v2_partition") && ContainsSubstring("shared memory"));
  CHECK_NOTHROW(kernels::validate_problem(Stage::q_to_smem, big, limit));  // stage 1 holds no logits
  // The same rule alone (the runner over device inputs asks it for v1):
  // the message names the stage, the context, the bytes, the limit and V2.
  const DType dt = p.spec.dtype;
  const int hs = p.spec.head_size;
  CHECK_NOTHROW(kernels::check_v1_smem(Stage::warp_reduce, dt, hs, 128, max_ctx, limit));
  CHECK_NOTHROW(kernels::check_v1_smem(Stage::warp_reduce, dt, hs, 128, 1 << 20, 0));  // 0: not checked
  const std::string need = std::to_string(kernels::v1_smem_bytes(Stage::warp_reduce, dt, hs, 128, max_ctx + 1));
  CHECK_THROWS_WITH(kernels::check_v1_smem(Stage::warp_reduce, dt, hs, 128, max_ctx + 1, limit),
                    ContainsSubstring("stage warp_reduce") && ContainsSubstring(std::to_string(max_ctx + 1)) &&
                        ContainsSubstring(need + " bytes") && ContainsSubstring(std::to_string(limit)) &&
                        ContainsSubstring("at most " + std::to_string(max_ctx) + " tokens") &&
                        ContainsSubstring("v2_partition"));
}

TEST_CASE("without a GPU the API says so instead of crashing", "[kernels]") {
  std::string why;
  if (kernels::gpu_available(&why)) SKIP("a GPU is present: this test covers the no-GPU path");
  CHECK_FALSE(why.empty());
  const PagedProblem p = small_problem();
  CHECK_THROWS_AS(kernels::run_stage(Stage::qk, p), kernels::NoGpuError);
}

// launch_stage checks its arguments before anything reaches CUDA: with CUDA
// built (no GPU needed) a null or missing buffer is an invalid_argument that
// names it; without CUDA the call says so first.
TEST_CASE("missing buffers are rejected before any launch", "[kernels]") {
  const PagedProblem p = small_problem();
  kernels::StageArgs a = kernels::problem_stage_args(p);  // every pointer null
  // Stand-in addresses: never dereferenced, because every case below fails validation.
  static char dummy[64];
  auto expect = [&](Stage stage, const kernels::StageArgs& args, const std::string& what) {
#if PA_HAVE_CUDA
    CHECK_THROWS_WITH(kernels::launch_stage(stage, args), ContainsSubstring(what));
    CHECK_THROWS_AS(kernels::launch_stage(stage, args), std::invalid_argument);
#else
    (void)what;
    CHECK_THROWS_AS(kernels::launch_stage(stage, args), kernels::NoGpuError);
#endif
  };
  expect(Stage::qk, a, "null input pointer");  // no q, caches, tables, lengths
  a.q = a.k_cache = a.v_cache = dummy;
  a.block_tables = reinterpret_cast<const int*>(dummy);
  a.context_lens = reinterpret_cast<const int*>(dummy);
  expect(Stage::qk, a, "stage_out is null");
  a.stage_out = reinterpret_cast<float*>(dummy);
  expect(Stage::softmax, a, "stage_max/stage_sum are null");
  expect(Stage::warp_reduce, a, "out is null");
  kernels::StageArgs bad_heads = a;
  bad_heads.num_kv_heads = 3;
  expect(Stage::qk, bad_heads, "num_kv_heads (3)");
  kernels::StageArgs bad_geom = a;
  bad_geom.cg.head_size = a.head_size + 16;
  expect(Stage::qk, bad_geom, "cache geometry does not match");
}

TEST_CASE("stage_bytes: Q, the KV each stage reads and what it writes, exactly", "[kernels]") {
  ProblemSpec s;
  s.dtype = DType::f16;
  s.head_size = 64;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.context_lens = {40, 100};
  const std::int64_t rows = 2 * 8, tokens = 140;
  const std::int64_t q = rows * 64 * 2;                 // Q in fp16
  const std::int64_t kv = tokens * 2 * 2 * 64 * 2;      // K and V, 2 KV heads, head 64, fp16
  const std::int64_t out = rows * 64 * 2;               // the output in fp16
  REQUIRE(s.kv_bytes() == kv);
  CHECK(kernels::stage_bytes(kernels::Stage::q_to_smem, s) == q + rows * 64 * 4);
  CHECK(kernels::stage_bytes(kernels::Stage::qk, s) == q + kv / 2 + 8 * tokens * 4);
  CHECK(kernels::stage_bytes(kernels::Stage::softmax, s) == q + kv / 2 + 8 * tokens * 4);
  CHECK(kernels::stage_bytes(kernels::Stage::lv, s) == q + kv + rows * 4 * 64 * 4);
  CHECK(kernels::stage_bytes(kernels::Stage::warp_reduce, s) == q + kv + out);
  CHECK(kernels::stage_bytes(kernels::Stage::v2_partition, s) == q + kv + out);
  CHECK(kernels::stage_bytes(kernels::Stage::optimized, s) == q + kv + out);
  // The cascade reads the shared prefix once: 32 tokens shared by both sequences.
  s.shared_prefix_len = 32;
  CHECK(kernels::stage_bytes(kernels::Stage::cascade_merge, s) == q + (tokens - 32) * 2 * 2 * 64 * 2 + out);
  CHECK(kernels::stage_bytes(kernels::Stage::warp_reduce, s) == q + kv + out);  // v1 reads it per sequence
}
