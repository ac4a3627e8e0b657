// ALiBi in the reference (pa/reference/alibi.hpp): the paper's slopes, zero
// slopes leave ref_output unchanged, steep slopes attend to the last token,
// GQA heads keep their own slopes, split contexts merge.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "naive_attention.hpp"
#include "pa/reference/alibi.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/fp8_cache.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"
#include "states.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;

namespace {

ProblemSpec spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx, std::uint64_t salt) {
  return test::fresh_spec_of(t, head, block, heads, kv_heads, std::move(ctx), salt);
}

// ALiBi's bias in the naive recomputation (tests/support/naive_attention.hpp),
// written apart from the reference: -slope * the distance to the last token.
auto alibi_bias(const std::vector<float>& slopes) {
  return [&slopes](int, int h, int t, int c) { return -double(slopes[h]) * (c - 1 - t); };
}

using test::flat_lse;
using test::flat_out;

}  // namespace

TEST_CASE("alibi: the paper's slopes for 8 and 12 heads", "[reference][alibi]") {
  // 8 heads, a power of two: 2^(-8 i / 8) = 2^-i.
  const std::vector<float> s8 = alibi_slopes(8);
  const std::vector<float> want8 = {0.5f, 0.25f, 0.125f, 0.0625f, 0.03125f, 0.015625f, 0.0078125f, 0.00390625f};
  CHECK(s8 == want8);
  // 12 heads: the 8 above, then the odd-numbered slopes of 16 heads,
  // 2^(-i/2) for i = 1, 3, 5, 7: 1/sqrt(2) = 0.7071..., then each half the one before.
  const std::vector<float> s12 = alibi_slopes(12);
  REQUIRE(s12.size() == 12);
  CHECK(std::vector<float>(s12.begin(), s12.begin() + 8) == want8);
  const float want_extra[] = {static_cast<float>(0.70710678118654752), static_cast<float>(0.35355339059327376),
                              static_cast<float>(0.17677669529663688), static_cast<float>(0.08838834764831844)};
  for (int i = 0; i < 4; ++i) CHECK(s12[8 + i] == want_extra[i]);
  // 1 head: 2^-8; 2 heads: 2^-4, 2^-8; 3 heads: those of 2, then 2^-2.
  CHECK(alibi_slopes(1) == std::vector<float>{0.00390625f});
  CHECK(alibi_slopes(2) == std::vector<float>{0.0625f, 0.00390625f});
  CHECK(alibi_slopes(3) == std::vector<float>{0.0625f, 0.00390625f, 0.25f});
  CHECK_THROWS_WITH(alibi_slopes(0), ContainsSubstring("0 heads") && ContainsSubstring("accepted: at least 1"));
}

TEST_CASE("alibi: all slopes zero is exactly the reference without ALiBi", "[reference][alibi]") {
  const DType dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  const auto heads = GENERATE(std::pair{4, 4}, std::pair{8, 2}, std::pair{8, 1});
  const PagedProblem p = make_problem(spec_of(dt, 64, 16, heads.first, heads.second, {1, 15, 16, 17, 100}, 400));
  INFO(p.spec.describe());
  const std::vector<float> zero(heads.first, 0.0f);
  CHECK(ref_output_alibi(p, zero) == ref_output(p));
  CHECK(ref_logits_alibi(p, zero).values == ref_logits(p).values);
  const auto a = ref_states_alibi(p, zero, 10, 60), b = ref_states(p, 10, 60);
  CHECK(flat_out(a) == flat_out(b));
  CHECK(flat_lse(a) == flat_lse(b));
}

