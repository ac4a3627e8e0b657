// fp8 e4m3 / e5m2 conversions (pa/core/fp8.hpp): every code both ways, the
// decoded values against the format's defining formula, encoding against a
// brute-force search for the nearest code, and the named edge values.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "pa/core/fp8.hpp"
#include "pa/core/tolerance.hpp"
#include "random_seed.hpp"
#include "float_bits.hpp"

using namespace pa;

namespace {

using test::bits;
using test::from_bits;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The format as the OCP definition states it, kept apart from fp8.hpp's
// constants so that a wrong constant there cannot also be wrong here.
struct Format {
  Fp8Format f;
  int ebits, mbits, bias;
  bool has_inf;           // e5m2: S.11111.00 is inf; e4m3: no infinities
  int nan_codes;          // per sign: e4m3 1 (S.1111.111), e5m2 3 (S.11111.xx, xx != 0)
  double max_finite;
};
const Format kFormats[] = {{Fp8Format::e4m3, 4, 3, 7, false, 1, 448.0},
                           {Fp8Format::e5m2, 5, 2, 15, true, 3, 57344.0}};

bool code_is_nan(const Format& fm, std::uint32_t c) {
  const std::uint32_t e = (c >> fm.mbits) & ((1u << fm.ebits) - 1u), m = c & ((1u << fm.mbits) - 1u);
  const std::uint32_t emax = (1u << fm.ebits) - 1u;
  return fm.has_inf ? (e == emax && m != 0) : (e == emax && m == (1u << fm.mbits) - 1u);
}
bool code_is_inf(const Format& fm, std::uint32_t c) {
  return fm.has_inf && ((c >> fm.mbits) & ((1u << fm.ebits) - 1u)) == (1u << fm.ebits) - 1u &&
         (c & ((1u << fm.mbits) - 1u)) == 0;
}

// sign * 2^(e - bias) * (1 + m / 2^mbits), subnormals sign * 2^(1 - bias) * (m / 2^mbits).
double formula_value(const Format& fm, std::uint32_t c) {
  const double sign = (c & 0x80u) ? -1.0 : 1.0;
  const int e = static_cast<int>((c >> fm.mbits) & ((1u << fm.ebits) - 1u));
  const int m = static_cast<int>(c & ((1u << fm.mbits) - 1u));
  const double frac = std::ldexp(static_cast<double>(m), -fm.mbits);
  return e == 0 ? sign * std::ldexp(frac, 1 - fm.bias) : sign * std::ldexp(1.0 + frac, e - fm.bias);
}

// The non-negative finite codes in increasing order of value (codes 0 .. max),
// with their values from the formula.
struct Magnitudes {
  std::vector<std::uint32_t> code;
  std::vector<double> value;
};
Magnitudes magnitudes(const Format& fm) {
  Magnitudes r;
  for (std::uint32_t c = 0; c < 0x80u; ++c) {
    if (code_is_nan(fm, c) || code_is_inf(fm, c)) continue;
    r.code.push_back(c);
    r.value.push_back(formula_value(fm, c));
  }
  return r;
}

// The expected encoding of x by exhaustive search: the nearest finite code,
// ties to the even code (mantissa LSB 0). Overflow: e4m3 saturates, so the
// nearest finite code is the answer; e5m2 rounds as IEEE does, as if the next
// binade existed: its first value 2^16 (an even code) stands for inf.
std::uint32_t brute_force_encode(const Format& fm, const Magnitudes& mags, float x) {
  const std::uint32_t sign = (bits(x) >> 24) & 0x80u;
  if (std::isnan(x)) return 0xffu;  // any NaN code; callers compare NaN-ness only
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | (fm.has_inf ? 0x7cu : mags.code.back());
  std::vector<std::uint32_t> cand = mags.code;
  std::vector<double> val = mags.value;
  if (fm.has_inf) {
    cand.push_back(0x7cu);
    val.push_back(std::ldexp(1.0, (1 << fm.ebits) - 1 - fm.bias));
  }
  std::size_t best = 0;
  for (std::size_t i = 1; i < cand.size(); ++i) {
    const double di = std::fabs(a - val[i]), db = std::fabs(a - val[best]);
    if (di < db || (di == db && (cand[i] & 1u) == 0)) best = i;
  }
  return sign | cand[best];
}

bool same_encoding(std::uint32_t got, std::uint32_t want, const Format& fm) {
  if (code_is_nan(fm, want & 0x7fu) || want == 0xffu) return code_is_nan(fm, got & 0x7fu);
  return got == want;
}

// A float and the code it must encode to; each case checked, the count returned.
struct EdgeCase {
  float x;
  std::uint8_t code;
};
template <std::size_t N>
int check_edge_cases(std::uint8_t (*enc)(float), const EdgeCase (&cases)[N]) {
  int ran = 0;
  for (const EdgeCase& c : cases) {
    INFO("x = " << c.x);
    CHECK(enc(c.x) == c.code);
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("fp8: the format constants of pa/core/fp8.hpp are the formats' own", "[core][fp8]") {
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    CHECK(fp8_mantissa_bits(fm.f) == fm.mbits);
    CHECK(fp8_exponent_bias(fm.f) == fm.bias);
    CHECK(static_cast<double>(fp8_max_finite(fm.f)) == fm.max_finite);
    CHECK(static_cast<double>(fp8_min_subnormal(fm.f)) == std::ldexp(1.0, 1 - fm.bias - fm.mbits));
    CHECK(static_cast<double>(fp8_unit_roundoff(fm.f)) == std::ldexp(1.0, -(fm.mbits + 1)));
    // The largest finite value is the largest value of the decode formula.
    const Magnitudes m = magnitudes(fm);
    CHECK(m.value.back() == fm.max_finite);
  }
}

TEST_CASE("fp8: every code decodes to the formula's value, and encodes back to itself", "[core][fp8]") {
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    int ran = 0, nans = 0, infs = 0, zeros = 0;
    for (std::uint32_t c = 0; c < 256; ++c) {
      INFO("code 0x" << std::hex << c);
      const auto code = static_cast<std::uint8_t>(c);
      const float v = fp8_to_float(fm.f, code);
      ++ran;
      if (code_is_nan(fm, c & 0x7fu)) {
        ++nans;
        REQUIRE(std::isnan(v));
        REQUIRE(code_is_nan(fm, fp8_from_float(fm.f, v) & 0x7fu));  // NaN stays NaN
        continue;
      }
      REQUIRE(!std::isnan(v));
      if (code_is_inf(fm, c & 0x7fu)) {
        ++infs;
        REQUIRE(std::isinf(v));
        REQUIRE((v < 0) == ((c & 0x80u) != 0));
      } else {
        REQUIRE(static_cast<double>(v) == formula_value(fm, c));
      }
      if (v == 0.0f) {
        ++zeros;
        REQUIRE(std::signbit(v) == ((c & 0x80u) != 0));  // -0 decodes to -0
      }
      // Round trip: bit for bit (so -0 stays -0 and inf stays inf).
      REQUIRE(fp8_from_float(fm.f, v) == code);
    }
    CHECK(ran == 256);
    CHECK(nans == 2 * fm.nan_codes);
    CHECK(infs == (fm.has_inf ? 2 : 0));
    CHECK(zeros == 2);
  }
}

TEST_CASE("fp8: decode is exact: each value is a float whose nearest code is its own", "[core][fp8]") {
  // Independent of the encoder: the formula's values are strictly increasing
  // over the non-negative codes, so each is the only value at distance 0.
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    const Magnitudes m = magnitudes(fm);
    CHECK(m.code.size() == (fm.has_inf ? 124u : 127u));
    int ran = 0;
    for (std::size_t i = 0; i < m.code.size(); ++i, ++ran) {
      REQUIRE(static_cast<double>(static_cast<float>(m.value[i])) == m.value[i]);
      if (i > 0) REQUIRE(m.value[i] > m.value[i - 1]);
    }
    CHECK(ran == static_cast<int>(m.code.size()));
  }
}

