// An fp8 KV cache in the viewer's data layer: the configuration it decodes
// with (1-byte cache elements, x = 16, K vec bytes apart from Q vec bytes),
// every K/V event of the host model's fp8 traces decoded to the elements the
// event names, the stages that refuse an fp8 cache refused with a message,
// and the dequant step named and described.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "core/background.hpp"
#include "core/config_info.hpp"
#include "core/highlight.hpp"
#include "core/lesson_problem.hpp"
#include "core/names.hpp"
#include "core/timeline_view.hpp"
#include "core/trace_load.hpp"
#include "pa/index/config.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;

namespace {

ProblemSpec fp8_spec(KvDType kv = KvDType::fp8_e4m3) {
  ProblemSpec spec;
  spec.kv_dtype = kv;
  return spec;
}

}  // namespace

TEST_CASE("kv dtype: config_info takes the cache's element bytes from KernelConfig", "[viewer][kv_dtype]") {
  using C = KernelConfig<DType::f16, 128, 16, 128, KvDType::fp8_e4m3>;
  const ConfigInfo c = config_info(fp8_spec());
  CHECK(c.kv_dtype == KvDType::fp8_e4m3);
  CHECK(c.elem_bytes == 2);  // Q stays fp16
  CHECK(c.kv_elem_bytes == C::kKvBytes);
  CHECK(c.kv_elem_bytes == 1);
  CHECK(c.x == C::kX);
  CHECK(c.x == 16);
  CHECK(c.vec_size == C::kVecSize);
  CHECK(c.vec_bytes == C::kVecBytes);
  CHECK(c.q_vec_bytes == C::kQVecBytes);
  CHECK(c.q_vec_bytes == 2 * c.vec_bytes);  // the same elements, twice the bytes in shared memory
  CHECK(c.v_vec_size == C::kVVecSize);
  CHECK(c.v_vec_bytes == C::kVVecBytes);
  CHECK(c.num_rows_per_iter == C::kNumRowsPerIter);
  // A cache in the query's dtype: element bytes, vec bytes and Q vec bytes agree.
  const ConfigInfo h = config_info(ProblemSpec{});
  CHECK(h.kv_dtype == KvDType::same);
  CHECK(h.kv_elem_bytes == h.elem_bytes);
  CHECK(h.q_vec_bytes == h.vec_bytes);
  CHECK(h.x == 8);
  // e5m2 has the same geometry; fp32 queries take no fp8 cache.
  CHECK(config_info(fp8_spec(KvDType::fp8_e5m2)).x == 16);
  CHECK_THROWS_AS(config_info(DType::f32, 128, 16, 128, KvDType::fp8_e4m3), std::invalid_argument);
}

TEST_CASE("kv dtype: every K/V event of an fp8 trace decodes to the elements it names", "[viewer][kv_dtype]") {
  // Stage 2 (K vecs), 4 (V vecs) and 8 (16-byte cp.async chunks) of the
  // default problem with an fp8 cache; decoded as the panels decode them.
  const ProblemSpec spec = fp8_spec();
  const ConfigInfo c = config_info(spec);
  int checked = 0, k_vecs = 0, v_vecs = 0;
  for (trace::Stage stage : {trace::Stage::qk, trace::Stage::lv, trace::Stage::optimized}) {
    INFO("stage " << trace::to_string(stage));
    const ProblemSpec sp = lesson_problem(spec, stage, 0).spec;  // stage 8: a GQA group
    const KvLayoutGeometry g = c.cache(sp.num_kv_heads);
    const auto events = trace::model_events(sp, stage, viewer_selection(sp, stage, 0, 0, 0));
    for (const trace::Event& e : events) {
      if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) continue;
      if (e.byte_offset < 0 || e.bytes <= 0) continue;
      const bool k = e.tensor == trace::Tensor::k_cache;
      int n = 0;
      bool in_event = true;
      for_each_kv_element(e, g, c.kv_elem_bytes, [&](const CacheGeometry::Coords& x) {
        const int token = e.logical_block * c.block_size + x.t;
        in_event &= x.physical_block == e.physical_block && x.kv_head == e.kv_head;
        in_event &= x.d >= e.dim_begin && x.d < e.dim_begin + std::max<int>(1, e.dim_count);
        // A K access is one token's dims; a V access one dim row's tokens, from the event's.
        in_event &= k ? token == e.token : token >= e.token && token < e.token + c.x;
        ++n;
      });
      CHECK(in_event);
      CHECK(n == e.bytes / c.kv_elem_bytes);
      if (stage == trace::Stage::qk && k) {
        CHECK(n == c.vec_size);  // 8 bytes of K = 8 elements
        ++k_vecs;
      }
      if (stage == trace::Stage::lv && !k && e.bytes == c.v_vec_bytes) {
        CHECK(n == 16);  // 16 bytes of V = 16 elements, a whole block row
        ++v_vecs;
      }
      ++checked;
    }
  }
  CHECK(k_vecs > 0);
  CHECK(v_vecs > 0);
  CHECK(checked > k_vecs + v_vecs);
}

