// 8-bit floating point KV caches: the two fp8 formats, their conversions to
// and from float, and the per-tensor scale that maps a cache into their range.
//
// Why fp8: a decode step reads every cached K and V once and does little
// arithmetic per byte, so its time is the time to read the cache. Storing the
// cache in one byte per element instead of two halves those bytes, and so
// roughly halves the time, at the cost of a coarser value per element.
//
// The formats (OCP 8-bit floating point; both have a sign bit):
//
//   fp8_e4m3  4 exponent bits, bias 7, 3 mantissa bits ("E4M3FN").
//             No infinities: the all-ones exponent still holds numbers, up to
//             1.75 * 2^8 = 448; only S.1111.111 (0x7F, 0xFF) is NaN.
//             float -> e4m3 saturates: beyond 448 (and +-inf) gives +-448.
//   fp8_e5m2  5 exponent bits, bias 15, 2 mantissa bits: IEEE-like, with
//             +-inf (S.11111.00) and NaN (S.11111.xx, xx != 0); max 57344.
//             float -> e5m2 follows torch.float8_e5m2 (IEEE rounding, no
//             saturation): values from 61440 = 57344 + half an ulp up become
//             +-inf, +-inf stays +-inf.
//
// Both: round to nearest, ties to even, into subnormals (e4m3: multiples of
// 2^-9, e5m2: of 2^-16) and down to signed zero; NaN stays NaN (the sign is
// kept, the payload is not: e4m3 has one NaN code, e5m2 returns S.11111.11);
// fp8 -> float is exact (every fp8 value is a float).
//
// Scales (vLLM's convention, per tensor): a cache element x is stored as
// fp8(x / scale) and read back as float(code) * scale, both in float.
// Choosing scale = max|x| / max_finite uses the whole range of the format
// without overflow (fp8_scale_for).
//
// Pure bit manipulation, no cuda_fp8.h: the host tests check exactly the code
// a kernel runs. On sm_89 and later the cvt instructions convert in hardware;
// for e4m3 (cvt.rn.satfinite) and for fp8 -> float they give the results
// below (up to which NaN code a NaN becomes; tests/kernels/test_fp8_gpu.cpp
// checks every code and the rounding on the GPU), and the kernels use them.
// The e5m2 hardware conversion from float exists only with
// .satfinite, so it saturates at 57344 where this one (like torch) gives inf;
// the two differ only for |x / scale| >= 61440 and for infinities, which a
// scale from fp8_scale_for never produces.
#pragma once
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#include "pa/index/dtype.hpp"
#include "pa/index/hd.hpp"

