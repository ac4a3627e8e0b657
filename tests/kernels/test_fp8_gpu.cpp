// fp8 conversions on the GPU (label gpu; SKIPPED without a GPU): the
// project's bit-manipulation conversion (pa/core/fp8.hpp), which the kernels
// will run, gives on the device exactly what it gives on the host, and what
// the hardware's conversion instructions give:
//  - decoding: every one of the 256 codes of each format, bit for bit (NaN
//    codes: NaN);
//  - encoding: every code's value, every midpoint between neighbouring codes
//    (round to nearest even), the floats just beside them, random floats over
//    the whole range, and the edges (0, -0, the largest finite, beyond it,
//    infinities, NaN, the smallest subnormal and half of it). Where the two
//    differ by design it is said and counted: NaN's sign (the hardware's NaN
//    code is 0x7F), and e5m2 past its range, where the hardware saturates
//    (cvt.rn.satfinite) and this project, like torch.float8_e5m2, gives inf.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "fp8_device.hpp"
#include "gpu_skip.hpp"

using namespace pa;

namespace {

bool same_float(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  std::uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;  // -0 and +0 differ
}

bool is_nan_code(Fp8Format f, std::uint8_t c) { return std::isnan(fp8_to_float(f, c)); }

std::vector<float> encode_inputs(Fp8Format f) {
  std::vector<float> in;
  std::vector<float> finite;
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_to_float(f, static_cast<std::uint8_t>(c));
    in.push_back(v);
    if (std::isfinite(v) && v >= 0.f) finite.push_back(v);
  }
  std::sort(finite.begin(), finite.end());
  finite.erase(std::unique(finite.begin(), finite.end()), finite.end());
  for (std::size_t i = 1; i < finite.size(); ++i) {
    const float mid = 0.5f * (finite[i - 1] + finite[i]);  // exact: fp8 values have few bits
    for (float s : {1.f, -1.f}) {
      in.push_back(s * mid);
      in.push_back(s * std::nextafter(mid, 0.f));
      in.push_back(s * std::nextafter(mid, INFINITY));
    }
  }
  const float mx = fp8_max_finite(f);
  for (float v : {0.f, -0.f, mx, -mx, std::nextafter(mx, INFINITY), 2.f * mx, 1e30f, INFINITY, -INFINITY, NAN, -NAN,
                  fp8_min_subnormal(f), 0.5f * fp8_min_subnormal(f), 0.75f * fp8_min_subnormal(f),
                  std::numeric_limits<float>::denorm_min()})
    in.push_back(v);
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> u(-1.1f * mx, 1.1f * mx);
  std::uniform_real_distribution<float> e(-12.f, 12.f);
  for (int i = 0; i < 50000; ++i) {
    in.push_back(u(rng));
    in.push_back((i % 2 ? 1.f : -1.f) * std::exp2(e(rng)));
  }
  return in;
}

}  // namespace

TEST_CASE("fp8 on the GPU: the project's conversions equal the host's and the hardware's", "[gpu][fp8]") {
  PA_REQUIRE_GPU();
  int formats = 0;
  for (Fp8Format f : kAllFp8Formats) {
    INFO(fp8_format_name(f));
    const std::vector<float> in = encode_inputs(f);
    const test::Fp8DeviceResults r = test::fp8_device_convert(f, in);

    int decoded = 0;
    for (int c = 0; c < 256; ++c, ++decoded) {
      INFO("code " << c);
      const float host = fp8_to_float(f, static_cast<std::uint8_t>(c));
      CHECK(same_float(r.decode_portable[c], host));
      CHECK(same_float(r.decode_hardware[c], host));
    }
    CHECK(decoded == 256);

    // e5m2 from 61440 on: the project's conversion gives inf (PyTorch's
    // rule), the hardware's satfinite conversion the largest finite value.
    // e4m3 has no inf: both saturate to 448, infinite inputs included, so
    // every non-NaN input must give the same code.
    const bool e5m2 = f == Fp8Format::e5m2;
    int encoded = 0, nan_sign = 0, saturated = 0;
    for (std::size_t i = 0; i < in.size(); ++i, ++encoded) {
      INFO("input " << in[i]);
      const std::uint8_t host = fp8_from_float(f, in[i]);
      REQUIRE(r.encode_portable[i] == host);  // the device runs the same code
      if (std::isnan(in[i])) {
        CHECK(is_nan_code(f, r.encode_hardware[i]));
        if (r.encode_hardware[i] != host) ++nan_sign;
      } else if (e5m2 && std::fabs(in[i]) >= 61440.f) {
        CHECK(fp8_to_float(f, r.encode_hardware[i]) == std::copysign(fp8_max_finite(f), in[i]));
        CHECK(std::isinf(fp8_to_float(f, host)));
        ++saturated;
      } else {
        CHECK(r.encode_hardware[i] == host);
      }
    }
    CHECK(encoded == static_cast<int>(in.size()));
    CHECK(nan_sign <= 2 * 8);  // at most the NaN inputs and NaN codes decoded above
    if (e5m2) CHECK(saturated >= 4);  // beyond max, 2 x max, 1e30, +-inf
    else CHECK(saturated == 0);
    ++formats;
  }
  CHECK(formats == 2);
}
