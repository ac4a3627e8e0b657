// pa-lab run --stage optimized: stage 8 on a seeded problem, checked against
// the CPU reference (float64), timed with CUDA events (median), GB/s of
// Q + KV + output against the measured device copy bandwidth.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cmd_run_optimized.hpp"
#include "cmd_run_devices.hpp"
#include "run_report.hpp"
#include "commands.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"


namespace pa::cli {

const char* help_run_optimized() {
  return "stage optimized (8):\n"
         "  --splits N       split-KV CTAs per sequence (default 0: the heuristic from the SM count)\n";
}

int cmd_run_optimized(Flags& f, ProblemSpec spec, int iters, const CacheForm& form) {
  if (f.has("devices")) {  // several GPUs: cli/cmd_run_devices.cpp
    // ContextParallel uploads each shard in vLLM's padded form (its options
    // name no other): another form would be ignored there, so it is refused.
    if (!form.is_default()) {
      const std::string vllm = kv_layout_name(KvLayout::vllm), padded = page_table_name(PageTableForm::padded);
      throw UsageError(cache_form_option_text(form) + " with --devices: context parallelism shards a cache in " +
                       "--layout " + vllm + " with --page-table " + padded + " only (accepted with --devices: --layout " +
                       vllm + ", --page-table " + padded + ", the defaults)");
    }
    return cmd_run_devices(f, spec, iters);
  }
  for (const char* o : {"shard-policy", "exchange", "sequence-groups"})
    if (f.has(o))
      throw UsageError(std::string("--") + o +
                       " shapes a run over several GPUs: it needs --devices N (pa-lab run --help)");
  const int splits = f.take_int("splits", 0, 0);
  f.finish("run");
  validate_problem_flags(spec);
#if PA_HAVE_CUDA
  // Which kernels this build holds is known without a GPU: an unsupported
  // problem (e.g. nhd over an fp8 cache) is the command line's fault, said first.
  if (!optimized_supported(spec.dtype, spec.head_size, spec.block_size, spec.kv_dtype, spec.kv_layout)) {
    std::fprintf(stderr,
                 "pa-lab run: stage optimized does not support %s, kv cache %s, layout %s, head %d, block %d; "
                 "supported: %s\n",
                 dtype_name(spec.dtype), kv_dtype_name(spec.kv_dtype), kv_layout_name(form.layout), spec.head_size,
                 spec.block_size, optimized_supported_list().c_str());
    return kExitUsage;
  }
#endif
  if (!gpu_ready_for(kernels::Stage::optimized)) return kExitNoGpu;
#if PA_HAVE_CUDA
  const auto gpu = kernels::gpu_info();
  const PagedProblem p = make_problem(spec);
  std::printf("stage:   8 optimized (%s)\n", kernels::stage_info(kernels::Stage::optimized).adds);
  std::printf("gpu:     %s (sm_%d%d, %d SMs)\n", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count);
  std::printf("problem: %s\n", spec.describe().c_str());
  print_cache_form(form);

  kernels::RunOptions opt;
  opt.splits = splits;
  kernels::StageRunner runner(p, kernels::Stage::optimized, opt);
  std::printf("plan:    %s\n", runner.plan().c_str());
  const std::vector<float> got = runner.run().out;
  const std::vector<double> ref = ref_output(p);
  const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(spec.dtype));
  std::printf("check (vs CPU reference, float64): %s\n", r.summary().c_str());
  std::printf("max abs err %.3e, max rel err %.3e\n", r.max_abs_err, r.max_rel_err);
  if (iters > 0) print_speed(kernels::Stage::optimized, spec, runner.time(iters).median_ms, iters, "");
  std::printf("%s\n", r.pass ? "PASS" : "FAIL");
  return r.pass ? kExitOk : kExitFail;
#else
  (void)splits;
  (void)iters;
  (void)form;
  std::fprintf(stderr, "pa-lab run: built without CUDA\n");
  return kExitNoGpu;
#endif
}

}  // namespace pa::cli
