// Every CUDA runtime call and every launch is checked: a failure throws
// std::runtime_error naming file:line, the call and CUDA's error string.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace pa::kernels::detail {
[[noreturn]] inline void cuda_fail(cudaError_t e, const char* call, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " +
                           cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}
}  // namespace pa::kernels::detail

#define PA_CUDA_CHECK(call)                                                          \
  do {                                                                               \
    const cudaError_t pa_cuda_err_ = (call);                                         \
    if (pa_cuda_err_ != cudaSuccess)                                                 \
      ::pa::kernels::detail::cuda_fail(pa_cuda_err_, #call, __FILE__, __LINE__);     \
  } while (0)

namespace pa::kernels {

// Makes `device` current for a scope (or, without one, only remembers the
// current device) and puts the caller's device back: code that drives
// several GPUs (context parallelism) leaves the current device as it found it.
class DeviceScope {
 public:
  DeviceScope() { PA_CUDA_CHECK(cudaGetDevice(&saved_)); }
  explicit DeviceScope(int device) : DeviceScope() {
    if (device != saved_) PA_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceScope() { cudaSetDevice(saved_); }  // a destructor cannot report an error
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace pa::kernels
