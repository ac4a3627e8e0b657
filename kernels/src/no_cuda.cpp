// api.hpp without CUDA (PA_HAVE_CUDA off): everything that needs a GPU throws
// NoGpuError("built without CUDA"), so pa-lab and the tests link and report
// the GPU parts as unavailable / skipped. Validation and the stage table
// (stages.cpp) work the same as in the CUDA build.
#include "pa/kernels/api.hpp"
#include "pa/kernels/shard_merge.hpp"

namespace pa::kernels {

namespace {
constexpr const char* kWhy = "built without CUDA (PA_HAVE_CUDA is OFF: nvcc was not found or PA_WITH_CUDA=OFF)";
[[noreturn]] void no_cuda() { throw NoGpuError(kWhy); }
}  // namespace

bool gpu_available(std::string* reason) {
  if (reason) *reason = kWhy;
  return false;
}
GpuInfo gpu_info() { no_cuda(); }
std::int64_t smem_optin_bytes() { no_cuda(); }

DeviceBuffer::DeviceBuffer(std::size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  ptr_ = o.ptr_;
  bytes_ = o.bytes_;
  o.ptr_ = nullptr;
  o.bytes_ = 0;
  return *this;
}
void DeviceBuffer::upload(const void*, std::size_t) { no_cuda(); }
void DeviceBuffer::download(void*, std::size_t) const { no_cuda(); }
void DeviceBuffer::fill_bytes(int) { no_cuda(); }
std::vector<float> download_floats(const DeviceBuffer&, std::size_t) { no_cuda(); }
std::vector<float> download_decoded(const DeviceBuffer&, std::size_t, DType) { no_cuda(); }

DeviceInputs::DeviceInputs(const PagedProblem& p) : host_(&p) { no_cuda(); }
StageArgs DeviceInputs::args() const { no_cuda(); }
DeviceProblem::DeviceProblem(const PagedProblem& p) : DeviceInputs(p) { no_cuda(); }
StageArgs DeviceProblem::args() const { no_cuda(); }
void DeviceProblem::poison_outputs() { no_cuda(); }

void launch_stage(Stage, const StageArgs&, void*) { no_cuda(); }
StageOutput run_stage(Stage, DeviceProblem&) { no_cuda(); }
StageOutput run_stage(Stage, const PagedProblem&) { no_cuda(); }
StageTiming time_stage(Stage, DeviceProblem&, int, int) { no_cuda(); }
double measure_copy_bandwidth_gbs(std::size_t, int) { no_cuda(); }

// Stage 7's merge across devices (shard_merge.hpp).
void launch_merge_shards(const ShardMergeArgs&, void*) { no_cuda(); }
void launch_weigh_state(const StateSumArgs&, void*) { no_cuda(); }
void launch_normalize_sums(const StateSumArgs&, void*) { no_cuda(); }
void launch_wait_host_flag(const volatile int*, int, unsigned long long, volatile int*, void*) { no_cuda(); }

}  // namespace pa::kernels
