// Timelines recorded on the GPU (label gpu; SKIPPED without a GPU or a CUDA
// build): stages 5 and 8 run with the timing tracer.
//
// What a timeline must be to be true of the kernel:
//  - the timed kernel computes what the untimed one does (its output equals
//    the reference within the dtype's tolerance);
//  - every warp of every block of the planned grid has spans, and each warp's
//    phases come in the kernel's program order (opt_decode_kernel): prologue;
//    then, with work, q_frag, the pipeline's first issues (iters 0..k-1), per
//    step j: issue (iter j + k), wait, qk_mma, online_softmax, pv_mma (iter j);
//    then warp_merge; with several splits the arrival, and in the CTA that
//    merges the three merge steps. k (stages - 1) is the same for every warp;
//  - time only moves forward within a warp, on both clocks, and a warp stays
//    on one SM (< the GPU's SM count);
//  - no span is dropped, and the overhead figures are real medians.
// Stage 5 (the v1 kernel): every warp of every (head, sequence) block runs
// q_to_smem, qk, softmax, lv, warp_reduce, once each, in that order. Stage 6:
// the same plus partition_store in each working partition, nothing in a
// partition past its sequence, one partition_reduce per reduce warp where
// the sequence has several partitions. Stage 7 (the cascade): its four
// kernels in the order its streams allow, each warp's prefix spans in the
// wgmma kernel's program order.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cstdio>
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_skip.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/reference/attention.hpp"
#include "pa/trace/timeline_record.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

// Checks one warp's phases against the kernel's order; returns the number of
// prologue issues (k), or -1 for a warp of a CTA without work.
int check_warp_order(const std::vector<Span>& w) {
  REQUIRE(!w.empty());
  std::size_t i = 0;
  const auto next = [&](Phase ph, int iter) {
    INFO("span " << i << " of " << w.size() << ": expected " << to_string(ph) << " iter " << iter << ", found "
                  << (i < w.size() ? to_string(w[i].phase) : "the end") << " iter "
                  << (i < w.size() ? w[i].iter : 0));
    REQUIRE(i < w.size());
    REQUIRE(w[i].phase == ph);
    REQUIRE(w[i].iter == iter);
    ++i;
  };
  next(Phase::opt_prologue, -1);
  if (w.size() == 1) return -1;
  next(Phase::opt_q_frag, -1);
  // The issues run on with iters 0, 1, ...: the first k are the pipeline's
  // prologue, the next (if the warp has steps) opens step 0 of the loop.
  const std::size_t first_issue = i;
  int n = 0;
  while (i < w.size() && w[i].phase == Phase::opt_pipeline_issue) {
    REQUIRE(w[i].iter == n);
    ++i, ++n;
  }
  int k = n;
  if (i < w.size() && w[i].phase == Phase::opt_pipeline_wait) {
    k = n - 1;
    i = first_issue + static_cast<std::size_t>(k);
  }
  for (int j = 0; i < w.size() && w[i].phase == Phase::opt_pipeline_issue; ++j) {
    next(Phase::opt_pipeline_issue, j + k);
    next(Phase::opt_pipeline_wait, j);
    next(Phase::opt_qk_mma, j);
    next(Phase::opt_online_softmax, j);
    next(Phase::opt_pv_mma, j);
  }
  next(Phase::opt_warp_merge, -1);
  if (i < w.size()) next(Phase::opt_split_arrive, -1);
  if (i < w.size()) next(Phase::opt_merge_states, -1);
  REQUIRE(i == w.size());
  return k;
}

// The overhead figures are real medians (both launches timed), and one line
// of the recording for the log.
void check_and_report(const ProblemSpec& spec, const TimelineRecording& r) {
  CHECK(r.untimed_ms > 0.f);
  CHECK(r.timed_ms > 0.f);
  std::printf("timeline %s: %zu spans, untimed %.4f ms, timed %.4f ms (%s, %s)\n", spec.describe().c_str(),
              r.spans.size(), r.untimed_ms, r.timed_ms, r.plan.c_str(), r.gpu_name.c_str());
}

}  // namespace

