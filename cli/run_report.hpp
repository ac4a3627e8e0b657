// How `pa-lab run` reports a stage's speed, the same for every stage: the
// median of the CUDA-event timings, the bytes the stage must move
// (kernels::stage_bytes: Q, the KV it reads, what it writes), the GB/s that
// makes and that as a share of the device-to-device copy bandwidth measured in
// the same run (kernels::measure_copy_bandwidth_gbs), the ceiling a
// memory-bound kernel is compared with.
#pragma once
#include "cache_form.hpp"
#include "pa/core/problem.hpp"
#include "pa/kernels/api.hpp"

namespace pa::cli {

// pa-lab run's GPU check, the same for every stage: true when a GPU can run
// the stage's kernels; otherwise false after printing to stderr which case it
// is and what works without a GPU (no_gpu.hpp), and the caller exits with
// kExitNoGpu.
bool gpu_ready_for(kernels::Stage stage);

// Prints the "time:" and "traffic:" lines. `what` names what was timed when
// it is more than one kernel (e.g. "partition + reduce"); may be empty.
void print_speed(kernels::Stage stage, const ProblemSpec& spec, double median_ms, int iters, const char* what);

// Prints the "cache:" line, the layout and page table the stage read, when
// they are not vLLM's padded form (the defaults, which need no line).
void print_cache_form(const CacheForm& form);

}  // namespace pa::cli
