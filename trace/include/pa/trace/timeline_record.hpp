// Recording a timeline on the GPU: a stage's kernel run with the timing
// tracer (pa/kernels/timing_tracer.cuh), every warp's spans copied back, and
// the same launch timed with and without the tracer so that its overhead is
// known for the very run that produced the timeline.
//
// Timed so far: stage 5 (the complete v1 kernel: v1's load-then-use steps),
// stage 6 (the partitions and the reduce's tail) and stage 8 (its pipeline),
// for the instances timeline_instances_text() names; each launched as pa-lab
// run launches it (stage 8: plan_optimized's grid on this GPU).
#pragma once
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/core/timeline.hpp"

namespace pa::trace {

struct TimelineOptions {
  int force_splits = 0;    // stage 8, as pa-lab run --splits; 0: the planner's choice
  int spans_per_warp = 0;  // span slots per warp at least (0: each kernel's bound); an overflow reruns once
  int timing_iters = 20;   // CUDA-event launches of each kernel for the overhead
  int timing_warmup = 3;
};

struct TimelineRecording {
  std::string gpu_name;
  int sm_count = 0;
  int sm_clock_khz = 0;         // the SM clock the device reports (cudaDevAttrClockRate)
  Stage stage = Stage::optimized;
  std::string plan;             // the launch, in words (stage 8: OptimizedPlan::describe)
  int grid_blocks = 0;          // blocks of the timed launch (stage 6: of the partition kernel; the cascade: 0)
  int warps_per_block = 0;     // 0 for the cascade, whose kernels differ (12 in the prefix kernel, 4 elsewhere)
  unsigned long long warps = 0; // warps with at least one span, over every kernel
  std::vector<Span> spans;      // every span of the timed launch, sorted by (kernel, block, warp, begin)
  int launches = 0;             // recorded timed launches (2 after an overflow; a warm-up launch before them is not counted)
  std::vector<float> out;       // the timed launch's output [seq][head][head_size], decoded:
                                // the tracer must not change what the kernel computes
  // Median kernel time of the same launch without and with the timing tracer
  // (CUDA events, timing_iters launches each, same device buffers).
  float untimed_ms = 0.f, timed_ms = 0.f;
};

// Whether this build can time `stage` for this problem (a timing instance for
// its dtype, head size, block size and head tiles).
bool can_record_timeline(Stage stage, const ProblemSpec& spec);
std::string timeline_instances_text();  // what can be timed, for messages and help

// Runs the stage's kernel with the timing tracer and returns the spans.
// Throws std::invalid_argument naming the configuration and what can be timed
// when there is no timing instance, NoGpuError without a GPU.
TimelineRecording record_timeline(Stage stage, const PagedProblem& p, const TimelineOptions& opt = {});

}  // namespace pa::trace
