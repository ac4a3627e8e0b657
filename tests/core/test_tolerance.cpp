// compare(): the acceptance rule, NaN handling, worst-element reporting.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "pa/core/tolerance.hpp"

using namespace pa;

TEST_CASE("tolerances are ordered by the stored type's precision", "[reference][tolerance]") {
  const auto f32 = tolerance_for(DType::f32), f16 = tolerance_for(DType::f16), bf16 = tolerance_for(DType::bf16);
  CHECK(f32.abs < f16.abs);
  CHECK(f16.abs < bf16.abs);
  CHECK(f32.rel < f16.rel);
  CHECK(f16.rel < bf16.rel);
  // Rounding a value to the stored type (half an ulp) is always accepted.
  CHECK(f16.rel >= std::ldexp(1.0, -11));
  CHECK(bf16.rel >= std::ldexp(1.0, -8));
  // A wrong token (an O(0.1) change) never is.
  CHECK(bf16.abs + bf16.rel * 1.0 < 0.1);
  CHECK(reference_tolerance().abs < f32.abs);
}

TEST_CASE("lse tolerance: absolute, the merge-weight error the output tolerance allows", "[reference][tolerance]") {
  for (DType dt : kAllDTypes) {
    INFO(dtype_name(dt));
    const Tolerance out = tolerance_for(dt), lse = lse_tolerance(dt);
    CHECK(lse.rel == 0.0);  // the same bound at lse 0 and lse 14
    // An lse error d scales the state's merge weight by exp(d): exactly the
    // output's relative tolerance at the bound.
    CHECK(std::fabs(std::expm1(lse.abs) - out.rel) <= 1e-15);
    CHECK(lse.abs < out.rel);
    // Near lse 14 (the cascade tests' states) one bf16 ulp of the lse (2^-4)
    // is a 6% weight error: rejected, where a relative bound accepted it.
    const double lse14 = 14.0, one_bf16_ulp = std::ldexp(1.0, -4);
    CHECK_FALSE(within(lse14, lse14 + one_bf16_ulp, lse));
    CHECK(within(lse14, lse14 + 0.9 * lse.abs, lse));
    CHECK_FALSE(within(lse14, lse14 + 1.1 * lse.abs, lse));
  }
  CHECK(lse_tolerance(DType::f32).abs < lse_tolerance(DType::f16).abs);
  CHECK(lse_tolerance(DType::f16).abs < lse_tolerance(DType::bf16).abs);
}

TEST_CASE("kernel pair tolerance: any two values each within tolerance_for of the same exact value agree",
          "[reference][tolerance]") {
  int cases = 0;
  for (DType dt : kAllDTypes) {
    INFO(dtype_name(dt));
    const Tolerance one = tolerance_for(dt), pair = kernel_pair_tolerance(dt);
    CHECK(pair.abs > 2 * one.abs);
    CHECK(pair.rel > 2 * one.rel);
    // Near the extreme pairs: one kernel at e - (a + r|e|), the other at
    // e + (a + r|e|), with either as the reference, over exact values of both
    // signs and sizes (the bound is tight: the pair whose reference lies
    // toward 0 reaches it exactly, so 99.9% of each deviation is used).
    for (double e : {0.0, 1e-3, 0.5, -0.5, 3.0, -40.0, 1000.0}) {
      const double dev = 0.999 * (one.abs + one.rel * std::fabs(e));
      const double lo = e - dev, hi = e + dev;
      CHECK(within(lo, hi, pair));
      CHECK(within(hi, lo, pair));
      // Just past the bound fails.
      CHECK_FALSE(within(e, e + 1.001 * (pair.abs + pair.rel * std::fabs(e)), pair));
      ++cases;
    }
    // Hardly wider than the sum of the two: 1 / (1 - r) <= 1 + 2r for r <= 1/2.
    CHECK(pair.abs <= 2 * one.abs * (1 + 2 * one.rel));
    CHECK(pair.rel <= 2 * one.rel * (1 + 2 * one.rel));
    // A wrong token (an O(0.1) change at magnitude 1) still fails.
    CHECK_FALSE(within(1.0, 1.1, pair));
  }
  CHECK(cases == 7 * 3);
}