TEST_CASE("stage 8 timeline: every warp's phases in program order, clocks forward, output unchanged",
          "[gpu][timeline][optimized]") {
  PA_REQUIRE_GPU();
  struct Case {
    ProblemSpec spec;
    int force_splits;  // 0: the planner's choice on this GPU
  };
  const Case cases[] = {
      // GQA 4:1, ragged contexts with a context of 1, 4 splits: CTAs without
      // work, CTAs that merge and CTAs that only arrive.
      {test::spec_of(DType::f16, 128, 16, 8, 2, {600, 1, 37}, 11), 4},
      // The planner's own grid at a README-like shape, bf16.
      {test::spec_of(DType::bf16, 128, 16, 32, 8, {4096}, 12), 0},
      // MHA, one split: no arrival, no merge.
      {test::spec_of(DType::f16, 128, 16, 4, 4, {200, 17}, 13), 1},
  };
  int ran = 0;
  for (const Case& c : cases) {
    const PagedProblem p = make_problem(c.spec);
    INFO(c.spec.describe() << " splits " << c.force_splits);
    REQUIRE(can_record_timeline(Stage::optimized, c.spec));
    TimelineOptions o;
    o.force_splits = c.force_splits;
    o.timing_iters = 5;
    const TimelineRecording r = record_timeline(Stage::optimized, p, o);
    INFO(r.plan);
    CHECK(r.launches == 1);
    test::require_close(ref_output(p), r.out, tolerance_for(c.spec.dtype));

    std::map<std::pair<std::uint32_t, std::uint16_t>, std::vector<Span>> by_warp;
    for (const Span& s : r.spans) {
      REQUIRE(s.stage == Stage::optimized);
      REQUIRE(s.kernel == KernelRole::main);
      REQUIRE(s.block < static_cast<std::uint32_t>(r.grid_blocks));
      REQUIRE(s.warp < r.warps_per_block);
      REQUIRE(s.sm < r.sm_count);
      REQUIRE(s.t_begin_ns <= s.t_end_ns);
      REQUIRE(s.clk_begin <= s.clk_end);
      by_warp[{s.block, s.warp}].push_back(s);  // record_timeline sorts by (block, warp, begin)
    }
    REQUIRE(by_warp.size() == static_cast<std::size_t>(r.grid_blocks) * r.warps_per_block);
    int k_all = -1, merging_warps = 0;
    for (const auto& [key, w] : by_warp) {
      INFO("block " << key.first << " warp " << key.second);
      for (std::size_t i = 1; i < w.size(); ++i) {
        REQUIRE(w[i].sm == w[0].sm);
        REQUIRE(w[i].t_begin_ns >= w[i - 1].t_end_ns);
        REQUIRE(w[i].clk_begin >= w[i - 1].clk_end);
      }
      const int k = check_warp_order(w);
      if (k >= 0) {
        if (k_all < 0) k_all = k;
        REQUIRE(k == k_all);
      }
      if (w.back().phase == Phase::opt_merge_states) ++merging_warps;
    }
    REQUIRE(k_all >= 1);
    if (c.force_splits == 1) CHECK(merging_warps == 0);
    if (c.force_splits == 4) CHECK(merging_warps > 0);
    check_and_report(c.spec, r);
    ++ran;
  }
  CHECK(ran == 3);
}

