// record_stage and record_timeline without CUDA: nothing can be recorded;
// the host model can replay the events, and timelines need a GPU.
#include "pa/kernels/api.hpp"
#include "pa/trace/record.hpp"
#include "pa/trace/timeline_record.hpp"

namespace pa::trace {

bool recording_built() { return false; }
bool can_record(Stage, const ProblemSpec&) { return false; }
std::string recordable_configs_text() { return "none (built without CUDA)"; }
RecordResult record_stage(Stage, const PagedProblem&, const Selection&, unsigned long long) {
  throw kernels::NoGpuError("record_stage: built without CUDA (use the host model)");
}
RecordResult record_optimized(const PagedProblem&, const Selection&, int, unsigned long long) {
  throw kernels::NoGpuError("record_optimized: built without CUDA (use the host model)");
}
bool can_record_timeline(Stage, const ProblemSpec&) { return false; }
std::string timeline_instances_text() { return "none (built without CUDA)"; }
TimelineRecording record_timeline(Stage, const PagedProblem&, const TimelineOptions&) {
  throw kernels::NoGpuError("record_timeline: built without CUDA (timelines are measured on a GPU)");
}

}  // namespace pa::trace
