// Internal to trace/record: the cascade's timeline (timeline_cascade.cu) and
// its prefix kernel's sm_90a timing instances (timeline_cascade_wgmma.cu),
// used by record_timeline (timeline_record.cu).
#pragma once
#include <cuda_runtime.h>

#include <functional>

#include "pa/core/problem.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/trace/timeline_record.hpp"

namespace pa::kernels {
struct PrefixArgs;
struct TimingTracer;
class StageRunner;
}  // namespace pa::kernels

namespace pa::trace::detail {

// How a recording lays out its span slots and launches: slots(min) is the
// number it needs with every kernel's per-warp bound raised to at least min;
// launch(t, min) runs the stage's kernels with tracers made from t (its
// buffer and counter), in the same layout.
struct TimedLaunch {
  std::function<unsigned long long(unsigned min_per_warp)> slots;
  std::function<void(const kernels::TimingTracer& t, unsigned min_per_warp)> launch;
};

// Stage 8's span slots per warp at most: prologue, Q fragments, up to
// kStages - 1 issues before the loop, five per main-loop iteration (an
// iteration covers at least one KV block of the split), the warp merge, the
// arrival and the split merge.
inline unsigned opt_spans_per_warp(const OptimizedPlan& plan) {
  return 16u + 5u * static_cast<unsigned>(plan.split_blocks);
}

// The cascade (stage 7) as the runner plans it: the wgmma prefix kernel, its
// chunk reduce, the stage 8 suffix and the merge, on the runner's streams.
// Sets r.plan; r.grid_blocks and r.warps_per_block stay 0 (four kernels of
// different grids and block sizes; r.warps counts the warps with spans). Throws std::invalid_argument when the plan uses a
// part without a timing instance (another prefix kernel, the V2 suffix).
TimedLaunch cascade_timed_launch(kernels::StageRunner& runner, const PagedProblem& p, TimelineRecording& r);
bool can_time_cascade(const ProblemSpec& s);

bool timed_prefix_wgmma_built(DType dtype, int head_size, int block_size);
struct PrefixShape {
  unsigned warps = 0;        // of the whole grid
  unsigned tile_tokens = 0;  // prefix tokens per K/V tile (a warp ends about two spans per tile)
};
PrefixShape timed_prefix_wgmma_shape(DType dtype, int head_size, int block_size, const kernels::PrefixArgs& a);
// Launches the timed wgmma prefix kernel; returns its warps (0: no instance).
unsigned launch_timed_prefix_wgmma(DType dtype, int head_size, int block_size, const kernels::PrefixArgs& a,
                                   const kernels::TimingTracer& t, cudaStream_t s);

}  // namespace pa::trace::detail