TEST_CASE("kv dtype: a loaded fp8 trace marks the K elements the fp16 trace marks", "[viewer][kv_dtype]") {
  // The same tokens and dims are read whatever the cache's element type;
  // decoded with 2-byte elements, an fp8 trace would mark half of them, on
  // the wrong tokens.
  auto k_cells = [](const ProblemSpec& spec) {
    LoadRequest r;
    r.kind = LoadRequest::Kind::model;
    r.spec = spec;
    r.stage = trace::Stage::qk;
    LoadControl ctl;
    const LoadedTrace t = load_trace(r, ctl);
    std::vector<char> read;
    for (int step : t.block0.k_first_step) read.push_back(step >= 0);
    return std::pair{t, read};
  };
  const auto [fp8, fp8_read] = k_cells(fp8_spec());
  const auto [fp16, fp16_read] = k_cells(ProblemSpec{});
  CHECK(fp8.cfg.kv_elem_bytes == 1);
  CHECK(fp8.index.find_step(fp8.block, trace::Step::dequant) >= 0);
  CHECK(fp16.index.find_step(fp16.block, trace::Step::dequant) < 0);
  REQUIRE(fp8_read.size() == fp16_read.size());
  CHECK(fp8_read == fp16_read);
  const int ctx = fp8.spec.context_lens[0], H = fp8.cfg.head_size, B = fp8.cfg.block_size;
  int in_context = 0;
  for (int tok = 0; tok < ctx; ++tok)
    for (int d = 0; d < H; ++d) in_context += fp8_read[(static_cast<std::size_t>(tok / B) * H + d) * B + tok % B];
  CHECK(in_context == ctx * H);
}

TEST_CASE("kv dtype: stages that cannot take an fp8 cache are refused with a message", "[viewer][kv_dtype]") {
  const ProblemSpec fp8 = fp8_spec();
  CHECK(kv_cache_refusal(ProblemSpec{}, trace::Stage::cascade_merge).empty());
  for (trace::Stage st : {trace::Stage::q_to_smem, trace::Stage::qk, trace::Stage::lv, trace::Stage::v2_partition,
                          trace::Stage::optimized})
    CHECK(kv_cache_refusal(fp8, st).empty());
  const std::string cascade = kv_cache_refusal(fp8, trace::Stage::cascade_merge);
  CHECK(cascade.find("cascade_merge") != std::string::npos);
  CHECK(cascade.find("fp8_e4m3") != std::string::npos);
  CHECK(cascade.find("accepted") != std::string::npos);
  ProblemSpec small_blocks = fp8;
  small_blocks.block_size = 8;
  small_blocks.partition_size = 512;
  const std::string opt = kv_cache_refusal(small_blocks, trace::Stage::optimized);
  CHECK(opt.find("block size") != std::string::npos);
  small_blocks.kv_dtype = KvDType::same;
  CHECK(kv_cache_refusal(small_blocks, trace::Stage::optimized).empty());

  // The loader says so instead of tracing.
  LoadRequest r;
  r.kind = LoadRequest::Kind::model;
  r.spec = lesson_problem(fp8, trace::Stage::cascade_merge, 0).spec;
  r.stage = trace::Stage::cascade_merge;
  LoadControl ctl;
  try {
    load_trace(r, ctl);
    FAIL("stage 7 traced an fp8 cache");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("cascade_merge") != std::string::npos);
  }
}