TEST_CASE("alibi: the reference with the paper's slopes equals an independent computation (GQA, MQA)",
          "[reference][alibi]") {
  const DType dt = GENERATE(DType::f16, DType::bf16);
  const auto heads = GENERATE(std::pair{8, 8}, std::pair{12, 4}, std::pair{16, 2}, std::pair{8, 1});
  const PagedProblem p = make_problem(spec_of(dt, 128, 16, heads.first, heads.second, {1, 31, 200, 513}, 401));
  INFO(p.spec.describe());
  const std::vector<float> slopes = alibi_slopes(heads.first);
  const auto out = ref_output_alibi(p, slopes);
  test::require_close(test::naive_output(p, alibi_bias(slopes)), out, reference_tolerance());
  CHECK(out != ref_output(p));
  // A slope is the query head's: changing head 1's changes head 1's output
  // only, though head 0 (and under GQA others) share its KV head.
  std::vector<float> other = slopes;
  other[1] *= 4;
  const auto out1 = ref_output_alibi(p, other);
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int h = 0; h < p.num_heads(); ++h) {
      const auto first = out.begin() + p.query.out_offset(s, h, 0), first1 = out1.begin() + p.query.out_offset(s, h, 0);
      const bool same = std::equal(first, first + p.head_size(), first1);
      // (A one-token context has nothing to bias.)
      CHECK(same == (h != 1 || p.context_len(s) == 1));
    }
  // The logits: ref_logits plus slope * (t - context_len + 1), token by token.
  const TokenTensor l = ref_logits(p), la = ref_logits_alibi(p, slopes);
  std::size_t ran = 0;
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int h = 0; h < p.num_heads(); ++h)
      for (int t = 0; t < p.context_len(s); ++t, ++ran)
        REQUIRE(within(l.at(s, h, t) + double(slopes[h]) * (t - p.context_len(s) + 1), la.at(s, h, t),
                       reference_tolerance()));
  CHECK(ran == static_cast<std::size_t>(1 + 31 + 200 + 513) * heads.first);
}

TEST_CASE("alibi: a steep slope attends only to the last token", "[reference][alibi]") {
  const auto heads = GENERATE(std::pair{8, 8}, std::pair{8, 2}, std::pair{4, 1});
  ProblemSpec s = spec_of(DType::f16, 64, 16, heads.first, heads.second, {1, 2, 17, 300}, 402);
  s.logit_spread = 2.0f;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  // With slope m every earlier token's logit is at least gap = m - (the range
  // of the unbiased logits) below the last token's, so its weight is at most
  // exp(-gap), and the output lies within (ctx - 1) exp(-gap) 2 max|v| of V of
  // the last token. m = 50 + the range (whatever the random draw gave) makes
  // the gap at least 50; the premise: that is below the reference tolerance,
  // so the comparison below has to hold.
  const TokenTensor l = ref_logits(p);
  const double range = *std::max_element(l.values.begin(), l.values.end()) -
                       *std::min_element(l.values.begin(), l.values.end());
  const float slope = static_cast<float>(std::ceil(range)) + 50.0f;
  double vmax = 0;
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int t = 0; t < p.context_len(seq); ++t)
      for (int h = 0; h < p.num_kv_heads(); ++h)
        for (int d = 0; d < p.head_size(); ++d) vmax = std::max(vmax, std::fabs(double(p.v_at(seq, h, t, d))));
  REQUIRE(299 * std::exp(-(slope - range)) * 2 * vmax < reference_tolerance().abs);
  const std::vector<float> steep(heads.first, slope);
  const auto out = ref_output_alibi(p, steep);
  std::vector<double> last_v(out.size());
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < p.num_heads(); ++h)
      for (int d = 0; d < p.head_size(); ++d)
        last_v[p.query.out_offset(seq, h, d)] = p.v_at(seq, p.kv_head(h), p.context_len(seq) - 1, d);
  test::require_close(last_v, out, reference_tolerance());
}

TEST_CASE("alibi: states over split contexts merge to the whole output", "[reference][alibi]") {
  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 8, 2, {5, 64, 129}, 403));
  const std::vector<float> slopes = alibi_slopes(8);
  const auto whole = ref_output_alibi(p, slopes);
  for (const int split : {0, 3, 32, 100}) {
    INFO("split at " << split);
    const auto a = ref_states_alibi(p, slopes, 0, split), b = ref_states_alibi(p, slopes, split, 1 << 30);
    std::vector<AttentionState> merged;
    for (std::size_t i = 0; i < a.size(); ++i) merged.push_back(merge_states(a[i], b[i]));
    test::require_close(whole, flat_out(merged), reference_tolerance());
  }
}