TEST_CASE("fp8: every midpoint between adjacent codes rounds to the even one", "[core][fp8]") {
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    const Magnitudes m = magnitudes(fm);
    int pairs = 0;
    for (std::size_t i = 0; i + 1 < m.code.size(); ++i) {
      const double lo = m.value[i], hi = m.value[i + 1];
      // One more bit than the format has: exact in float.
      const float mid = static_cast<float>((lo + hi) / 2);
      REQUIRE(static_cast<double>(mid) == (lo + hi) / 2);
      const std::uint32_t even = (m.code[i] & 1u) == 0 ? m.code[i] : m.code[i + 1];
      INFO("between " << lo << " and " << hi);
      for (const float sgn : {1.0f, -1.0f}) {
        const std::uint32_t s = sgn < 0 ? 0x80u : 0u;
        REQUIRE(fp8_from_float(fm.f, sgn * mid) == (s | even));
        REQUIRE(fp8_from_float(fm.f, sgn * std::nextafter(mid, 0.0f)) == (s | m.code[i]));
        REQUIRE(fp8_from_float(fm.f, sgn * std::nextafter(mid, kInf)) == (s | m.code[i + 1]));
      }
      ++pairs;
    }
    CHECK(pairs == (fm.has_inf ? 123 : 126));
  }
}

