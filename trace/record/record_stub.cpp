// record_stage without CUDA: nothing can be recorded; the host model can.
#include "pa/kernels/api.hpp"
#include "pa/trace/record.hpp"

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

}  // namespace pa::trace
