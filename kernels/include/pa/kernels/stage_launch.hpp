// One launch of a stage that reads only its inputs and writes the attention
// output (stages 5-8), planned once over device views and then enqueued into
// memory the caller owns, on the caller's stream. The runner (runner.hpp)
// owns its memory and launches through this; the PyTorch op
// (python/csrc/ops.cpp) launches through it into PyTorch's tensors on
// PyTorch's current stream. Each stage's arguments (V2Args, the cascade plan,
// stage 8's OptimizedArgs and plan) are built here and nowhere else.
//
//   StageLaunch l(inputs, Stage::optimized, {});       // plans; no device memory touched
//   workspace = allocate(l.workspace_bytes());
//   l.launch({out, nullptr, workspace, /*workspace_fresh=*/true}, stream);
//
// Plain C++ (no CUDA headers); without CUDA the constructor throws NoGpuError.
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/optimized.hpp"

namespace pa::kernels {

// What a stage takes beyond the problem (each field read by its stage only).
struct RunOptions {
  // Stage 6: tokens per partition (0: the inputs' partition_size), whether a
  // one-partition sequence writes the output directly (no reduce), and which
  // tokens.
  int partition_size = 0;
  bool single_partition_direct = true;
  TokenRange range;  // stage 6: the tokens decoded ({0, -1}: whole contexts)
  // Stage 7: prefix tokens shared by every sequence (the runner takes the
  // problem's), per chunk (0: the planner's), the cascade's options and which
  // parts a launch runs (pa-bench's sweep times the prefix and the suffix apart).
  int shared_prefix_len = 0;
  int chunk_len = 0;
  CascadeOptions cascade;
  CascadeParts cascade_parts = CascadeParts::all;
  // Stage 8: split-KV CTAs per sequence (0: the heuristic) and the pipeline.
  int splits = 0;
  OptPipeline pipeline = OptPipeline::automatic;
  // The cache's layout and page-table form are the problem's (ProblemSpec's
  // kv_layout and page_table), which DeviceInputs uploads in.
};

// The options a stage reads, checked against the launch shape before anything
// touches the device (std::invalid_argument naming the value and what is
// accepted); stages 1-4 are refused too.
void check_run_options(const StageArgs& inputs, Stage stage, const RunOptions& opt);

// Memory one launch writes, owned by the caller.
struct StageBuffers {
  void* out = nullptr;        // [seq][head][head_size] in the inputs' dtype
  float* lse = nullptr;       // stages 6-7: [seq][head], natural log; may be null
  void* workspace = nullptr;  // workspace_bytes() of scratch (null when that is 0)
  // The workspace holds anything (fresh from an allocator): the launch first
  // zeroes, on the stream, what must start at zero (stage 8's arrival
  // counters, which every launch leaves at zero again; a caller that keeps
  // one workspace passes true once, or zeroes it once itself).
  bool workspace_fresh = true;
};

class StageLaunch {
 public:
  // Checks the options and plans: stage 6's partitions, stage 7's cascade,
  // stage 8's split. `inputs` holds the input pointers and the launch shape
  // (its output pointers are ignored); max_context_len must bound every
  // context. Throws std::invalid_argument naming a bad value and what is
  // accepted, NoGpuError without CUDA.
  StageLaunch(const StageArgs& inputs, Stage stage, const RunOptions& opt = {});

  Stage stage() const { return stage_; }
  const std::string& plan() const { return plan_; }  // stages 6-8: what runs, in words
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  // Enqueue the launch on `stream` (a cudaStream_t; nullptr: the default
  // stream). `q` and `block_tables`, when set, replace the inputs' (the
  // runner's rotations). Stage 7 returns where its two states lie in the
  // workspace; the others return an empty CascadeStates.
  CascadeStates launch(const StageBuffers& b, void* stream = nullptr, const void* q = nullptr,
                       const int* block_tables = nullptr) const;

  // Stage 6: the partition buffers' places in the workspace (float offsets).
  struct PartitionScratch {
    int max_partitions = 0;
    PartitionGeometry pg;
    std::size_t out_elems = 0, stat_elems = 0;  // part_out; part_max and part_sum each
    std::size_t max_offset = 0, sum_offset = 0;  // part_out starts at 0
  };
  const PartitionScratch& partitions() const { return parts_; }
  // Stage 7 and stage 8: their plans (std::logic_error for another stage).
  const CascadePlan& cascade_plan() const;
  const OptimizedPlan& optimized_plan() const;
  // The inputs as given.
  const StageArgs& inputs() const { return in_; }
  // Stage 6's arguments with the buffers of `b` wired in (its partition
  // buffers in b.workspace) and, when set, another q and block tables.
  V2Args v2_args(const StageBuffers& b, const void* q = nullptr, const int* block_tables = nullptr) const;

 private:
  StageArgs in_;
  Stage stage_;
  RunOptions opt_;
  std::string plan_;
  std::size_t workspace_bytes_ = 0;
  PartitionScratch parts_;
  V2Args v2_;
  std::optional<CascadePlan> cascade_;
  OptimizedArgs opt_args_;
  std::optional<OptimizedPlan> opt_plan_;
};

}  // namespace pa::kernels
