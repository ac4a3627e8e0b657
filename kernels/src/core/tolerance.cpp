// Tolerances per stored dtype and the one comparison every test uses.
#include "pa/core/tolerance.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace pa {

Tolerance tolerance_for(DType stored) {
  switch (stored) {
    // float accumulation over up to ~10^5 terms with fast exp: ~1e-5 relative.
    case DType::f32: return {1e-4, 1e-4};
    // 2^-11 half-ulp rounding of the stored result, twice, plus float slack.
    case DType::f16: return {2e-3, 2e-3};
    // 2^-8 half-ulp rounding of the stored result, twice, plus float slack.
    case DType::bf16: return {1.6e-2, 1.6e-2};
  }
  throw std::invalid_argument("tolerance_for: unknown dtype " + std::to_string(int(stored)) +
                              " (accepted: fp32, fp16, bf16)");
}

// d = log(1 + rel) is the largest lse error whose weight error exp(d) - 1
// stays within the output's relative tolerance (the header says why).
Tolerance lse_tolerance(DType math) { return {std::log1p(tolerance_for(math).rel), 0.0}; }

// The header derives it from tolerance_for.
Tolerance kernel_pair_tolerance(DType stored) {
  const Tolerance t = tolerance_for(stored);
  return {2.0 * t.abs / (1.0 - t.rel), 2.0 * t.rel / (1.0 - t.rel)};
}

// Two float64 computations in a different summation order: ~1e-15 relative
// per operation; 1e-9 leaves room for long contexts and exp/log round trips.
Tolerance reference_tolerance() { return {1e-9, 1e-9}; }

Tolerance with_float_logit_rounding(Tolerance t, double max_abs_logit, double value_range) {
  const double grow = std::expm1(2.0 * std::ldexp(std::fabs(max_abs_logit), -23));
  return {t.abs + grow * std::fabs(value_range), t.rel + grow};
}

bool within(double ref, double got, Tolerance tol) { return std::fabs(got - ref) <= tol.abs + tol.rel * std::fabs(ref); }

namespace {

template <class R, class G>
CompareResult compare_impl(const R* ref, const G* got, std::size_t n, Tolerance tol) {
  CompareResult res;
  res.count = n;
  res.tol = tol;
  double worst_ratio = -1.0;
  bool worst_is_nonfinite = false;
  for (std::size_t i = 0; i < n; ++i) {
    const double r = static_cast<double>(ref[i]);
    const double g = static_cast<double>(got[i]);
    if (std::isnan(g)) ++res.num_nan;
    if (!std::isfinite(r) || !std::isfinite(g)) {
      // Only the identical infinity passes; NaN never does.
      const bool ok = !std::isnan(r) && !std::isnan(g) && r == g;
      if (!ok) {
        ++res.num_failed;
        ++res.num_nonfinite;
        if (!worst_is_nonfinite) {
          worst_is_nonfinite = true;
          res.worst_index = i;
          res.worst_ref = r;
          res.worst_got = g;
        }
      }
      continue;
    }
    const double err = std::fabs(g - r);
    const double rel = err / std::fmax(std::fabs(r), 1e-30);
    const double bound = tol.abs + tol.rel * std::fabs(r);
    if (err > res.max_abs_err) res.max_abs_err = err;
    if (rel > res.max_rel_err) res.max_rel_err = rel;
    if (!within(r, g, tol)) ++res.num_failed;
    const double ratio = bound > 0.0 ? err / bound : (err > 0.0 ? INFINITY : 0.0);
    if (!worst_is_nonfinite && ratio > worst_ratio) {
      worst_ratio = ratio;
      res.worst_index = i;
      res.worst_ref = r;
      res.worst_got = g;
    }
  }
  res.pass = res.num_failed == 0;
  return res;
}

}  // namespace

std::string CompareResult::summary() const {
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "%s n=%zu max_abs=%.3e max_rel=%.3e failed=%zu nonfinite=%zu nan=%zu "
                "worst[%zu]: ref=%.9g got=%.9g (tol abs=%.1e rel=%.1e)",
                pass ? "PASS" : "FAIL", count, max_abs_err, max_rel_err, num_failed, num_nonfinite, num_nan,
                worst_index, worst_ref, worst_got, tol.abs, tol.rel);
  return buf;
}

CompareResult compare(const double* ref, const float* got, std::size_t n, Tolerance tol) {
  return compare_impl(ref, got, n, tol);
}
CompareResult compare(const float* ref, const float* got, std::size_t n, Tolerance tol) {
  return compare_impl(ref, got, n, tol);
}
CompareResult compare(const double* ref, const double* got, std::size_t n, Tolerance tol) {
  return compare_impl(ref, got, n, tol);
}

Tolerance fp8_quantization_tolerance(Fp8Format f, float scale) {
  constexpr double kFloatSlack = 2.384185791015625e-07;  // 2^-22
  const double h = 0.5 * static_cast<double>(fp8_min_subnormal(f));
  return {static_cast<double>(scale) * h * (1.0 + kFloatSlack),
          static_cast<double>(fp8_unit_roundoff(f)) + kFloatSlack};
}

}  // namespace pa
