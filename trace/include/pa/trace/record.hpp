// Recording a stage's events on the GPU: the stage kernel instantiated with
// the recording tracer (kernels/include/pa/kernels/recording_tracer.cuh), run
// on the problem, its selected blocks' events copied back and sorted into
// replay order. Built only with CUDA; without it every call throws
// pa::kernels::NoGpuError("built without CUDA").
#pragma once
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/core/event.hpp"
#include "pa/trace/host_model.hpp"

namespace pa::trace {

struct RecordResult {
  std::vector<Event> events;  // replay order
  std::string gpu_name;       // for the trace header's source
  int launches = 0;           // 2 when the first buffer was too small (exact rerun)
  // What model_events needs to reproduce this recording (stage 8: the
  // device's SM count and occupancy, and which CTA arrived last).
  ModelOptions model_options;
};

// Stages 1-7 (stage 6: the partition and reduce kernels; stage 7: the cascade
// without its prefix kernel, trace/record/record_cascade.cu)
// and stage 8 (trace/record/record_optimized.cu)
// and configurations with a recording instance in this build
// (recordable_configs_text()). Throws std::invalid_argument for a stage or
// configuration without one or a bad selection, pa::kernels::NoGpuError
// without a GPU, std::runtime_error for a CUDA failure. initial_capacity: the
// event buffer of the first launch (0 = a count-only first launch).
RecordResult record_stage(Stage stage, const PagedProblem& p, const Selection& sel,
                          unsigned long long initial_capacity = 1u << 16);

// Stage 8 with an explicit split count (force_splits > 0: as plan_optimized's
// force_splits; 0: the heuristic for this GPU). record_stage(optimized, ...)
// is record_optimized(..., 0, ...). trace/record/record_optimized.cu.
RecordResult record_optimized(const PagedProblem& p, const Selection& sel, int force_splits = 0,
                              unsigned long long initial_capacity = 1u << 16);

// Whether record_stage can record this stage / configuration in this build.
bool recording_built();
bool can_record(Stage stage, const ProblemSpec& spec);
std::string recordable_configs_text();

}  // namespace pa::trace
