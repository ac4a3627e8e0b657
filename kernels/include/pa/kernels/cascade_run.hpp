// Stage 7 beyond what the runner (runner.hpp) does for every stage: the merge
// kernel on states given on the host (upload, poison the output with NaN,
// launch, copy back), and CUDA-event timings of the cascade, of each of its
// sides alone and of stages 5, 6 and 8 on the same tables. Used by the tests
// and `pa-lab run`. Plain C++ (no CUDA headers); without CUDA every call
// throws NoGpuError.
#pragma once
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade.hpp"

namespace pa::kernels {

// The merge kernel on host states: out (rounded to out_dtype, decoded) and lse.
struct MergeRun {
  std::vector<float> out, lse;
};
MergeRun run_merge(const std::vector<float>& a_out, const std::vector<float>& a_lse,
                   const std::vector<float>& b_out, const std::vector<float>& b_lse, int num_seqs, int num_heads,
                   int head_size, DType out_dtype);

// Median CUDA-event times (ms) over `iters` launches after `warmup`, the same
// device inputs for every kernel. Kernels that cannot run the problem get -1
// and a note (e.g. v1 past its shared-memory limit).
struct CascadeTiming {
  float cascade_ms = -1, v2_ms = -1, v1_ms = -1, optimized_ms = -1;
  float prefix_ms = -1, suffix_ms = -1;  // each side of the cascade alone (no merge)
  std::string plan, notes;
};
CascadeTiming time_cascade(const PagedProblem& p, int iters, int warmup = 3, bool baselines = true,
                            const CascadeOptions& opt = {});

}  // namespace pa::kernels
