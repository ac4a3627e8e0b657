// fp16 / bf16 conversions: exhaustive round trips over all 65536 bit patterns,
// exhaustive ties-to-even at every midpoint, and named special cases.
#include <catch2/catch_test_macros.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "pa/core/dtype_convert.hpp"
#include "float_bits.hpp"

using namespace pa;

namespace {
using test::bits;
using test::from_bits;
bool f16_is_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

struct Codec {
  const char* name;
  std::uint16_t (*to)(float);
  float (*from)(std::uint16_t);
  bool (*is_nan)(std::uint16_t);
};
const Codec kCodecs[] = {{"f16", f16_bits_from_float, float_from_f16_bits, f16_is_nan},
                         {"bf16", bf16_bits_from_float, float_from_bf16_bits, bf16_is_nan}};
}  // namespace

TEST_CASE("decode then encode is the identity on every 16-bit pattern; NaN stays NaN", "[reference][dtype]") {
  for (const Codec& c : kCodecs) {
    INFO(c.name);
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto h = static_cast<std::uint16_t>(b);
      const float f = c.from(h);
      if (c.is_nan(h)) {
        REQUIRE(std::isnan(f));
        REQUIRE(c.is_nan(c.to(f)));
      } else {
        REQUIRE(!std::isnan(f));
        if (c.to(f) != h) FAIL_CHECK("pattern " << b << " -> " << f << " -> " << c.to(f));
      }
    }
  }
}

TEST_CASE("f16 decode matches the IEEE value formula", "[reference][dtype]") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const int e = (b >> 10) & 31, m = b & 1023;
    const double sign = (b & 0x8000) ? -1.0 : 1.0;
    if (e == 31) continue;
    const double expect = e == 0 ? sign * m * std::ldexp(1.0, -24) : sign * (1024 + m) * std::ldexp(1.0, e - 25);
    REQUIRE(static_cast<double>(float_from_f16_bits(static_cast<std::uint16_t>(b))) == expect);
  }
  REQUIRE(float_from_f16_bits(0x7c00) == std::numeric_limits<float>::infinity());
  REQUIRE(float_from_f16_bits(0xfc00) == -std::numeric_limits<float>::infinity());
}

// Every pair of adjacent finite 16-bit values: the exact midpoint (a float,
// since both types have far fewer significand bits) rounds to the even one,
// and a float one step either side of it rounds to the nearer one.
TEST_CASE("every midpoint rounds to even, every near-midpoint to nearest", "[reference][dtype]") {
  for (const Codec& c : kCodecs) {
    INFO(c.name);
    const std::uint16_t max_finite = c.is_nan == f16_is_nan ? 0x7bff : 0x7f7f;
    for (std::uint32_t lo = 0; lo < max_finite; ++lo) {
      for (std::uint32_t sign : {0u, 0x8000u}) {
        const auto a = static_cast<std::uint16_t>(lo | sign), b = static_cast<std::uint16_t>((lo + 1) | sign);
        const double fa = c.from(a), fb = c.from(b);
        const float mid = static_cast<float>((fa + fb) / 2);
        REQUIRE(static_cast<double>(mid) == (fa + fb) / 2);
        const std::uint16_t even = (lo & 1) ? b : a;
        REQUIRE(c.to(mid) == even);
        // One float ulp towards a and towards b (magnitude-wise).
        const float toward_a = from_bits(bits(mid) - 1), toward_b = from_bits(bits(mid) + 1);
        REQUIRE(c.to(toward_a) == a);
        REQUIRE(c.to(toward_b) == b);
        REQUIRE(c.to(static_cast<float>(fa)) == a);
      }
    }
  }
}

