// Bit-exact float <-> f16 / bf16 conversions, round to nearest, ties to even.
#include "pa/core/dtype_convert.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace pa {
namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Shift right by `shift` (1..31), rounding to nearest, ties to even.
std::uint32_t shift_rne(std::uint32_t v, int shift) {
  const std::uint32_t rem = v & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  std::uint32_t r = v >> shift;
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

}  // namespace

std::uint16_t f16_bits_from_float(float f) {
  const std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN: keep the top payload bits, force quiet
    return static_cast<std::uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  if (ax == 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // >= 2^-14: a normal f16 (or overflow)
    // Rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10;
    // a mantissa carry correctly bumps the exponent, up to infinity.
    const std::uint32_t h = shift_rne(ax - (112u << 23), 13);
    return static_cast<std::uint16_t>(sign | (h >= 0x7c00u ? 0x7c00u : h));
  }
  if (ax <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: ties to even zero
  // Subnormal f16: value = m * 2^(e - 150) = (m >> (126 - e)) * 2^-24.
  const std::uint32_t e = ax >> 23;
  const std::uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  return static_cast<std::uint16_t>(sign | shift_rne(m, static_cast<int>(126 - e)));
}

float float_from_f16_bits(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu;
  const std::uint32_t m = h & 0x3ffu;
  if (e == 0) {
    // Zero or subnormal: m * 2^-24, exact in float.
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

std::uint16_t bf16_bits_from_float(float f) {
  const std::uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep sign and top payload, force quiet
    return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  }
  // Rounding the low 16 bits away; a carry walks into the exponent and
  // reaches infinity exactly when the value rounds past the largest bf16.
  const std::uint32_t sign = x & 0x80000000u;
  const std::uint32_t ax = x & 0x7fffffffu;
  return static_cast<std::uint16_t>((sign >> 16) | shift_rne(ax, 16));
}

float float_from_bf16_bits(std::uint16_t b) { return float_of(static_cast<std::uint32_t>(b) << 16); }

float round_to_dtype(float f, DType t) {
  switch (t) {
    case DType::f32: return f;
    case DType::f16: return float_from_f16_bits(f16_bits_from_float(f));
    case DType::bf16: return float_from_bf16_bits(bf16_bits_from_float(f));
  }
  throw std::invalid_argument("round_to_dtype: unknown dtype " + std::to_string(int(t)) +
                              " (accepted: fp32, fp16, bf16)");
}

void encode(DType t, const float* in, std::size_t n, std::uint8_t* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, in, n * sizeof(float)); return;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = f16_bits_from_float(in[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = bf16_bits_from_float(in[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
  }
  throw std::invalid_argument("encode: unknown dtype " + std::to_string(int(t)) +
                              " (accepted: fp32, fp16, bf16)");
}

void decode(DType t, const std::uint8_t* in, std::size_t n, float* out) {
  switch (t) {
    case DType::f32: std::memcpy(out, in, n * sizeof(float)); return;
    case DType::f16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = float_from_f16_bits(h);
      }
      return;
    case DType::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, in + 2 * i, 2);
        out[i] = float_from_bf16_bits(h);
      }
      return;
  }
  throw std::invalid_argument("decode: unknown dtype " + std::to_string(int(t)) +
                              " (accepted: fp32, fp16, bf16)");
}

std::vector<std::uint8_t> encode(DType t, const std::vector<float>& in) {
  std::vector<std::uint8_t> out(in.size() * static_cast<std::size_t>(dtype_bytes(t)));
  encode(t, in.data(), in.size(), out.data());
  return out;
}

std::vector<float> decode(DType t, const std::vector<std::uint8_t>& in) {
  const std::size_t eb = static_cast<std::size_t>(dtype_bytes(t));
  if (in.size() % eb != 0) {
    throw std::invalid_argument("decode: " + std::to_string(in.size()) + " bytes is not a whole number of " +
                                std::string(dtype_name(t)) + " elements (" + std::to_string(eb) + " bytes each)");
  }
  std::vector<float> out(in.size() / eb);
  decode(t, in.data(), out.size(), out.data());
  return out;
}

std::uint32_t nan_bits(DType t) {
  switch (t) {
    case DType::f32: return 0x7fc00000u;
    case DType::f16: return 0x7e00u;
    case DType::bf16: return 0x7fc0u;
  }
  return 0x7fc00000u;
}

}  // namespace pa
