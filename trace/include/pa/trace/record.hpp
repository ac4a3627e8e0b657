// Recording a stage's events on the GPU: the stage kernel instantiated with
// the recording tracer (kernels/include/pa/kernels/recording_tracer.cuh), run
// on the problem, its selected blocks' events copied back and sorted into
// replay order. Built only with CUDA; without it every call throws
// pa::kernels::NoGpuError("built without CUDA").
#pragma once
#include <string>
#include <vector>

#include "pa/reference/paged_cache.hpp"
#include "pa/trace/event.hpp"
#include "pa/trace/host_model.hpp"

namespace pa::trace {

struct RecordResult {
  std::vector<Event> events;  // replay order
  std::string gpu_name;       // for the trace header's source
  int launches = 0;           // 2 when the first buffer was too small (exact rerun)
};

// Stages 1-6 (stage 6: the partition kernel; its reduce kernel has no hooks)
// and configurations with a recording instance in this build
// (recordable_configs_text()). Throws std::invalid_argument for a stage or
// configuration without one or a bad selection, pa::kernels::NoGpuError
// without a GPU, std::runtime_error for a CUDA failure. initial_capacity: the
// event buffer of the first launch (0 = a count-only first launch).
RecordResult record_stage(Stage stage, const PagedProblem& p, const Selection& sel,
                          unsigned long long initial_capacity = 1u << 16);

// Whether record_stage can record this stage / configuration in this build.
bool recording_built();
bool can_record(Stage stage, const ProblemSpec& spec);
std::string recordable_configs_text();

}  // namespace pa::trace
