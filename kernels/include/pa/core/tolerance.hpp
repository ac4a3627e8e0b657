// THE one place where tolerances live. Every test and `pa-lab run` compares
// through compare() with a Tolerance from here; nobody writes a literal
// epsilon elsewhere.
//
// Acceptance rule (numpy's allclose): |got - ref| <= abs + rel * |ref|.
// Why these numbers: the reference and the kernels read the same stored
// values (the reference decodes the exact dtype bytes it uploads), so errors
// come only from (a) float accumulation and fast exp in the kernel, and (b)
// rounding the result to the stored dtype (half an ulp: 2^-11 relative for
// f16, 2^-8 for bf16). Each tolerance is about 2 ulps of the stored type plus
// float accumulation slack, tight enough that one wrong token or one wrong
// head dimension (an O(0.1..1) change) fails.
#pragma once
#include <cstddef>
#include <string>

#include "pa/core/fp8.hpp"
#include "pa/index/dtype.hpp"

namespace pa {

struct Tolerance {
  double abs = 0.0;
  double rel = 0.0;
};

// Tolerance for a value a kernel accumulates in float and stores in `stored`
// (the output dtype). Intermediates that kernels keep in float (logits,
// probabilities, max, exp-sum, partition outputs, lse) use DType::f32.
Tolerance tolerance_for(DType stored);

// Tolerance for a log-sum-exp (an attention state's lse, a merged lse) of a
// computation whose output has tolerance_for(math): ABSOLUTE (rel = 0), because
// an lse matters only through differences. Merging states weights each by
// exp(lse_i - lse), so an lse error d scales that state's weight, and the merged
// output, by exp(d): a relative error exp(d) - 1. The bound allows exactly the
// output's relative tolerance there: abs = log(1 + tolerance_for(math).rel).
// fp32 ~1.0e-4, fp16 ~2.0e-3, bf16 ~1.59e-2. A relative bound would widen with
// the lse itself (near 14, bf16 would accept +-0.24: a 27% weight error).
Tolerance lse_tolerance(DType math);

// `t` widened for softmax-weighted quantities over tokens whose float logits
// reach max_abs_logit in magnitude: ALiBi's bias makes the logits of far
// tokens large (slope x distance: -5000 at 20000 tokens with slope 1/4), and a
// float logit L is then off by up to |L| 2^-24 per rounding (the bias product
// and the sum: d = |L| 2^-23). Within a set of tokens (a V2 partition) the
// weights are exp(l - max): each moves by a factor within e^(+-2d), so their
// sum moves by at most e^(2d) - 1 relative, and a weighted mean of values
// within value_range of each other by at most (e^(2d) - 1) value_range. The
// attention output is not affected (a far token's weight is e^(L) ~ 0); the
// internals of a partition of far tokens are.
Tolerance with_float_logit_rounding(Tolerance t, double max_abs_logit, double value_range);

// Tolerance for comparing two kernels' outputs stored in `stored`, neither of
// them exact (pa-bench's cross-check of v1, v2 and the cascade against stage 8
// on the same inputs). Each lies within tolerance_for(stored) = (a, r) of the
// exact value e: |x - e| <= a + r |e| and |y - e| <= a + r |e|, so
// |x - y| <= 2a + 2r |e|; with x as the reference, |e| <= (|x| + a) / (1 - r),
// which gives abs = 2a / (1 - r) and rel = 2r / (1 - r) in terms of |x|.
Tolerance kernel_pair_tolerance(DType stored);

// Tolerance for comparing two float64 reference computations that sum in a
// different order (e.g. merged states vs one pass over the whole context).
Tolerance reference_tolerance();

// How far an fp8 cache element read back, fp8_dequantize(fp8_quantize(x, s), s),
// may lie from the x that was stored, as abs + rel * |x|, while |x / s| is in
// the format's range (up to a float rounding: no saturation, no overflow).
// Derivation, with u = fp8_unit_roundoff and h = fp8_min_subnormal / 2:
//   y = fl(x / s) = (x / s)(1 + e1)        |e1| <= 2^-24 (the float division)
//   c = fp8(y):  |c - y| <= u |y| + h       (normal range: half an ulp is at
//                                           most u |y|; subnormals: half the
//                                           spacing, h)
//   d = fl(c * s) = c s (1 + e2)           |e2| <= 2^-24 (the float product)
// so |d - x| <= (u + 2^-22) |x| + s h (1 + 2^-22): 2^-22 covers the two float
// roundings and their products with u <= 1/8.
Tolerance fp8_quantization_tolerance(Fp8Format f, float scale);

// The acceptance rule for one finite pair: |got - ref| <= tol.abs + tol.rel * |ref|.
bool within(double ref, double got, Tolerance tol);

struct CompareResult {
  std::size_t count = 0;          // elements compared
  double max_abs_err = 0.0;       // over finite pairs
  double max_rel_err = 0.0;       // |got-ref| / |ref| (|ref| floored at 1e-30)
  std::size_t worst_index = 0;    // element with the largest err / (abs + rel*|ref|);
                                  // the first failing non-finite element if any
  double worst_ref = 0.0, worst_got = 0.0;
  std::size_t num_nonfinite = 0;  // elements where got is NaN/Inf but ref is not (or differs)
  std::size_t num_nan = 0;        // elements where got is NaN (never pass)
  std::size_t num_failed = 0;     // elements outside the tolerance (incl. non-finite)
  bool pass = true;               // num_failed == 0
  Tolerance tol{};

  // One line: "PASS max_abs=... max_rel=... worst[i]: ref=... got=..." (or FAIL ...).
  std::string summary() const;
};

// Element-wise comparison of n values. NaN in `got` never passes. A
// non-finite `ref` (e.g. -inf max of an empty partition) passes only when
// `got` is the identical infinity. n == 0 passes.
CompareResult compare(const double* ref, const float* got, std::size_t n, Tolerance tol);
CompareResult compare(const float* ref, const float* got, std::size_t n, Tolerance tol);
CompareResult compare(const double* ref, const double* got, std::size_t n, Tolerance tol);

}  // namespace pa
