// The fp8 conversions (pa/core/fp8.hpp) run on the GPU, beside the hardware's
// own conversion instructions (sm_89+: cvt to and from e4m3 / e5m2), for
// test_fp8_gpu.cpp. Plain C++ here; fp8_device.cu holds the kernels.
#pragma once
#include <cstdint>
#include <vector>

#include "pa/core/fp8.hpp"

namespace pa::test {

struct Fp8DeviceResults {
  // Decoding the 256 codes: this project's conversion run on the device, and
  // the hardware's (through half precision, which holds every fp8 value).
  std::vector<float> decode_portable, decode_hardware;
  // Encoding `inputs`: this project's conversion on the device, and the
  // hardware's saturating one (cvt.rn.satfinite).
  std::vector<std::uint8_t> encode_portable, encode_hardware;
};

// Throws NoGpuError without a GPU, std::runtime_error on a CUDA error.
Fp8DeviceResults fp8_device_convert(Fp8Format f, const std::vector<float>& inputs);

}  // namespace pa::test
