// pa-lab run for stages 6 (v2_partition) and 7 (cascade_merge): the problem,
// the check against the CPU reference, CUDA-event timings. cmd_run hands over
// after it has taken the common problem flags.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cmd_run_split_kv.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "run_report.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/cascade_run.hpp"
#include "pa/kernels/multilevel_cascade.hpp"
#include "pa/reference/multilevel_cascade.hpp"
#include "pa/core/multilevel_cascade.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"

namespace pa::cli {

namespace {

// The first k sequences of p (same pool of blocks): the reference of a huge
// batch is checked on a sample (--check-seqs) instead of taking minutes.
PagedProblem first_seqs(const PagedProblem& p, int k) {
  PagedProblem s = p;
  s.spec.context_lens.resize(k);
  s.context_lens.resize(k);
  s.block_tables.resize(static_cast<std::size_t>(k) * p.max_blocks_per_seq);
  s.q.resize(static_cast<std::size_t>(k) * p.q_stride);
  s.q_bytes.resize(static_cast<std::size_t>(k) * p.q_stride * dtype_bytes(p.spec.dtype));
  s.query.num_seqs = k;
  return s;
}

template <class R>
bool report(const char* name, const std::vector<R>& ref, const std::vector<float>& got, Tolerance tol) {
  const std::size_t n = std::min(ref.size(), got.size());  // got may cover more sequences than the sample
  const CompareResult r = compare(ref.data(), got.data(), n, tol);
  std::printf("  %-10s %s\n", name, r.summary().c_str());
  return r.pass;
}

int run_v2(const PagedProblem& p, int iters, int check_seqs) {
  const auto gpu = kernels::gpu_info();
  const ProblemSpec& s = p.spec;
  const int max_ctx = s.max_context_len();
  const int v1_max = kernels::v1_max_context(s.dtype, s.head_size, s.num_threads, gpu.smem_optin_bytes);
  const auto choice = kernels::choose_decode_kernel(s.num_seqs(), s.num_heads, max_ctx, s.partition_size,
                                                    gpu.sm_count, v1_max);
  std::printf("rule:    choose_decode_kernel -> %s (v1 holds contexts up to %d tokens here)\n",
              choice == kernels::DecodeKernel::v2 ? "V2" : "V1", v1_max);
  kernels::StageRunner runner(p, kernels::Stage::v2_partition);
  std::printf("plan:    %s\n", runner.plan().c_str());
  const kernels::RunResult got = runner.run();
  std::optional<PagedProblem> sub;
  if (check_seqs > 0 && check_seqs < p.num_seqs()) {
    sub = first_seqs(p, check_seqs);
    std::printf("check:   first %d of %d sequences\n", check_seqs, p.num_seqs());
  }
  const PagedProblem& sample = sub ? *sub : p;
  const V2Ref ref = ref_v2(sample, s.partition_size);
  std::vector<double> ref_lse;
  for (const auto& st : ref_states(sample, 0, max_ctx)) ref_lse.push_back(st.lse);
  std::printf("check (vs CPU reference, float64):\n");
  bool pass = report("output", ref.out, got.out, tolerance_for(s.dtype));
  pass = report("lse", ref_lse, got.lse, lse_tolerance(DType::f32)) && pass;
  if (iters > 0) print_speed(kernels::Stage::v2_partition, s, runner.time(iters).median_ms, iters, "partition + reduce");
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitFail;
}

int run_cascade(const PagedProblem& p, int iters, int check_seqs, bool baselines, const kernels::CascadeOptions& opt) {
  const ProblemSpec& s = p.spec;
  kernels::RunOptions ro;
  ro.cascade = opt;
  const kernels::RunResult got = kernels::StageRunner(p, kernels::Stage::cascade_merge, ro).run();
  std::printf("plan:    %s\n", got.plan.c_str());
  bool pass = true;
  if (check_seqs != 0) {
    std::optional<PagedProblem> sub;
    if (check_seqs > 0 && check_seqs < p.num_seqs()) {
      sub = first_seqs(p, check_seqs);
      std::printf("check:   first %d of %d sequences\n", check_seqs, p.num_seqs());
    }
    const PagedProblem& sample = sub ? *sub : p;
    const CascadeRef ref = ref_cascade(sample);
    std::printf("check (vs CPU reference, float64; output also vs plain attention over prefix + suffix):\n");
    pass = report("output", ref.out, got.out, tolerance_for(s.dtype));
    pass = report("plain", ref_output(sample), got.out, tolerance_for(s.dtype)) && pass;
    pass = report("lse", ref.lse, got.lse, lse_tolerance(s.dtype)) && pass;
  } else {
    std::printf("check:   skipped (--check-seqs 0)\n");
  }
  if (iters > 0) {
    const kernels::CascadeTiming t = kernels::time_cascade(p, iters, 3, baselines, opt);
    print_speed(kernels::Stage::cascade_merge, s, t.cascade_ms, iters, "prefix, suffix and merge");
    std::printf("kernels (median of %d CUDA-event timings after 3 warm-up, same device inputs):\n", iters);
    std::printf("  cascade    %9.4f ms\n", t.cascade_ms);
    if (t.prefix_ms >= 0)
      std::printf("    alone: prefix (mma kernel + chunk reduce) %.4f ms, suffix (V2) %.4f ms; the cascade runs them "
                  "on two streams\n",
                  t.prefix_ms, t.suffix_ms);
    float best = -1;
    auto line = [&](const char* name, float ms) {
      if (ms < 0) return;
      std::printf("  %-10s %9.4f ms  cascade is %.1fx faster\n", name, ms, ms / t.cascade_ms);
      if (best < 0 || ms < best) best = ms;
    };
    line("v2", t.v2_ms);
    line("v1", t.v1_ms);
    line("optimized", t.optimized_ms);
    if (best > 0) std::printf("  speedup vs the best non-cascade kernel: %.1fx\n", best / t.cascade_ms);
    if (!t.notes.empty()) std::printf("  notes: %s\n", t.notes.c_str());
  }
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitFail;
}

// The multi-level cascade (--levels): the GPU's merged output, lse and every
// level's state against ref_multilevel_cascade; timings of the cascade, its
// parts and, on the same pages, the fewer-level forms (join_levels_from)
// where the shared spans fill their pages.
int run_multilevel(const ProblemSpec& spec, const std::vector<CascadeLevelSpec>& levels, int iters,
                   const kernels::MultiLevelOptions& opt) {
  const CascadeProblem cp = make_cascade_problem(spec, levels);
  const kernels::MultiLevelResult got = kernels::run_multilevel_cascade(cp.queries, cp.pool, cp.cascade, opt);
  std::printf("plan:    %s\n", got.plan.c_str());
  const MultiLevelRef ref = ref_multilevel_cascade(cp.queries, cp.cache(KvLayout::vllm), cp.cascade);
  std::printf("check (vs CPU reference, float64: the levels' states merged in order):\n");
  bool pass = report("output", ref.out, got.out, tolerance_for(spec.dtype));
  pass = report("lse", ref.lse, got.lse, lse_tolerance(spec.dtype)) && pass;
  if (iters > 0) {
    std::printf("kernels (median of %d CUDA-event timings after 3 warm-up, same device inputs):\n", iters);
    const kernels::MultiLevelTiming t = kernels::time_multilevel_cascade(cp.queries, cp.pool, cp.cascade, iters, 3, opt);
    std::printf("  %d levels   %9.4f ms (shared levels alone %.4f ms, last level alone %.4f ms)\n",
                cp.cascade.num_levels(), t.all_ms, t.shared_ms, t.last_ms);
    for (int first = cp.cascade.num_levels() - 2; first >= 0; --first) {
      try {
        const MultiLevelCascade j = join_levels_from(cp.cascade, first);
        const double ms = kernels::time_multilevel_cascade(cp.queries, cp.pool, j, iters, 3, opt).all_ms;
        std::printf("  %d level%s   %9.4f ms  (%s)  the %d-level cascade is %.2fx faster\n", first + 1,
                    first == 0 ? " " : "s", ms, first == 0 ? "stage 8 alone" : "levels joined per request",
                    cp.cascade.num_levels(), ms / t.all_ms);
      } catch (const std::invalid_argument& e) {
        std::printf("  %d level%s   not timed: %s\n", first + 1, first == 0 ? " " : "s", e.what());
      }
    }
  }
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? kExitOk : kExitFail;
}

}  // namespace

bool is_split_kv_stage(kernels::Stage s) {
  return s == kernels::Stage::v2_partition || s == kernels::Stage::cascade_merge;
}

std::string help_run_split_kv() {
  return std::string("stages v2_partition and cascade_merge:\n"
                     "  --check-seqs K             check the first K sequences against the CPU reference\n"
                     "                             (default: all; 0 = no check, cascade only)\n"
                     "cascade_merge:\n") +
         cascade_flags_help() +
         "  --baselines 0|1            also time v2, v1 and optimized on the same block tables\n"
         "                             (default 1)\n"
         "  --prefix-kernel NAME       automatic (default) | mma_4warps | mma_8warps | wgmma\n"
         "                             (wgmma where it cannot run: mma_8warps)\n"
         "  --prefix-chunks N          cut the prefix into N chunks (default 0: the planner's)\n"
         "  --levels G:T,G:T,...       a multi-level cascade over the --seqs requests instead: a level\n"
         "                             per item, groups of G consecutive requests (G divides --seqs)\n"
         "                             each sharing T tokens, e.g. 8:1024,4:256,1:37 (shared levels on\n"
         "                             the prefix kernel, the last on stage 8; excludes --prefix-len,\n"
         "                             --suffix-lens, --check-seqs, --baselines, --prefix-chunks)\n";
}

int cmd_run_split_kv(kernels::Stage stage, Flags& f, ProblemSpec spec, int iters) {
  if (stage == kernels::Stage::cascade_merge && f.has("levels")) {
    for (const char* other : {"prefix-len", "suffix-lens", "check-seqs", "baselines", "prefix-chunks"})
      if (f.has(other)) throw UsageError(std::string("--levels describes the whole cascade: it excludes --") + other);
    std::vector<CascadeLevelSpec> levels;
    try {
      levels = parse_cascade_levels(*f.take("levels"), spec.num_seqs());
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("option --") + e.what());
    }
    kernels::MultiLevelOptions mopt;
    const std::string pk = f.take_str("prefix-kernel", "automatic");
    const auto k = kernels::prefix_kernel_from_name(pk);
    if (!k) throw UsageError("--prefix-kernel '" + pk + "' (accepted: automatic, mma_4warps, mma_8warps, wgmma)");
    mopt.prefix = *k;
    f.finish("run");
    validate_problem_flags(spec);
    if (!gpu_ready_for(stage)) return kExitNoGpu;
    const auto gpu = kernels::gpu_info();
    std::printf("stage:   7 cascade_merge, %zu levels\n", levels.size());
    std::printf("gpu:     %s (sm_%d%d, %d SMs)\n", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count);
    std::printf("problem: %s; levels %s\n", spec.describe().c_str(), [&] {
      std::string t;
      for (const CascadeLevelSpec& l : levels)
        t += (t.empty() ? "" : ", ") + std::to_string(l.group_sizes.size()) + " x " +
             std::to_string(l.group_tokens.front()) + " tokens";
      return t;
    }().c_str());
    return run_multilevel(spec, levels, iters, mopt);
  }
  const int check_seqs = f.take_int("check-seqs", -1, -1);
  if (stage == kernels::Stage::cascade_merge) take_cascade_flags(f, spec);
  if (stage != kernels::Stage::cascade_merge && f.has("baselines"))
    throw UsageError("--baselines times the cascade against v2, v1 and optimized: stage cascade_merge only");
  const int baselines_flag = f.take_int("baselines", 1, 0, "0, 1");
  if (baselines_flag > 1) throw UsageError("--baselines " + std::to_string(baselines_flag) + " (accepted: 0, 1)");
  const bool baselines = baselines_flag != 0;
  kernels::CascadeOptions opt;
  if (stage == kernels::Stage::cascade_merge) {
    const std::string pk = f.take_str("prefix-kernel", "automatic");
    const auto k = kernels::prefix_kernel_from_name(pk);
    if (!k)
      throw UsageError("--prefix-kernel '" + pk + "' (accepted: automatic, mma_4warps, mma_8warps, wgmma)");
    opt.prefix = *k;
    opt.chunks = f.take_int("prefix-chunks", 0, 0);
  }
  f.finish("run");
  validate_problem_flags(spec);

  if (!gpu_ready_for(stage)) return kExitNoGpu;
  const auto gpu = kernels::gpu_info();
  const auto& info = kernels::stage_info(stage);
  std::printf("stage:   %d %s (%s)\n", static_cast<int>(stage), info.name, info.adds);
  std::printf("gpu:     %s (sm_%d%d, %d SMs)\n", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count);
  std::printf("problem: %s\n", spec.describe().c_str());
  const PagedProblem p = make_problem(spec);
  return stage == kernels::Stage::v2_partition ? run_v2(p, iters, check_seqs)
                                               : run_cascade(p, iters, check_seqs, baselines, opt);
}

}  // namespace pa::cli
