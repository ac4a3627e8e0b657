// fp8_device_convert (fp8_device.hpp): one thread per code or input, each
// converting twice, with pa/core/fp8.hpp's bit manipulation and with the
// hardware instruction, so the test can compare them value for value.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "fp8_device.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"

namespace pa::test {
namespace {

__device__ __nv_fp8_interpretation_t interpretation(Fp8Format f) { return f == Fp8Format::e4m3 ? __NV_E4M3 : __NV_E5M2; }

__global__ void decode_kernel(Fp8Format f, float* portable, float* hardware) {
  const int code = static_cast<int>(threadIdx.x);  // 256 threads: every code
  portable[code] = fp8_to_float(f, static_cast<std::uint8_t>(code));
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), interpretation(f));
  hardware[code] = __half2float(__half(h));
}

__global__ void encode_kernel(Fp8Format f, const float* in, int n, std::uint8_t* portable, std::uint8_t* hardware) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  portable[i] = fp8_from_float(f, in[i]);
  hardware[i] = __nv_cvt_float_to_fp8(in[i], __NV_SATFINITE, interpretation(f));
}

}  // namespace

Fp8DeviceResults fp8_device_convert(Fp8Format f, const std::vector<float>& inputs) {
  (void)kernels::gpu_info();  // throws NoGpuError without a GPU
  const int n = static_cast<int>(inputs.size());
  kernels::DeviceBuffer dec_p(256 * sizeof(float)), dec_h(256 * sizeof(float));
  kernels::DeviceBuffer in(std::max<std::size_t>(inputs.size(), 1) * sizeof(float));
  kernels::DeviceBuffer enc_p(std::max(n, 1)), enc_h(std::max(n, 1));
  dec_p.fill_bytes(0xFF);  // NaN-poisoned: an unwritten result cannot pass
  dec_h.fill_bytes(0xFF);
  enc_p.fill_bytes(0xAA);
  enc_h.fill_bytes(0xAA);
  if (n > 0) in.upload(inputs.data(), inputs.size() * sizeof(float));
  decode_kernel<<<1, 256>>>(f, static_cast<float*>(dec_p.get()), static_cast<float*>(dec_h.get()));
  PA_CUDA_CHECK(cudaGetLastError());
  if (n > 0) {
    encode_kernel<<<(n + 255) / 256, 256>>>(f, static_cast<const float*>(in.get()), n,
                                             static_cast<std::uint8_t*>(enc_p.get()),
                                             static_cast<std::uint8_t*>(enc_h.get()));
    PA_CUDA_CHECK(cudaGetLastError());
  }
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  Fp8DeviceResults r;
  r.decode_portable.resize(256);
  r.decode_hardware.resize(256);
  r.encode_portable.resize(inputs.size());
  r.encode_hardware.resize(inputs.size());
  PA_CUDA_CHECK(cudaMemcpy(r.decode_portable.data(), dec_p.get(), 256 * sizeof(float), cudaMemcpyDeviceToHost));
  PA_CUDA_CHECK(cudaMemcpy(r.decode_hardware.data(), dec_h.get(), 256 * sizeof(float), cudaMemcpyDeviceToHost));
  if (n > 0) {
    PA_CUDA_CHECK(cudaMemcpy(r.encode_portable.data(), enc_p.get(), inputs.size(), cudaMemcpyDeviceToHost));
    PA_CUDA_CHECK(cudaMemcpy(r.encode_hardware.data(), enc_h.get(), inputs.size(), cudaMemcpyDeviceToHost));
  }
  return r;
}

}  // namespace pa::test