TEST_CASE("stage 5 timeline: every warp runs the five v1 steps once, in order", "[gpu][timeline][v1]") {
  PA_REQUIRE_GPU();
  const ProblemSpec specs[] = {
      test::spec_of(DType::f16, 128, 16, 8, 2, {600, 1, 37}, 21),
      test::spec_of(DType::bf16, 128, 16, 4, 4, {100}, 22),
  };
  const Phase order[] = {Phase::q_to_smem, Phase::qk, Phase::softmax, Phase::lv, Phase::warp_reduce};
  int ran = 0;
  for (const ProblemSpec& spec : specs) {
    const PagedProblem p = make_problem(spec);
    INFO(spec.describe());
    REQUIRE(can_record_timeline(Stage::warp_reduce, spec));
    TimelineOptions o;
    o.timing_iters = 5;
    const TimelineRecording r = record_timeline(Stage::warp_reduce, p, o);
    CHECK(r.launches == 1);
    test::require_close(ref_output(p), r.out, tolerance_for(spec.dtype));
    REQUIRE(r.grid_blocks == spec.num_heads * p.num_seqs());
    REQUIRE(r.spans.size() == static_cast<std::size_t>(r.grid_blocks) * r.warps_per_block * 5);
    for (std::size_t i = 0; i < r.spans.size(); ++i) {  // sorted by (block, warp, begin)
      const Span& sp = r.spans[i];
      INFO("span " << i);
      REQUIRE(sp.stage == Stage::warp_reduce);
      REQUIRE(sp.block == i / (5 * r.warps_per_block));
      REQUIRE(sp.warp == (i / 5) % r.warps_per_block);
      REQUIRE(sp.phase == order[i % 5]);
      REQUIRE(sp.iter == -1);
      REQUIRE(sp.sm < r.sm_count);
      REQUIRE(sp.t_begin_ns <= sp.t_end_ns);
      REQUIRE(sp.clk_begin <= sp.clk_end);
      if (i % 5 != 0) {
        REQUIRE(sp.sm == r.spans[i - 1].sm);
        REQUIRE(sp.t_begin_ns >= r.spans[i - 1].t_end_ns);
        REQUIRE(sp.clk_begin >= r.spans[i - 1].clk_end);
      }
    }
    check_and_report(spec, r);
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("stage 6 timeline: working partitions run six steps, the reduce one, per warp", "[gpu][timeline][v2]") {
  PA_REQUIRE_GPU();
  ProblemSpec spec = test::spec_of(DType::f16, 128, 16, 8, 2, {1200, 1, 600}, 31);
  spec.partition_size = 512;  // 3, 1 and 2 partitions
  const PagedProblem p = make_problem(spec);
  REQUIRE(can_record_timeline(Stage::v2_partition, spec));
  TimelineOptions o;
  o.timing_iters = 5;
  const TimelineRecording r = record_timeline(Stage::v2_partition, p, o);
  INFO(r.plan);
  test::require_close(ref_output(p), r.out, tolerance_for(spec.dtype));
  const int heads = spec.num_heads, seqs = p.num_seqs(), parts = 3;
  REQUIRE(r.grid_blocks == heads * seqs * parts);
  const int n_parts[] = {3, 1, 2};
  std::map<std::pair<std::uint32_t, std::uint16_t>, std::vector<Phase>> main_warps, reduce_warps;
  for (const Span& sp : r.spans) {
    REQUIRE(sp.stage == Stage::v2_partition);
    REQUIRE(sp.sm < r.sm_count);
    REQUIRE(sp.t_begin_ns <= sp.t_end_ns);
    (sp.kernel == KernelRole::main ? main_warps : reduce_warps)[{sp.block, sp.warp}].push_back(sp.phase);
    REQUIRE((sp.kernel == KernelRole::main || sp.kernel == KernelRole::reduce));
  }
  const std::vector<Phase> six = {Phase::q_to_smem, Phase::qk,          Phase::softmax,
                                  Phase::lv,        Phase::warp_reduce, Phase::partition_store};
  int working = 0, reducing = 0;
  for (int part = 0; part < parts; ++part)
    for (int seq = 0; seq < seqs; ++seq)
      for (int h = 0; h < heads; ++h)
        for (int w = 0; w < r.warps_per_block; ++w) {
          const auto block = static_cast<std::uint32_t>(h + heads * (seq + seqs * part));
          const auto it = main_warps.find({block, static_cast<std::uint16_t>(w)});
          INFO("partition " << part << " seq " << seq << " head " << h << " warp " << w);
          if (part < n_parts[seq]) {
            REQUIRE(it != main_warps.end());
            CHECK(it->second == six);
            ++working;
          } else {
            CHECK(it == main_warps.end());  // past the sequence: exits at once, no span
          }
        }
  for (int seq = 0; seq < seqs; ++seq)
    for (int h = 0; h < heads; ++h)
      for (int w = 0; w < 4; ++w) {
        const auto it = reduce_warps.find({static_cast<std::uint32_t>(h + heads * seq), static_cast<std::uint16_t>(w)});
        if (n_parts[seq] > 1) {
          REQUIRE(it != reduce_warps.end());
          CHECK(it->second == std::vector<Phase>{Phase::partition_reduce});
          ++reducing;
        } else {
          CHECK(it == reduce_warps.end());  // one partition: written directly, the reduce returns
        }
      }
  CHECK(working == (3 + 1 + 2) * heads * r.warps_per_block);
  CHECK(reducing == 2 * heads * 4);
  CHECK(main_warps.size() == static_cast<std::size_t>(working));
  CHECK(reduce_warps.size() == static_cast<std::size_t>(reducing));
  check_and_report(spec, r);
}

TEST_CASE("cascade timeline: the four kernels of the pipeline, in stream order, each warp in program order",
          "[gpu][timeline][cascade]") {
  PA_REQUIRE_GPU();
  // The timed prefix kernel is the wgmma one, which runs on compute 9.0 only
  // (elsewhere the plan picks an mma.sync kernel, which has no timing hooks).
  if (const kernels::GpuInfo gi = kernels::gpu_info(); gi.cc_major != 9 || gi.cc_minor != 0)
    SKIP("the cascade's timeline needs a compute 9.0 GPU (the wgmma prefix kernel); this one is " << gi.name);
  // GQA 8:2 and MHA 4:4; suffixes of 1 token, a partial block and several
  // blocks; a prefix of several wgmma tiles (64 tokens each).
  struct Case {
    ProblemSpec spec;
  };
  std::vector<Case> cases;
  for (auto [dt, heads, kv, prefix, salt] :
       {std::tuple{DType::f16, 8, 2, 1024, 41}, std::tuple{DType::bf16, 4, 4, 320, 42}}) {
    std::vector<int> ctx;
    for (int suffix : {1, 17, 300}) ctx.push_back(prefix + suffix);
    ProblemSpec spec = test::spec_of(dt, 128, 16, heads, kv, ctx, salt);
    spec.shared_prefix_len = prefix;
    cases.push_back({spec});
  }
  int ran = 0;
  for (const Case& c : cases) {
    INFO(c.spec.describe());
    REQUIRE(can_record_timeline(Stage::cascade_merge, c.spec));
    const PagedProblem p = make_problem(c.spec);
    TimelineOptions o;
    o.timing_iters = 5;
    const TimelineRecording r = record_timeline(Stage::cascade_merge, p, o);
    INFO(r.plan);
    CHECK(r.launches == 1);
    test::require_close(ref_output(p), r.out, tolerance_for(c.spec.dtype));

    std::map<std::tuple<KernelRole, std::uint32_t, std::uint16_t>, std::vector<Span>> by_warp;
    std::map<KernelRole, std::pair<std::uint64_t, std::uint64_t>> window;  // first begin, last end
    for (const Span& sp : r.spans) {
      REQUIRE(sp.stage == Stage::cascade_merge);
      REQUIRE(sp.sm < r.sm_count);
      REQUIRE(sp.t_begin_ns <= sp.t_end_ns);
      by_warp[{sp.kernel, sp.block, sp.warp}].push_back(sp);
      auto [it, fresh] = window.try_emplace(sp.kernel, sp.t_begin_ns, sp.t_end_ns);
      if (!fresh) {
        it->second.first = std::min(it->second.first, sp.t_begin_ns);
        it->second.second = std::max(it->second.second, sp.t_end_ns);
      }
    }
    // Each kernel of the pipeline ran and was timed.
    REQUIRE(window.size() == 4);
    for (KernelRole k : {KernelRole::prefix, KernelRole::prefix_reduce, KernelRole::suffix, KernelRole::merge})
      REQUIRE(window.count(k) == 1);
    // Stream order: the chunk reduce after the prefix kernel, the merge after
    // both states (the prefix's reduce and the suffix on its side stream).
    CHECK(window[KernelRole::prefix_reduce].first >= window[KernelRole::prefix].second);
    CHECK(window[KernelRole::merge].first >= window[KernelRole::prefix_reduce].second);
    CHECK(window[KernelRole::merge].first >= window[KernelRole::suffix].second);

    // Program order per warp: prefix consumers Q, then (qk, softmax) per tile,
    // the last P V, the store when their warpgroup has rows; producers one
    // load per tile and the drain. Reduce and merge warps: one span.
    // A block's tiles: its chunk's (the plan may cut the prefix into chunks).
    std::map<std::uint32_t, int> tiles_of;  // from the producer warps
    int consumers = 0, producers = 0;
    for (const auto& [key, w] : by_warp) {
      const auto [kernel, block, warp] = key;
      INFO("kernel " << to_string(kernel) << " block " << block << " warp " << warp);
      for (std::size_t i = 1; i < w.size(); ++i) {
        REQUIRE(w[i].sm == w[i - 1].sm);
        REQUIRE(w[i].t_begin_ns >= w[i - 1].t_end_ns);
        REQUIRE(w[i].clk_begin >= w[i - 1].clk_end);
      }
      if (kernel == KernelRole::prefix && warp >= 8) {
        const int tiles = static_cast<int>(w.size()) - 1;
        REQUIRE(tiles >= 1);
        for (int t = 0; t <= tiles; ++t) CHECK((w[t].phase == Phase::prefix_load && w[t].iter == t));
        auto [it, fresh] = tiles_of.try_emplace(block, tiles);
        CHECK(it->second == tiles);  // the four producer warps agree
        ++producers;
      }
    }
    for (const auto& [key, w] : by_warp) {
      const auto [kernel, block, warp] = key;
      INFO("kernel " << to_string(kernel) << " block " << block << " warp " << warp);
      if (kernel == KernelRole::prefix && warp < 8) {
        REQUIRE(tiles_of.count(block) == 1);
        const int tiles = tiles_of[block];
        const bool stored = w.size() == static_cast<std::size_t>(2 * tiles + 3);
        REQUIRE((stored || w.size() == static_cast<std::size_t>(2 * tiles + 2)));
        CHECK((w[0].phase == Phase::prefix_load && w[0].iter == -1));
        for (int t = 0; t < tiles; ++t) {
          CHECK((w[1 + 2 * t].phase == Phase::prefix_qk && w[1 + 2 * t].iter == t));
          CHECK((w[2 + 2 * t].phase == Phase::prefix_softmax && w[2 + 2 * t].iter == t));
        }
        CHECK(w[2 * tiles + 1].phase == Phase::prefix_pv);
        if (stored) CHECK(w.back().phase == Phase::prefix_store);
        ++consumers;
      } else if (kernel == KernelRole::prefix_reduce) {
        CHECK((w.size() == 1 && w[0].phase == Phase::partition_reduce));
      } else if (kernel == KernelRole::merge) {
        CHECK((w.size() == 1 && w[0].phase == Phase::merge));
      } else if (kernel == KernelRole::suffix) {
        CHECK(w.front().phase == Phase::opt_prologue);
      } else {
        REQUIRE(kernel == KernelRole::prefix);  // a producer, checked above
      }
    }
    CHECK(consumers == 2 * producers);  // 8 consumer warps and 4 producer warps per block
    CHECK(producers > 0);
    check_and_report(c.spec, r);
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("timeline recording refuses what it cannot time, naming what it can", "[timeline]") {
  const ProblemSpec fp32 = test::spec_of(DType::f32, 128, 16, 8, 2, {10}, 1);
  CHECK_FALSE(can_record_timeline(Stage::optimized, fp32));
  CHECK_FALSE(can_record_timeline(Stage::qk, test::spec_of(DType::f16, 128, 16, 8, 2, {10}, 1)));
  CHECK_FALSE(can_record_timeline(Stage::warp_reduce, fp32));
  // An fp8 cache: no timed instance reads one (the fp16 instance would misread its bytes).
  ProblemSpec fp8 = test::spec_of(DType::f16, 128, 16, 8, 2, {10}, 1);
  fp8.kv_dtype = KvDType::fp8_e4m3;
  for (Stage st : {Stage::warp_reduce, Stage::v2_partition, Stage::optimized, Stage::cascade_merge})
    CHECK_FALSE(can_record_timeline(st, fp8));
  const std::string timed = timeline_instances_text();
#if PA_HAVE_CUDA
  CHECK(timed.find("warp_reduce and v2_partition") != std::string::npos);
  CHECK(timed.find("stage optimized") != std::string::npos);
  CHECK(can_record_timeline(Stage::optimized, test::spec_of(DType::f16, 128, 16, 8, 2, {10}, 1)));
  CHECK(can_record_timeline(Stage::warp_reduce, test::spec_of(DType::bf16, 128, 16, 8, 8, {10}, 1)));
  const PagedProblem p = make_problem(fp32);
  CHECK_THROWS_WITH(record_timeline(Stage::optimized, p),
                    Catch::Matchers::ContainsSubstring("no timing instance") &&
                        Catch::Matchers::ContainsSubstring("fp16/128/16/1"));
#else
  CHECK(timed == "none (built without CUDA)");
#endif
}