TEST_CASE("float logit rounding: the widening is the e^(2d) - 1 of the derivation, none at logit 0",
          "[reference][tolerance]") {
  const Tolerance f32 = tolerance_for(DType::f32);
  const Tolerance same = with_float_logit_rounding(f32, 0.0, 10.0);
  CHECK(same.abs == f32.abs);
  CHECK(same.rel == f32.rel);
  // A logit of -5000 (ALiBi slope 1/4, 20000 tokens back): d = 5000 * 2^-23.
  const double grow = std::expm1(2 * 5000 * std::ldexp(1.0, -23));
  const Tolerance far = with_float_logit_rounding(f32, -5000.0, 10.0);
  CHECK(std::fabs(far.rel - (f32.rel + grow)) <= 1e-18);
  CHECK(std::fabs(far.abs - (f32.abs + 10.0 * grow)) <= 1e-15);
  // Small logits (|l| <= 30, no ALiBi) widen by less than a float ulp of 1.
  const Tolerance near = with_float_logit_rounding(f32, 30.0, 10.0);
  CHECK(near.rel - f32.rel < std::ldexp(1.0, -17));
}

TEST_CASE("compare: pass, fail, worst index", "[reference][tolerance]") {
  const Tolerance tol{1e-3, 1e-3};
  const std::vector<double> ref = {1.0, 2.0, -3.0, 100.0};
  std::vector<float> got = {1.0005f, 2.0f, -3.0f, 100.09f};  // 100.09: within 1e-3 + 0.1
  auto r = compare(ref.data(), got.data(), ref.size(), tol);
  CHECK(r.pass);
  CHECK(r.num_failed == 0);
  CHECK(r.worst_index == 3);
  CHECK(r.max_abs_err > 0.08);
  got[1] = 2.01f;
  r = compare(ref.data(), got.data(), ref.size(), tol);
  CHECK(!r.pass);
  CHECK(r.num_failed == 1);
  CHECK(r.worst_index == 1);
  CHECK_THAT(r.summary(), Catch::Matchers::StartsWith("FAIL"));
  CHECK(compare(ref.data(), got.data(), 0, tol).pass);  // nothing to compare
}

TEST_CASE("compare: NaN never passes, identical infinities do", "[reference][tolerance]") {
  const double inf = std::numeric_limits<double>::infinity();
  const float finf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const Tolerance loose{1e9, 1e9};
  const std::vector<double> ref = {1.0, -inf, 2.0, 3.0};
  std::vector<float> got = {1.0f, -finf, 2.0f, 3.0f};
  CHECK(compare(ref.data(), got.data(), ref.size(), loose).pass);
  got[0] = nan;
  auto r = compare(ref.data(), got.data(), ref.size(), loose);
  CHECK(!r.pass);
  CHECK(r.num_nan == 1);
  CHECK(r.num_nonfinite == 1);
  CHECK(r.worst_index == 0);
  got[0] = 1.0f;
  got[1] = -3.0e38f;  // finite where -inf is expected
  CHECK(!compare(ref.data(), got.data(), ref.size(), loose).pass);
  got[1] = finf;  // wrong sign
  CHECK(!compare(ref.data(), got.data(), ref.size(), loose).pass);
  got[1] = -finf;
  got[3] = finf;  // inf where finite is expected
  CHECK(!compare(ref.data(), got.data(), ref.size(), loose).pass);
  const std::vector<double> nref = {std::nan("")};
  const std::vector<double> ngot = {std::nan("")};
  CHECK(!compare(nref.data(), ngot.data(), 1, loose).pass);  // NaN == NaN is still a failure
}