namespace pa {

enum class Fp8Format : std::uint8_t { e4m3 = 0, e5m2 = 1 };

// The format of an fp8 KV cache dtype (pa/index/dtype.hpp), and back.
PA_HD constexpr Fp8Format fp8_format_of(KvDType k) { return k == KvDType::fp8_e5m2 ? Fp8Format::e5m2 : Fp8Format::e4m3; }
PA_HD constexpr KvDType kv_dtype_of(Fp8Format f) { return f == Fp8Format::e5m2 ? KvDType::fp8_e5m2 : KvDType::fp8_e4m3; }

inline constexpr Fp8Format kAllFp8Formats[] = {Fp8Format::e4m3, Fp8Format::e5m2};

inline constexpr const char* fp8_format_name(Fp8Format f) { return f == Fp8Format::e4m3 ? "fp8_e4m3" : "fp8_e5m2"; }

// What parse_fp8_format accepts, for error messages.
inline constexpr const char* kFp8FormatNamesText = "fp8_e4m3, fp8_e5m2, fp8 (= fp8_e4m3)";

// The one parse of an fp8 format name: fp8_format_name's spelling, and "fp8"
// for e4m3 (vLLM's kv_cache_dtype="fp8" means e4m3). Anything else throws
// std::invalid_argument naming the value and what is accepted.
inline Fp8Format parse_fp8_format(std::string_view s) {
  if (s == "fp8_e4m3" || s == "fp8") return Fp8Format::e4m3;
  if (s == "fp8_e5m2") return Fp8Format::e5m2;
  throw std::invalid_argument("fp8 format '" + std::string(s) + "' is not known (accepted: " + kFp8FormatNamesText +
                              ")");
}

// ---- format constants -------------------------------------------------------
PA_HD constexpr int fp8_mantissa_bits(Fp8Format f) { return f == Fp8Format::e4m3 ? 3 : 2; }
PA_HD constexpr int fp8_exponent_bias(Fp8Format f) { return f == Fp8Format::e4m3 ? 7 : 15; }
// Largest finite value: 1.75 * 2^8 and 1.75 * 2^15.
PA_HD constexpr float fp8_max_finite(Fp8Format f) { return f == Fp8Format::e4m3 ? 448.0f : 57344.0f; }
// Smallest positive (subnormal) value, 2^(1 - bias - mantissa bits): the
// spacing of the subnormals.
PA_HD constexpr float fp8_min_subnormal(Fp8Format f) {
  return f == Fp8Format::e4m3 ? 0.001953125f /* 2^-9 */ : 0.0000152587890625f /* 2^-16 */;
}
// Unit roundoff of the normal range, 2^-(mantissa bits + 1): round to nearest
// changes a normal value by at most this fraction of itself.
PA_HD constexpr float fp8_unit_roundoff(Fp8Format f) { return f == Fp8Format::e4m3 ? 0.0625f : 0.125f; }

namespace fp8_detail {

PA_HD std::uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

PA_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

constexpr std::uint32_t kFloatInf = 0x7f800000u;
constexpr std::uint32_t kFloatQuietNan = 0x7fc00000u;

// v >> shift (1..31), rounded to nearest, ties to even.
PA_HD std::uint32_t shift_rne(std::uint32_t v, int shift) {
  const std::uint32_t rem = v & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  std::uint32_t r = v >> shift;
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return r;
}

// The 7-bit magnitude code (exponent field, mantissa field) nearest to the
// finite float whose magnitude bits are `a`, ties to even, for a format of
// `mbits` mantissa bits and exponent bias `bias`. Not clamped: a result past
// the format's largest code means the value overflows (the caller decides
// between saturation and infinity).
PA_HD std::uint32_t round_magnitude(std::uint32_t a, int mbits, int bias) {
  const int e = static_cast<int>(a >> 23) - 127;  // unbiased; float zero and subnormals: -127
  const int emin = 1 - bias;                      // the format's smallest normal exponent
  if (e >= emin) {
    // Normal in fp8: rebias the exponent (127 -> bias) and round the 23
    // mantissa bits to mbits. A carry out of the mantissa increments the
    // exponent field, which is exactly rounding up into the next binade.
    return shift_rne(a - (static_cast<std::uint32_t>(127 - bias) << 23), 23 - mbits);
  }
  // Subnormal in fp8: the code is value / 2^(emin - mbits), i.e. the 24-bit
  // significand (implicit 1 included) shifted right by 23 - mbits + emin - e.
  // Rounding up from the largest subnormal gives 1 << mbits: the smallest
  // normal, again correct.
  const int shift = 23 - mbits + (emin - e);
  if (shift > 24) return 0u;  // below half the smallest subnormal (significand < 2^24 = half)
  return shift_rne((a & 0x7fffffu) | 0x800000u, shift);
}

// The value of a 7-bit magnitude code that is a number (not inf/NaN).
PA_HD float decode_magnitude(std::uint32_t mag, int mbits, int bias) {
  const std::uint32_t e = mag >> mbits, m = mag & ((1u << mbits) - 1u);
  if (e == 0) {
    // Subnormal: m * 2^(1 - bias - mbits); m < 8, so the product is exact.
    const float spacing = float_of(static_cast<std::uint32_t>(127 + 1 - bias - mbits) << 23);
    return static_cast<float>(m) * spacing;
  }
  return float_of(((e + 127u - static_cast<std::uint32_t>(bias)) << 23) | (m << (23 - mbits)));
}

PA_HD float with_sign(float magnitude, std::uint32_t code) {
  return float_of(bits_of(magnitude) | ((code & 0x80u) << 24));
}

// Either format's encoder: NaN keeps its sign and becomes 0x7f; infinity and
// every value that rounds past `overflow` become `overflow` (e4m3: 0x7e, the
// largest finite value, since e4m3 saturates; e5m2: 0x7c, infinity).
PA_HD std::uint8_t encode(float f, int mbits, int bias, std::uint32_t overflow) {
  const std::uint32_t x = bits_of(f);
  const std::uint32_t sign = (x >> 24) & 0x80u, a = x & 0x7fffffffu;
  if (a > kFloatInf) return static_cast<std::uint8_t>(sign | 0x7fu);  // NaN
  if (a == kFloatInf) return static_cast<std::uint8_t>(sign | overflow);
  const std::uint32_t mag = round_magnitude(a, mbits, bias);
  return static_cast<std::uint8_t>(sign | (mag > overflow ? overflow : mag));
}

constexpr int kE4m3MantissaBits = fp8_mantissa_bits(Fp8Format::e4m3);
constexpr int kE4m3Bias = fp8_exponent_bias(Fp8Format::e4m3);
constexpr int kE5m2MantissaBits = fp8_mantissa_bits(Fp8Format::e5m2);
constexpr int kE5m2Bias = fp8_exponent_bias(Fp8Format::e5m2);

}  // namespace fp8_detail

// ---- e4m3 --------------------------------------------------------------------
PA_HD float fp8_e4m3_to_float(std::uint8_t code) {
  namespace d = fp8_detail;
  const std::uint32_t mag = code & 0x7fu;
  if (mag == 0x7fu) return d::with_sign(d::float_of(d::kFloatQuietNan), code);
  return d::with_sign(d::decode_magnitude(mag, d::kE4m3MantissaBits, d::kE4m3Bias), code);
}

// Saturating: 0x7e = 448; 0x7f would be NaN, larger codes do not exist.
PA_HD std::uint8_t fp8_e4m3_from_float(float f) {
  namespace d = fp8_detail;
  return d::encode(f, d::kE4m3MantissaBits, d::kE4m3Bias, 0x7eu);
}

// ---- e5m2 --------------------------------------------------------------------
PA_HD float fp8_e5m2_to_float(std::uint8_t code) {
  namespace d = fp8_detail;
  const std::uint32_t mag = code & 0x7fu;
  if (mag >= 0x7cu) return d::with_sign(d::float_of(mag == 0x7cu ? d::kFloatInf : d::kFloatQuietNan), code);
  return d::with_sign(d::decode_magnitude(mag, d::kE5m2MantissaBits, d::kE5m2Bias), code);
}

// IEEE overflow: a value that rounds past 0x7b (57344) is inf (0x7c).
PA_HD std::uint8_t fp8_e5m2_from_float(float f) {
  namespace d = fp8_detail;
  return d::encode(f, d::kE5m2MantissaBits, d::kE5m2Bias, 0x7cu);
}

// ---- either format, and the scaled cache conversions -------------------------
PA_HD float fp8_to_float(Fp8Format f, std::uint8_t code) {
  return f == Fp8Format::e4m3 ? fp8_e4m3_to_float(code) : fp8_e5m2_to_float(code);
}
PA_HD std::uint8_t fp8_from_float(Fp8Format f, float x) {
  return f == Fp8Format::e4m3 ? fp8_e4m3_from_float(x) : fp8_e5m2_from_float(x);
}

// A cache element as stored: fp8(x / scale), the division in float.
PA_HD std::uint8_t fp8_quantize(Fp8Format f, float x, float scale) { return fp8_from_float(f, x / scale); }
// A stored element as read: float(code) * scale, the product in float.
PA_HD float fp8_dequantize(Fp8Format f, std::uint8_t code, float scale) { return fp8_to_float(f, code) * scale; }

// The scale that maps max|x| onto the format's largest finite value, so that
// nothing saturates or overflows and the largest values keep full precision
// (1 for an all-zero tensor). Host side: scales are chosen once per tensor.
inline float fp8_scale_for(float max_abs, Fp8Format f) {
  constexpr float kMinNormal = 1.17549435e-38f;  // 2^-126
  const bool finite = max_abs >= 0.0f && max_abs <= 3.40282347e38f;
  const float scale = finite && max_abs > 0.0f ? max_abs / fp8_max_finite(f) : 1.0f;
  if (!finite || scale < kMinNormal) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "fp8_scale_for: max |x| %g is not accepted (accepted: 0, or finite with max |x| / %g >= 2^-126)",
                  static_cast<double>(max_abs), static_cast<double>(fp8_max_finite(f)));
    throw std::invalid_argument(buf);
  }
  return scale;
}

}  // namespace pa
