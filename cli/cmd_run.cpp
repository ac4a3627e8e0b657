// pa-lab run: one stage on the GPU, checked against the CPU reference, timed.
#include <cstdio>

#include "cache_form.hpp"
#include "cmd_run_devices.hpp"
#include "cmd_run_optimized.hpp"
#include "cmd_run_split_kv.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "run_report.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/check_stage.hpp"
#include "pa/core/config_dispatch.hpp"
#include "pa/core/paged_cache.hpp"

namespace pa::cli {

void help_run() {
  std::printf(
      "usage: pa-lab run --stage NAME [problem options] [--layout L] [--page-table T] [--iters N]\n\n"
      "Builds a random problem (seeded), runs the stage's kernel on the GPU, compares its\n"
      "output with the CPU reference, prints the max absolute and relative error, PASS or\n"
      "FAIL, the median of N CUDA-event timings and the achieved GB/s (bytes of Q + KV the\n"
      "stage reads + its output, over the median time).\n\n"
      "  --stage NAME     %s (or the number 1-8, or v1)\n"
      "  --iters N        timed launches after 3 warm-up launches (default 20; 0 = no timing)\n\n"
      "%s\n%s\n%s\n%s\n%s\n"
      "exit: 0 PASS, 1 FAIL, 2 no GPU (built without CUDA, or no CUDA driver or GPU found), 3 bad usage or\n"
      "unsupported problem\n",
      kernels::stage_names_text().c_str(), problem_flags_help(), cache_form_flags_help().c_str(),
      help_run_split_kv().c_str(), help_run_optimized(), help_run_devices());
}

int cmd_run(Args args) {
  Flags f(args);
  if (f.take_switch("help")) {
    help_run();
    return kExitOk;
  }
  const auto stage_name = f.take("stage");
  const int iters = f.take_int("iters", 20, 0);
  ProblemSpec spec = take_problem_flags(f);
  const CacheForm form = take_cache_form_flags(f);
  spec.kv_layout = form.layout;
  spec.page_table = form.table;
  if (stage_name) {  // stages 6-7 take more flags: cli/cmd_run_split_kv.cpp
    const auto st = kernels::parse_stage(*stage_name);
    if (st) refuse_splits_unless_optimized(f, *st == kernels::Stage::optimized, *stage_name);
    // A form the stage does not read (kernels::stage_reads) is refused here,
    // before a GPU is asked for.
    if (st) check_cache_form_for_stage(*st, form);
    if (st && is_split_kv_stage(*st)) return cmd_run_split_kv(*st, f, spec, iters);
    if (st && *st == kernels::Stage::optimized)
      return cmd_run_optimized(f, spec, iters, form);  // cli/cmd_run_optimized.cpp
  }
  f.finish("run");
  if (!stage_name) throw UsageError("--stage NAME is required (stages: " + kernels::stage_names_text() + ")");
  const auto stage = kernels::parse_stage(*stage_name);
  if (!stage) {
    throw UsageError("option --stage: unknown stage '" + *stage_name + "' (accepted: " + kernels::stage_names_text() + ")");
  }
  const auto& info = kernels::stage_info(*stage);

  validate_problem_flags(spec);
  if (!gpu_ready_for(*stage)) return kExitNoGpu;
  const auto gpu = kernels::gpu_info();
  const PagedProblem p = make_problem(spec);
  kernels::validate_problem(*stage, p, gpu.smem_optin_bytes);

  const RuntimeConfig rc = make_runtime_config(spec);
  std::printf("stage:   %d %s (%s)\n", static_cast<int>(*stage), info.name, info.adds);
  std::printf("gpu:     %s (sm_%d%d, %d SMs)\n", gpu.name.c_str(), gpu.cc_major, gpu.cc_minor, gpu.sm_count);
  std::printf("problem: %s\n", spec.describe().c_str());
  print_cache_form(form);
  std::printf("config:  thread group %d, K vec %d elems (%d B), V vec %d elems (%d B), %d K vecs and %d V rows "
              "per thread\n",
              rc.thread_group_size, rc.vec_size, rc.vec_bytes, rc.v_vec_size, rc.v_vec_bytes,
              rc.num_vecs_per_thread, rc.num_rows_per_thread);
  if (rc.token_rows)
    std::printf("         token rows: a V vec is one token's %d dims, %d lanes per token, %d tokens per load, %d V "
                "loads per lane per block\n",
                rc.v_vec_size, rc.lv_lanes_per_token, rc.lv_tokens_per_iter, rc.lv_token_steps);

  kernels::StageRunner runner(p, *stage);
  const StageCheck check = check_stage(p, runner.run().stage_output);
  std::printf("check (vs CPU reference, float64):\n%s", check.summary().c_str());
  std::printf("max abs err %.3e, max rel err %.3e\n", check.max_abs_err, check.max_rel_err);
  if (iters > 0) print_speed(*stage, spec, runner.time(iters).median_ms, iters, "");
  std::printf("%s\n", check.pass ? "PASS" : "FAIL");
  return check.pass ? kExitOk : kExitFail;
}

}  // namespace pa::cli