TEST_CASE("alibi: over an fp8 cache, through the read-back problem", "[reference][alibi][fp8]") {
  const PagedProblem p = make_problem(spec_of(DType::f16, 128, 16, 8, 2, {1, 50, 300}, 404));
  const Fp8KvCache c = quantize_kv_cache(p, Fp8Format::e4m3);
  const PagedProblem dq = dequantized_problem(p, c);
  const std::vector<float> slopes = alibi_slopes(8);
  test::require_close(test::naive_output(dq, alibi_bias(slopes)), ref_output_alibi(dq, slopes), reference_tolerance());
  CHECK(ref_output_alibi(dq, std::vector<float>(8, 0.0f)) == ref_output_fp8(p, c));
}

TEST_CASE("alibi: bad slopes are refused by name", "[reference][alibi]") {
  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 4, 2, {20}, 405));
  CHECK_THROWS_WITH(ref_output_alibi(p, std::vector<float>(3, 0.5f)),
                    ContainsSubstring("3 slopes for 4 query heads") && ContainsSubstring("one slope per query head"));
  CHECK_THROWS_WITH(ref_logits_alibi(p, std::vector<float>(8, 0.5f)), ContainsSubstring("8 slopes for 4 query heads"));
  std::vector<float> nan_slope(4, 0.5f);
  nan_slope[2] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(ref_states_alibi(p, nan_slope, 0, 10),
                    ContainsSubstring("slope of head 2 is nan") && ContainsSubstring("accepted: finite values"));
}

TEST_CASE("alibi: a problem with slopes gets the bias in every reference function", "[reference][alibi]") {
  const auto heads = GENERATE(std::pair{8, 8}, std::pair{12, 4}, std::pair{8, 1});
  ProblemSpec s = spec_of(DType::f16, 64, 16, heads.first, heads.second, {1, 15, 130, 700}, 406);
  s.alibi = true;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  REQUIRE(p.alibi_slopes == alibi_slopes(heads.first));
  // The same arithmetic as the explicit-slope functions: equal, bit for bit.
  CHECK(ref_output(p) == ref_output_alibi(p, p.alibi_slopes));
  CHECK(ref_logits(p).values == ref_logits_alibi(p, p.alibi_slopes).values);
  const auto a = ref_states(p, 20, 200), b = ref_states_alibi(p, p.alibi_slopes, 20, 200);
  CHECK(flat_out(a) == flat_out(b));
  CHECK(flat_lse(a) == flat_lse(b));
  // Dense attention (no block tables) with the bias; V2's partitions and the
  // cascade's prefix and suffix merged: all the same attention.
  const auto out = ref_output(p);
  test::require_close(out, dense_output(p), reference_tolerance());
  test::require_close(out, ref_v2(p, 64).out, reference_tolerance());
  test::require_close(test::naive_output(p, alibi_bias(p.alibi_slopes)), out, reference_tolerance());
  CHECK(out != ref_output(make_problem(spec_of(DType::f16, 64, 16, heads.first, heads.second, {1, 15, 130, 700}, 406))));
}

TEST_CASE("alibi: the cascade's prefix and suffix carry the bias of their place in each sequence",
          "[reference][alibi]") {
  ProblemSpec s = spec_of(DType::bf16, 64, 16, 8, 2, {64 + 1, 64 + 100, 64}, 407);
  s.shared_prefix_len = 64;
  s.alibi = true;
  const PagedProblem p = make_problem(s);
  const CascadeRef c = ref_cascade(p);
  test::require_close(ref_output(p), c.out, reference_tolerance());
  test::require_close(test::naive_output(p, alibi_bias(p.alibi_slopes)), c.out, reference_tolerance());
}
