// One runner for all eight stages. A StageRunner uploads a problem once,
// builds the stage's arguments once (stages 1-5: DeviceProblem; 5-8:
// StageLaunch, stage_launch.hpp), and then runs it: outputs poisoned with
// NaN, one launch, a synchronize, the outputs copied back and decoded; or
// times it: the same launch under CUDA events. pa-lab run, pa-bench, the
// cascade's baselines and the tests go through it; trace recording (stages
// 1-7) and timelines (stages 5-6) launch their traced instances with the
// arguments it built (stage_args, v2_args). Stage 8's recording and timeline
// launch the planned grid with opt_make_params. Plain C++ (no CUDA headers):
// without CUDA the constructor throws NoGpuError.
//
//   StageRunner r(problem, Stage::optimized, {.splits = 4});
//   RunResult got = r.run();            // got.out: [seq][head][head_size]
//   StageTiming t = r.time(100);        // median_ms, every sample
//
// Inputs that already live on the device (pa-bench fills GBs of KV there and
// keeps R copies of Q and the block tables, each over its own blocks, so that
// no launch finds its KV in L2) come as DeviceInputViews beside the problem's
// shape (problem_layout); launch(r) enqueues one launch on copy r:
//
//   StageRunner r(problem_layout(spec, pool_blocks), views, Stage::v2_partition);
//   for (int i = 0; i < n; ++i) r.launch(i % views.rotations);
//   std::vector<float> out = r.output();
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/stage_launch.hpp"

namespace pa::kernels {

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

// Device pointers to a problem's inputs, laid out as PagedProblem's arrays
// (paged_cache.hpp), with `rotations` copies of Q and of the block tables back
// to back: copy r's Q starts r * num_seqs * q_stride elements after q, its
// tables r * num_seqs * max_blocks_per_seq entries after block_tables. The
// caller owns the memory; it must outlive the runner.
struct DeviceInputViews {
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int* block_tables = nullptr;
  const int* context_lens = nullptr;
  int rotations = 1;
  const float* alibi_slopes = nullptr;  // [num_heads]; required when the layout has ALiBi, else null
  // The cache's layout (pa/index/kv_layout.hpp): nhd / hnd keep K and V in
  // one tensor, given as k_cache and v_cache alike. Page tables: padded.
  KvLayout kv_layout = KvLayout::vllm;
};

class StageRunner {
 public:
  // Validates the problem for the stage (throws std::invalid_argument naming
  // the value and what is accepted), uploads it, plans (stages 6-8) and
  // allocates every output and workspace. The problem must outlive the runner.
  StageRunner(const PagedProblem& p, Stage stage, const RunOptions& opt = {});
  // The same over inputs already on the device: `layout` gives the shape
  // (problem_layout; its arrays may be empty; the runner keeps a copy of the
  // shape), `in` the data. Stages 5-8 (the
  // stages that read only the inputs and write the output); stages 1-4 throw
  // std::invalid_argument.
  StageRunner(const PagedProblem& layout, const DeviceInputViews& in, Stage stage, const RunOptions& opt = {});
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
  // One launch on copy `rotation` of the inputs, enqueued on the default
  // stream (no poisoning, no synchronize): for callers that time launches
  // their own way. Throws std::invalid_argument for a rotation outside
  // [0, rotations).
  void launch(int rotation = 0);
  // Synchronize and copy back the attention output [seq][head][head_size],
  // decoded to float (stages 5-8).
  std::vector<float> output();

  // The device arguments the runner built, for the same launch with another
  // tracer (trace recording launches the recording instances with them):
  // stage_args() for every stage (stages 1-5: every output wired in; 6-8: the
  // inputs and the output), v2_args() for stage 6 (its partition buffers and
  // lse wired in), cascade_plan() and workspace() for stage 7 (a timeline
  // runs the cascade's pipeline with them), optimized_plan() for stage 8. poison_outputs() fills every
  // output with NaN, as run() does.
  const StageArgs& stage_args() const;
  const V2Args& v2_args() const;                // throws std::logic_error for another stage
  const CascadePlan& cascade_plan() const;      // likewise
  const OptimizedPlan& optimized_plan() const;  // stage 8's; likewise
  void* workspace() const;                      // stages 6-8 (nullptr when the plan needs none)
  void poison_outputs();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pa::kernels