TEST_CASE("kv dtype: the dequant step is named, described, timed and reachable from a lesson marker",
          "[viewer][kv_dtype]") {
  CHECK(std::string(step_name(trace::Step::dequant)) == "dequant");
  CHECK(std::string(step_summary(trace::Step::dequant)).find("fp8") != std::string::npos);
  for (int v = 0; v < static_cast<int>(trace::Step::count_); ++v) {
    INFO(step_name(static_cast<trace::Step>(v)));
    CHECK(std::string(step_summary(static_cast<trace::Step>(v))).size() > 8);
  }
  CHECK(phases_of_anchor("optimized.qk_mma_fp8") == phase_bit(trace::Phase::opt_qk_mma));
  CHECK(phases_of_anchor("optimized.pv_mma_fp8") == phase_bit(trace::Phase::opt_pv_mma));
  // A marker button for dequant gives a problem without fp8 an fp8 cache.
  const auto with = problem_with_step(ProblemSpec{}, trace::Step::dequant, trace::Stage::qk);
  REQUIRE(with.has_value());
  CHECK(with->kv_dtype == KvDType::fp8_e4m3);
  ProblemSpec f32;
  f32.dtype = DType::f32;
  const auto from_f32 = problem_with_step(f32, trace::Step::dequant, trace::Stage::lv);
  REQUIRE(from_f32.has_value());
  CHECK(from_f32->dtype == DType::f16);
  CHECK_FALSE(problem_with_step(fp8_spec(), trace::Step::dequant, trace::Stage::qk).has_value());  // has it
  CHECK_FALSE(problem_with_step(ProblemSpec{}, trace::Step::dequant, trace::Stage::cascade_merge).has_value());
  CHECK(problem_with_step(ProblemSpec{}, trace::Step::alibi_bias, trace::Stage::qk)->alibi);
  CHECK_FALSE(problem_with_step(ProblemSpec{}, trace::Step::k_load, trace::Stage::qk).has_value());
  // q_scale: stage 8's bf16 queries with an fp8 cache; the problem's fp8 format is kept.
  CHECK(std::string(step_name(trace::Step::q_scale)) == "q_scale");
  CHECK(phases_of_anchor("optimized.q_to_fp16") == phase_bit(trace::Phase::opt_q_frag));
  const auto qs = problem_with_step(ProblemSpec{}, trace::Step::q_scale, trace::Stage::optimized);
  REQUIRE(qs.has_value());
  CHECK(qs->dtype == DType::bf16);
  CHECK(qs->kv_dtype == KvDType::fp8_e4m3);
  ProblemSpec e5 = fp8_spec();
  e5.kv_dtype = KvDType::fp8_e5m2;
  const auto qs5 = problem_with_step(e5, trace::Step::q_scale, trace::Stage::optimized);
  REQUIRE(qs5.has_value());
  CHECK(qs5->kv_dtype == KvDType::fp8_e5m2);
  CHECK(qs5->dtype == DType::bf16);
  // The marker button's tooltip names exactly what the click changes.
  CHECK(describe_step_change(ProblemSpec{}, *qs) ==
        "store the KV cache in fp8_e4m3 (the Problem tab's KV cache choice) and make the queries bf16 (the Problem "
        "tab's dtype)");
  CHECK(describe_step_change(e5, *qs5) == "make the queries bf16 (the Problem tab's dtype)");
  CHECK(describe_step_change(ProblemSpec{}, *with) ==
        "store the KV cache in fp8_e4m3 (the Problem tab's KV cache choice)");
  const auto slopes = problem_with_step(ProblemSpec{}, trace::Step::alibi_bias, trace::Stage::qk);
  REQUIRE(slopes.has_value());
  CHECK(describe_step_change(ProblemSpec{}, *slopes) ==
        "give it the paper's ALiBi slopes (the Problem tab's ALiBi checkbox)");
  CHECK(describe_step_change(ProblemSpec{}, ProblemSpec{}).empty());
  CHECK_FALSE(problem_with_step(ProblemSpec{}, trace::Step::q_scale, trace::Stage::qk).has_value());  // stage 8 only
  ProblemSpec bf16_fp8 = fp8_spec();
  bf16_fp8.dtype = DType::bf16;
  CHECK_FALSE(problem_with_step(bf16_fp8, trace::Step::q_scale, trace::Stage::optimized).has_value());  // has it
}