TEST_CASE("f16 named rounding cases", "[reference][dtype]") {
  CHECK(f16_bits_from_float(1.0f) == 0x3c00);
  CHECK(f16_bits_from_float(-2.0f) == 0xc000);
  CHECK(f16_bits_from_float(0.0f) == 0x0000);
  CHECK(f16_bits_from_float(-0.0f) == 0x8000);
  CHECK(f16_bits_from_float(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);       // tie -> even (down)
  CHECK(f16_bits_from_float(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);   // tie -> even (up)
  CHECK(f16_bits_from_float(65504.0f) == 0x7bff);                           // largest finite
  CHECK(f16_bits_from_float(65519.99f) == 0x7bff);
  CHECK(f16_bits_from_float(65520.0f) == 0x7c00);                           // tie past max -> inf
  CHECK(f16_bits_from_float(1e6f) == 0x7c00);
  CHECK(f16_bits_from_float(-1e30f) == 0xfc00);
  CHECK(f16_bits_from_float(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(f16_bits_from_float(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -24)) == 0x0001);              // smallest subnormal
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -25)) == 0x0000);              // tie -> zero (even)
  CHECK(f16_bits_from_float(-std::ldexp(1.0f, -25)) == 0x8000);
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -25) * 1.0001f) == 0x0001);
  CHECK(f16_bits_from_float(3 * std::ldexp(1.0f, -25)) == 0x0002);          // tie -> even (up)
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -14)) == 0x0400);              // smallest normal
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)) == 0x0400);  // tie -> normal
  CHECK(f16_bits_from_float(std::ldexp(1.0f, -30)) == 0x0000);              // underflow
  CHECK(f16_bits_from_float(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(f16_is_nan(f16_bits_from_float(std::numeric_limits<float>::quiet_NaN())));
  CHECK(f16_is_nan(f16_bits_from_float(-std::numeric_limits<float>::quiet_NaN())));
  CHECK(f16_is_nan(f16_bits_from_float(from_bits(0x7f800001u))));  // signalling NaN, low payload
  CHECK(std::isnan(float_from_f16_bits(0x7c01)));
}

TEST_CASE("bf16 named rounding cases", "[reference][dtype]") {
  CHECK(bf16_bits_from_float(1.0f) == 0x3f80);
  CHECK(bf16_bits_from_float(-0.0f) == 0x8000);
  CHECK(bf16_bits_from_float(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);      // tie -> even (down)
  CHECK(bf16_bits_from_float(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);  // tie -> even (up)
  CHECK(bf16_bits_from_float(from_bits(0x7f7f7fffu)) == 0x7f7f);
  CHECK(bf16_bits_from_float(from_bits(0x7f7f8000u)) == 0x7f80);           // tie past max -> inf
  CHECK(bf16_bits_from_float(std::numeric_limits<float>::max()) == 0x7f80);
  CHECK(bf16_bits_from_float(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(bf16_bits_from_float(from_bits(0x00008000u)) == 0x0000);           // subnormal tie -> even
  CHECK(bf16_bits_from_float(from_bits(0x00018000u)) == 0x0002);
  CHECK(bf16_bits_from_float(from_bits(0x00008001u)) == 0x0001);
  CHECK(bf16_is_nan(bf16_bits_from_float(std::numeric_limits<float>::quiet_NaN())));
  CHECK(bf16_is_nan(bf16_bits_from_float(from_bits(0x7f800001u))));  // payload only in low bits
  CHECK(bf16_is_nan(bf16_bits_from_float(from_bits(0xff800001u))));
}

TEST_CASE("encode/decode buffers and round_to_dtype", "[reference][dtype]") {
  const std::vector<float> in = {0.0f, 1.0f, -1.5f, 3.14159f, 65520.0f, 1e-8f, -7.0e-6f};
  for (DType t : kAllDTypes) {
    INFO(dtype_name(t));
    const auto bytes = encode(t, in);
    REQUIRE(bytes.size() == in.size() * dtype_bytes(t));
    const auto out = decode(t, bytes);
    REQUIRE(out.size() == in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      REQUIRE(out[i] == round_to_dtype(in[i], t));
      REQUIRE(round_to_dtype(out[i], t) == out[i]);  // idempotent
      if (t == DType::f32) REQUIRE(out[i] == in[i]);
      if (t == DType::f16) {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        REQUIRE(h == f16_bits_from_float(in[i]));
      }
    }
  }
  REQUIRE_THROWS_AS(decode(DType::f16, std::vector<std::uint8_t>(3)), std::invalid_argument);
  for (DType t : kAllDTypes) {
    const float n = decode(t, [&] {
      std::vector<std::uint8_t> b(4);
      const std::uint32_t v = nan_bits(t);
      std::memcpy(b.data(), &v, dtype_bytes(t));
      b.resize(dtype_bytes(t));
      return b;
    }())[0];
    REQUIRE(std::isnan(n));
  }
}

TEST_CASE("dtype names: one parse, round trip through dtype_name, aliases, and nothing else", "[core][dtype]") {
  int n = 0;
  for (const DType t : kAllDTypes) {
    REQUIRE(dtype_from_name(dtype_name(t)) == t);
    ++n;
  }
  CHECK(n == 3);
  CHECK(dtype_from_name("f32") == DType::f32);
  CHECK(dtype_from_name("float") == DType::f32);
  CHECK(dtype_from_name("f16") == DType::f16);
  CHECK(dtype_from_name("half") == DType::f16);
  for (const char* bad : {"", "FP16", "fp8", "bf16 ", "b16", "double", "int8"}) {
    INFO(bad);
    CHECK_FALSE(dtype_from_name(bad).has_value());
  }
}
