// One runner for all eight stages. A StageRunner uploads a problem once,
// builds the stage's arguments (StageArgs, V2Args, the cascade plan or stage
// 8's OptimizedArgs and plan) once, and then runs it: outputs poisoned with
// NaN, one launch, a synchronize, the outputs copied back and decoded; or
// times it: the same launch under CUDA events. pa-lab run, the cascade's
// baselines and the tests go through it; trace recording (stages 1-7) and
// timelines (stages 5-6) launch their traced instances with the arguments it
// built (stage_args, v2_args). pa-bench (which rotates over copies of the KV)
// and stage 8's recording and timeline (which launch the planned grid with
// opt_make_params) still build their own. Plain C++ (no CUDA headers):
// without CUDA the constructor throws NoGpuError.
//
//   StageRunner r(problem, Stage::optimized, {.splits = 4});
//   RunResult got = r.run();            // got.out: [seq][head][head_size]
//   StageTiming t = r.time(100);        // median_ms, every sample
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/cascade.hpp"

namespace pa::kernels {

// What a stage takes beyond the problem (each field read by its stage only).
struct RunOptions {
  // Stage 6: tokens per partition (0: the problem's spec.partition_size),
  // whether a one-partition sequence writes the output directly (no reduce),
  // and which tokens.
  int partition_size = 0;
  bool single_partition_direct = true;
  TokenRange range;  // stage 6: the tokens decoded ({0, -1}: whole contexts)
  // Stage 7: prefix tokens per chunk (0: the planner's) and the cascade's options.
  int chunk_len = 0;
  CascadeOptions cascade;
  // Stage 8: split-KV CTAs per sequence (0: the heuristic) and the pipeline.
  int splits = 0;
  OptPipeline pipeline = OptPipeline::automatic;
};

// What one run leaves behind, copied back as float.
struct RunResult {
  Stage stage{};
  std::string plan;          // stages 6-8: what runs, in words ("" for stages 1-5)
  StageOutput stage_output;  // stages 1-5: the stage's observable output (api.hpp)
  std::vector<float> out;    // stages 5-8: the attention output [seq][head][head_size], decoded
  std::vector<float> lse;    // stages 6-7: [seq][head], natural log
  // Stage 6: the partition buffers as the kernel left them (NaN where it
  // wrote nothing: partitions past a context, and single-partition sequences
  // when single_partition_direct).
  int max_partitions = 0;
  PartitionGeometry pg;
  std::vector<float> part_out, part_max, part_sum;
  // Stage 7: the plan and the two states it merged (float; empty without a prefix).
  std::optional<CascadePlan> cascade;
  std::vector<float> prefix_out, prefix_lse, suffix_out, suffix_lse;
  // Stage 8: the plan.
  std::optional<OptimizedPlan> optimized;
};

class StageRunner {
 public:
  // Validates the problem for the stage (throws std::invalid_argument naming
  // the value and what is accepted), uploads it, plans (stages 6-8) and
  // allocates every output and workspace. The problem must outlive the runner.
  StageRunner(const PagedProblem& p, Stage stage, const RunOptions& opt = {});
  ~StageRunner();
  StageRunner(StageRunner&&) noexcept;
  StageRunner& operator=(StageRunner&&) noexcept;
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;

  Stage stage() const;
  const std::string& plan() const;  // as RunResult::plan
  // Poison every output, launch, synchronize, copy back.
  RunResult run();
  // `warmup` untimed launches, then `iters` launches each between a CUDA event pair.
  StageTiming time(int iters, int warmup = 3);

  // The device arguments the runner built, for the same launch with another
  // tracer (trace recording launches the recording instances with them):
  // stage_args() for every stage (stages 1-5: every output wired in; 6-8: the
  // inputs and the output), v2_args() for stage 6 (its partition buffers and
  // lse wired in), cascade_plan() and workspace() for stage 7 (a timeline
  // runs the cascade's pipeline with them). poison_outputs() fills every
  // output with NaN, as run() does.
  const StageArgs& stage_args() const;
  const V2Args& v2_args() const;                // throws std::logic_error for another stage
  const CascadePlan& cascade_plan() const;      // likewise
  void* workspace() const;                      // stages 6-8 (nullptr when the plan needs none)
  void poison_outputs();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pa::kernels