TEST_CASE("fp8: encoding equals the brute-force nearest code for random floats", "[core][fp8]") {
  std::mt19937_64 rng(test::fresh_seed(81));
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    const Magnitudes m = magnitudes(fm);
    // Half the draws anywhere in float (random bit patterns: mostly far
    // outside the format, NaNs and infinities included), half with an
    // exponent from a few binades below the smallest subnormal to a few above
    // the largest value, where every rounding case lives.
    const int lo_exp = 1 - fm.bias - fm.mbits - 3, hi_exp = (1 << fm.ebits) - fm.bias + 2;
    constexpr int kDraws = 200000;
    int ran = 0;
    for (int i = 0; i < kDraws; ++i) {
      std::uint32_t u = static_cast<std::uint32_t>(rng());
      if (i % 2 == 1) {
        const int e = lo_exp + static_cast<int>(rng() % static_cast<std::uint64_t>(hi_exp - lo_exp + 1));
        u = (u & 0x807fffffu) | (static_cast<std::uint32_t>(e + 127) << 23);
      }
      const float x = from_bits(u);
      const std::uint32_t want = brute_force_encode(fm, m, x), got = fp8_from_float(fm.f, x);
      if (!same_encoding(got, want, fm)) FAIL("x = " << x << " (bits 0x" << std::hex << u << "): got 0x" << got
                                                   << ", want 0x" << want);
      ++ran;
    }
    CHECK(ran == kDraws);
  }
}

TEST_CASE("fp8 e4m3: edge values", "[core][fp8]") {
  const auto enc = fp8_e4m3_from_float;
  const EdgeCase cases[] = {
      {0.0f, 0x00},
      {-0.0f, 0x80},
      {448.0f, 0x7e},                              // max
      {-448.0f, 0xfe},
      {std::nextafter(448.0f, kInf), 0x7e},         // just above max: saturates
      {464.0f, 0x7e},                               // midpoint to the (NaN) 480 slot: saturates
      {480.0f, 0x7e},
      {1e30f, 0x7e},
      {std::numeric_limits<float>::max(), 0x7e},
      {kInf, 0x7e},                                 // no infinities: saturates
      {-kInf, 0xfe},
      {std::ldexp(1.0f, -9), 0x01},                 // smallest subnormal
      {std::ldexp(1.0f, -10), 0x00},                // half of it: tie, to even zero
      {-std::ldexp(1.0f, -10), 0x80},               // ... keeping the sign
      {std::nextafter(std::ldexp(1.0f, -10), 1.0f), 0x01},
      {std::ldexp(3.0f, -10), 0x02},                // 1.5 * smallest: tie between 1 and 2, to 2
      {std::numeric_limits<float>::denorm_min(), 0x00},
      {std::ldexp(15.0f, -10), 0x08},               // between largest subnormal (7) and smallest normal: tie, up
      {1.9375f, 0x40},                              // 1 + 15/16: tie between 1.875 and 2, up to the next binade (2)
      {1.875f, 0x3f},
      {248.0f, 0x78},                               // 1.9375 * 2^7: tie, up into 2^8
      {-248.0f, 0xf8},
      {1.0f, 0x38},
  };
  const int ran = check_edge_cases(enc, cases);
  CHECK(std::signbit(fp8_e4m3_to_float(0x80)));
  CHECK((enc(kNan) & 0x7f) == 0x7f);
  CHECK((enc(-kNan) & 0x7f) == 0x7f);
  CHECK(std::isnan(fp8_e4m3_to_float(0x7f)));
  CHECK(std::isnan(fp8_e4m3_to_float(0xff)));
  CHECK(fp8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(ran == 23);
}

TEST_CASE("fp8 e5m2: edge values (torch.float8_e5m2 rounding: overflow to inf)", "[core][fp8]") {
  const auto enc = fp8_e5m2_from_float;
  const EdgeCase cases[] = {
      {0.0f, 0x00},
      {-0.0f, 0x80},
      {57344.0f, 0x7b},                             // max
      {std::nextafter(57344.0f, kInf), 0x7b},       // just above max: still rounds to max
      {std::nextafter(61440.0f, 0.0f), 0x7b},       // below max + half an ulp
      {61440.0f, 0x7c},                             // max + half an ulp: tie, to even = inf
      {-61440.0f, 0xfc},
      {65536.0f, 0x7c},
      {std::numeric_limits<float>::max(), 0x7c},
      {kInf, 0x7c},
      {-kInf, 0xfc},
      {std::ldexp(1.0f, -16), 0x01},                // smallest subnormal
      {std::ldexp(1.0f, -17), 0x00},                // half of it: to even zero
      {-std::ldexp(1.0f, -17), 0x80},
      {std::nextafter(std::ldexp(1.0f, -17), 1.0f), 0x01},
      {std::ldexp(3.0f, -17), 0x02},                // tie between 1 and 2: to 2
      {std::ldexp(7.0f, -17), 0x04},                // between largest subnormal (3) and smallest normal: up
      {1.875f, 0x40},                               // 1 + 7/8: tie between 1.75 and 2, up into the next binade
      {1.75f, 0x3f},
      {1.0f, 0x3c},
  };
  const int ran = check_edge_cases(enc, cases);
  CHECK(fp8_e5m2_to_float(0x7c) == kInf);
  CHECK(fp8_e5m2_to_float(0xfc) == -kInf);
  CHECK(std::isnan(fp8_e5m2_to_float(0x7d)));
  CHECK(std::isnan(fp8_e5m2_to_float(0xff)));
  CHECK(code_is_nan(kFormats[1], enc(kNan) & 0x7f));
  CHECK(code_is_nan(kFormats[1], enc(-kNan) & 0x7f));
  CHECK(ran == 20);
}

TEST_CASE("fp8: scaled quantise / dequantise, and the scale for a tensor's max", "[core][fp8]") {
  for (const Format& fm : kFormats) {
    INFO(fp8_format_name(fm.f));
    // A tensor's max maps to the format's max: nothing saturates.
    const float scale = fp8_scale_for(3.3f, fm.f);
    CHECK(static_cast<double>(scale) == static_cast<double>(3.3f / static_cast<float>(fm.max_finite)));
    CHECK(fp8_quantize(fm.f, 3.3f, scale) == fp8_from_float(fm.f, static_cast<float>(fm.max_finite)));
    CHECK(fp8_quantize(fm.f, -3.3f, scale) == (0x80u | fp8_from_float(fm.f, static_cast<float>(fm.max_finite))));
    CHECK(fp8_scale_for(0.0f, fm.f) == 1.0f);
    // A scale with few significant bits makes code * scale exact, and
    // quantising it again gives the same code.
    int ran = 0;
    for (std::uint32_t c = 0; c < 256; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      if (code_is_nan(fm, c & 0x7fu) || code_is_inf(fm, c & 0x7fu)) continue;
      const float x = fp8_dequantize(fm.f, code, 0.375f);
      REQUIRE(static_cast<double>(x) == formula_value(fm, c) * 0.375);
      REQUIRE(fp8_quantize(fm.f, x, 0.375f) == code);
      ++ran;
    }
    CHECK(ran == 256 - 2 * fm.nan_codes - (fm.has_inf ? 2 : 0));
    CHECK_THROWS_AS(fp8_scale_for(-1.0f, fm.f), std::invalid_argument);
    CHECK_THROWS_AS(fp8_scale_for(kNan, fm.f), std::invalid_argument);
    CHECK_THROWS_AS(fp8_scale_for(kInf, fm.f), std::invalid_argument);
    CHECK_THROWS_AS(fp8_scale_for(std::numeric_limits<float>::denorm_min(), fm.f), std::invalid_argument);
  }
}

TEST_CASE("fp8: a stored and read-back element stays within fp8_quantization_tolerance, which is nearly sharp",
          "[core][fp8][tolerance]") {
  std::mt19937_64 rng(test::fresh_seed(82));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const Format& fm : kFormats) {
    for (const float scale : {1.0f, 0.375f, fp8_scale_for(4.7f, fm.f), fp8_scale_for(1234.5f, fm.f)}) {
      INFO(fp8_format_name(fm.f) << " scale " << scale);
      const Tolerance tol = fp8_quantization_tolerance(fm.f, scale);
      const double top = fm.max_finite * scale;
      // Log-uniform magnitudes from below the smallest subnormal to the top
      // of the range, both signs.
      const double lo = std::log2(static_cast<double>(fp8_min_subnormal(fm.f)) * scale / 4), hi = std::log2(top);
      constexpr int kDraws = 100000;
      int ran = 0;
      double worst_rel_normal = 0.0;  // relative error where the value is normal in fp8
      for (int i = 0; i < kDraws; ++i) {
        const double mag = std::exp2(lo + (hi - lo) * unit(rng));
        float x = static_cast<float>((i % 2 ? -1.0 : 1.0) * std::fmin(mag, top));
        if (std::fabs(static_cast<double>(x)) > top) x = std::nextafter(x, 0.0f);  // float rounding past the top
        const float d = fp8_dequantize(fm.f, fp8_quantize(fm.f, x, scale), scale);
        if (!within(x, d, tol)) FAIL("x = " << x << " read back as " << d);
        const double y = std::fabs(static_cast<double>(x)) / scale;
        if (y >= std::ldexp(1.0, 1 - fm.bias))
          worst_rel_normal = std::fmax(worst_rel_normal, std::fabs(static_cast<double>(d) - x) / std::fabs(x));
        ++ran;
      }
      CHECK(ran == kDraws);
      // Sharp: some value comes within a factor 2 of the relative bound.
      CHECK(worst_rel_normal > tol.rel / 2);
      CHECK(worst_rel_normal <= tol.rel);
    }
  }
}

TEST_CASE("fp8: one name and one parse per format; bad names are refused by name", "[core][fp8]") {
  for (Fp8Format f : kAllFp8Formats) CHECK(parse_fp8_format(fp8_format_name(f)) == f);
  CHECK(std::string(fp8_format_name(Fp8Format::e4m3)) == "fp8_e4m3");
  CHECK(std::string(fp8_format_name(Fp8Format::e5m2)) == "fp8_e5m2");
  CHECK(parse_fp8_format("fp8") == Fp8Format::e4m3);  // vLLM's "fp8" is e4m3
  using Catch::Matchers::ContainsSubstring;
  for (const char* bad : {"fp8_e4m3fn", "e5m2", "FP8", "", "fp16"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_fp8_format(bad), ContainsSubstring("'" + std::string(bad) + "'") &&
                                                 ContainsSubstring("fp8_e4m3, fp8_e5m2, fp8 (= fp8_e4m3)"));
  }
}
