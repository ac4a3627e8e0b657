// The fp8 KV cache (pa/reference/fp8_cache.hpp): the codes and their layout,
// the scales, the reference over read-back values, and what fp8 costs in
// accuracy against the same problem's fp16 cache.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "pa/core/dtype_convert.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/fp8_cache.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;

namespace {

ProblemSpec spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx, std::uint64_t salt) {
  return test::fresh_spec_of(t, head, block, heads, kv_heads, std::move(ctx), salt);
}

// f(seq, kv head, token, physical block, slot) for every token the sequences read.
template <class F>
int for_each_read_token(const PagedProblem& p, F&& f) {
  int n = 0;
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int t = 0; t < p.context_len(s); ++t)
      for (int h = 0; h < p.num_kv_heads(); ++h, ++n)
        f(s, h, t, p.physical_block(s, t / p.block_size()), t % p.block_size());
  return n;
}

// The fp8 K layout written out: [blocks, kv_heads, head_size/16, block_size, 16].
std::size_t fp8_k_index(const PagedProblem& p, int phys, int kvh, int d, int t) {
  const std::size_t hs = p.head_size(), bs = p.block_size();
  return ((static_cast<std::size_t>(phys) * p.num_kv_heads() + kvh) * (hs / 16) + d / 16) * (bs * 16) + t * 16 + d % 16;
}
std::size_t v_index(const PagedProblem& p, int phys, int kvh, int d, int t) {
  return ((static_cast<std::size_t>(phys) * p.num_kv_heads() + kvh) * p.head_size() + d) * p.block_size() + t;
}

// The attention output straight from the codes: the K and V each token reads
// decoded from the explicit fp8 layout, float(code) * scale, float64 sums.
std::vector<double> naive_fp8_output(const PagedProblem& p, const Fp8KvCache& c) {
  const int hs = p.head_size();
  std::vector<double> out(static_cast<std::size_t>(p.num_seqs()) * p.num_heads() * hs);
  for (int s = 0; s < p.num_seqs(); ++s)
    for (int h = 0; h < p.num_heads(); ++h) {
      const int kvh = h / (p.num_heads() / p.num_kv_heads()), n = p.context_len(s);
      std::vector<double> l(n);
      for (int t = 0; t < n; ++t) {
        const int phys = p.physical_block(s, t / p.block_size()), slot = t % p.block_size();
        double acc = 0;
        for (int d = 0; d < hs; ++d)
          acc += double(p.q_at(s, h, d)) *
                 (fp8_to_float(c.format, c.k_codes[fp8_k_index(p, phys, kvh, d, slot)]) * c.scales.k);
        l[t] = double(p.spec.scale()) * acc;
      }
      const double m = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (double x : l) sum += std::exp(x - m);
      for (int d = 0; d < hs; ++d) {
        double acc = 0;
        for (int t = 0; t < n; ++t) {
          const int phys = p.physical_block(s, t / p.block_size()), slot = t % p.block_size();
          acc += std::exp(l[t] - m) / sum *
                 (fp8_to_float(c.format, c.v_codes[v_index(p, phys, kvh, d, slot)]) * c.scales.v);
        }
        out[(static_cast<std::size_t>(s) * p.num_heads() + h) * hs + d] = acc;
      }
    }
  return out;
}

bool is_nan_code(Fp8Format f, std::uint8_t c) { return std::isnan(fp8_to_float(f, c)); }

}  // namespace

TEST_CASE("fp8 cache: every element is fp8(x / scale), in the fp8 layout (x = 16), traps kept",
          "[reference][fp8]") {
  const Fp8Format f = GENERATE(Fp8Format::e4m3, Fp8Format::e5m2);
  const DType dt = GENERATE(DType::f16, DType::bf16);
  const PagedProblem p = make_problem(spec_of(dt, 64, 16, 8, 2, {1, 15, 16, 17, 70}, 300));
  const Fp8KvCache c = quantize_kv_cache(p, f, {0.05f, 0.02f});
  INFO(p.spec.describe() << " " << fp8_format_name(f));
  REQUIRE(c.cache.x == 16);
  REQUIRE(c.k_codes.size() == p.k_cache.size());
  REQUIRE(c.v_codes.size() == p.v_cache.size());
  // Every element of the pool, spare blocks and tails included.
  std::size_t ran = 0, nan_tails = 0, spare_saturated = 0;
  for (int b = 0; b < p.num_blocks; ++b)
    for (int h = 0; h < p.num_kv_heads(); ++h)
      for (int d = 0; d < p.head_size(); ++d)
        for (int t = 0; t < p.block_size(); ++t, ++ran) {
          const float k = p.k_cache[p.cache.k_offset(b, h, d, t)], v = p.v_cache[p.cache.v_offset(b, h, d, t)];
          const std::uint8_t kc = c.k_codes[fp8_k_index(p, b, h, d, t)], vc = c.v_codes[v_index(p, b, h, d, t)];
          REQUIRE(kc == fp8_quantize(f, k, 0.05f));
          REQUIRE(vc == fp8_quantize(f, v, 0.02f));
          if (std::isnan(k)) {
            REQUIRE(is_nan_code(f, kc));
            ++nan_tails;
          }
          // Much of the |x| ~ 1000 garbage of the spare blocks lies beyond
          // e4m3's range at this scale (448 * 0.05): it saturates.
          if (f == Fp8Format::e4m3 && std::fabs(k) > 448.0f * 0.05f) {
            REQUIRE((kc & 0x7f) == 0x7e);
            ++spare_saturated;
          }
        }
  CHECK(ran == static_cast<std::size_t>(p.cache.total_elems()));
  // Tails: 15 of the block of the 1-token context, 1 of 15, 0 of 16, 15 of 17, 10 of 70.
  CHECK(nan_tails == static_cast<std::size_t>(15 + 1 + 15 + 10) * p.num_kv_heads() * p.head_size());
  CHECK((f == Fp8Format::e5m2 || spare_saturated > 0));
}

TEST_CASE("fp8 cache: fp8_scales_for maps the largest element read onto the format's max", "[reference][fp8]") {
  const Fp8Format f = GENERATE(Fp8Format::e4m3, Fp8Format::e5m2);
  const PagedProblem p = make_problem(spec_of(DType::f16, 128, 16, 4, 4, {33, 100}, 301));
  float kmax = 0, vmax = 0;
  const int ran = for_each_read_token(p, [&](int s, int h, int t, int, int) {
    for (int d = 0; d < p.head_size(); ++d) {
      kmax = std::max(kmax, std::fabs(p.k_at(s, h, t, d)));
      vmax = std::max(vmax, std::fabs(p.v_at(s, h, t, d)));
    }
  });
  CHECK(ran == (33 + 100) * 4);
  const Fp8Scales sc = fp8_scales_for(p, f);
  CHECK(sc.k == kmax / fp8_max_finite(f));
  CHECK(sc.v == vmax / fp8_max_finite(f));
  // Below the garbage of the spare blocks (which is never read).
  CHECK(kmax < 100.0f);
  const Fp8KvCache c = quantize_kv_cache(p, f);
  CHECK(c.scales.k == sc.k);
  CHECK(c.scales.v == sc.v);
}

TEST_CASE("fp8 cache: with values that fp8 * scale represents exactly, the fp8 reference is ref_output",
          "[reference][fp8]") {
  // The scale makes code * scale exact in float and in the problem's dtype:
  // powers of two, and 0.375 (two significant bits).
  const auto fs = GENERATE(std::pair{Fp8Format::e4m3, 0.03125f}, std::pair{Fp8Format::e4m3, 0.375f},
                           std::pair{Fp8Format::e5m2, 0.125f}, std::pair{Fp8Format::e5m2, 0.375f});
  const DType dt = GENERATE(DType::f16, DType::bf16);
  const auto [f, s] = fs;
  const PagedProblem p0 = make_problem(spec_of(dt, 128, 16, 8, 2, {1, 16, 77, 300}, 302));
  INFO(p0.spec.describe() << " " << fp8_format_name(f) << " scale " << s);
  const Fp8KvCache c0 = quantize_kv_cache(p0, f, {s, s});
  // p1: a problem of the same dtype whose cache values are fp8 values times s.
  const PagedProblem p1 = dequantized_problem(p0, c0);
  const int ran = for_each_read_token(p1, [&](int seq, int h, int t, int, int) {
    for (int d = 0; d < p1.head_size(); ++d) {
      REQUIRE(round_to_dtype(p1.k_at(seq, h, t, d), dt) == p1.k_at(seq, h, t, d));
      REQUIRE(round_to_dtype(p1.v_at(seq, h, t, d), dt) == p1.v_at(seq, h, t, d));
    }
  });
  CHECK(ran == (1 + 16 + 77 + 300) * 2);
  // Storing p1 in fp8 loses nothing: the same codes, and the same output bit for bit.
  const Fp8KvCache c1 = quantize_kv_cache(p1, f, {s, s});
  REQUIRE(c1.k_codes == c0.k_codes);
  REQUIRE(c1.v_codes == c0.v_codes);
  REQUIRE(ref_output_fp8(p1, c1) == ref_output(p1));
  // The read-back problem carries no stale dtype bytes.
  CHECK(p1.k_bytes.empty());
  CHECK(p1.v_bytes.empty());
}

TEST_CASE("fp8 cache: the reference equals attention computed straight from the codes", "[reference][fp8]") {
  const Fp8Format f = GENERATE(Fp8Format::e4m3, Fp8Format::e5m2);
  const DType dt = GENERATE(DType::f16, DType::bf16);
  const auto heads = GENERATE(std::pair{8, 8}, std::pair{8, 2}, std::pair{4, 1});
  const int block = GENERATE(8, 32);
  const PagedProblem p = make_problem(spec_of(dt, 80, block, heads.first, heads.second, {1, block + 3, 150}, 303));
  INFO(p.spec.describe() << " " << fp8_format_name(f));
  // Scales from the data, and explicit ones other than 1.
  for (const Fp8Scales sc : {fp8_scales_for(p, f), Fp8Scales{0.0625f, 0.03f}}) {
    INFO("k_scale " << sc.k << " v_scale " << sc.v);
    const Fp8KvCache c = quantize_kv_cache(p, f, sc);
    test::require_close(naive_fp8_output(p, c), ref_output_fp8(p, c), reference_tolerance());
  }
}

TEST_CASE("fp8 cache: bad scales and mismatched caches are refused by name", "[reference][fp8]") {
  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 2, 2, {20}, 304));
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const float bad : {0.0f, -1.0f, kNan, kInf}) {
    INFO(bad);
    CHECK_THROWS_WITH(quantize_kv_cache(p, Fp8Format::e4m3, {bad, 1.0f}),
                      ContainsSubstring("k_scale") && ContainsSubstring("accepted: finite and > 0"));
    CHECK_THROWS_WITH(quantize_kv_cache(p, Fp8Format::e5m2, {1.0f, bad}),
                      ContainsSubstring("v_scale") && ContainsSubstring("accepted: finite and > 0"));
  }
  const PagedProblem other = make_problem(spec_of(DType::f16, 64, 16, 2, 2, {200}, 305));
  const Fp8KvCache c = quantize_kv_cache(other, Fp8Format::e4m3);
  CHECK_THROWS_WITH(dequantized_problem(p, c), ContainsSubstring("not the problem's pool"));
  CHECK_THROWS_WITH(ref_output_fp8(p, c), ContainsSubstring("not the problem's pool"));
  // A scale too small for the data saturates elements: no error bound there.
  CHECK_THROWS_WITH(fp8_output_error_bound(p, quantize_kv_cache(p, Fp8Format::e4m3, {1e-4f, 1e-4f})),
                    ContainsSubstring("beyond the fp8 range"));
}

TEST_CASE("fp8 cache: accuracy against the fp16 cache, within the derived bounds", "[reference][fp8][accuracy]") {
  // What storing the cache in fp8 costs: the output over the fp8 cache against
  // the output over the same problem's fp16 cache, per format and logit spread.
  // Checked, at three levels:
  // 1. every element read back lies within fp8_quantization_tolerance;
  // 2. the logit changes are what rounding the K elements predicts: with
  //    each rounding error uniform over its interval (the standard model), an
  //    element's error has variance <= (rel^2 x^2 + abs^2) / 3, so a logit's
  //    change, scale * sum_d q_d dk_d, has variance <= scale^2 sum_d q_d^2
  //    (rel^2 k_d^2 + abs^2) / 3. Over thousands of logits the mean square
  //    change stays below the mean of that prediction (about half of it when
  //    mantissas are spread evenly over a binade);
  // 3. every output element lies within fp8_output_error_bound.
  struct Row {
    Fp8Format f;
    float spread;
    double max_dl, rms_dl, rms_dl_predicted, max_err, mean_err, mean_out, worst_err_over_bound, worst_long;
  };
  std::vector<Row> rows;
  const Tolerance rt = reference_tolerance();
  for (const float spread : {1.0f, 4.0f, 16.0f})
    for (const Fp8Format f : kAllFp8Formats) {
      ProblemSpec s = spec_of(DType::f16, 128, 16, 8, 2, {1, 40, 700, 2000}, 310);
      s.logit_spread = spread;
      const PagedProblem p = make_problem(s);
      const Fp8KvCache c = quantize_kv_cache(p, f);
      const PagedProblem dq = dequantized_problem(p, c);
      INFO(s.describe() << " " << fp8_format_name(f) << " spread " << spread);
      Row row{f, spread, 0, 0, 0, 0, 0, 0, 0, 0};

      // 1. elements.
      const Tolerance kt = fp8_quantization_tolerance(f, c.scales.k), vt = fp8_quantization_tolerance(f, c.scales.v);
      const int tokens = for_each_read_token(p, [&](int seq, int h, int t, int, int) {
        for (int d = 0; d < p.head_size(); ++d) {
          REQUIRE(within(p.k_at(seq, h, t, d), dq.k_at(seq, h, t, d), kt));
          REQUIRE(within(p.v_at(seq, h, t, d), dq.v_at(seq, h, t, d), vt));
        }
      });
      REQUIRE(tokens == 2741 * 2);

      // 2. logits.
      const TokenTensor l = ref_logits(p), lq = ref_logits(dq);
      const double scale = p.spec.scale();
      double sum_sq = 0, sum_pred = 0;
      std::size_t n_logits = 0;
      for (int seq = 0; seq < p.num_seqs(); ++seq)
        for (int h = 0; h < p.num_heads(); ++h)
          for (int t = 0; t < p.context_len(seq); ++t, ++n_logits) {
            const double dl = lq.at(seq, h, t) - l.at(seq, h, t);
            double var = 0;
            for (int d = 0; d < p.head_size(); ++d) {
              const double q = p.q_at(seq, h, d), k = p.k_at(seq, p.kv_head(h), t, d);
              var += q * q * (kt.rel * kt.rel * k * k + kt.abs * kt.abs) / 3;
            }
            sum_sq += dl * dl;
            sum_pred += scale * scale * var;
            row.max_dl = std::max(row.max_dl, std::fabs(dl));
          }
      REQUIRE(n_logits == 2741u * 8u);
      row.rms_dl = std::sqrt(sum_sq / n_logits);
      row.rms_dl_predicted = std::sqrt(sum_pred / n_logits);
      CHECK(row.rms_dl <= row.rms_dl_predicted);

      // 3. outputs.
      const std::vector<double> ref = ref_output(p), got = ref_output_fp8(p, c), bound = fp8_output_error_bound(p, c);
      REQUIRE(got.size() == ref.size());
      double sum_err = 0, sum_out = 0;
      const std::size_t per_seq = static_cast<std::size_t>(p.num_heads()) * p.head_size();
      for (std::size_t i = 0; i < ref.size(); ++i) {
        const double err = std::fabs(got[i] - ref[i]);
        if (!(err <= bound[i] * (1 + rt.rel) + rt.abs))
          FAIL("element " << i << ": error " << err << " > bound " << bound[i]);
        row.max_err = std::max(row.max_err, err);
        row.worst_err_over_bound = std::max(row.worst_err_over_bound, err / bound[i]);
        // Contexts longer than one token (sequence 0 has one: its output is one V row).
        if (i >= per_seq) row.worst_long = std::max(row.worst_long, err / bound[i]);
        sum_err += err;
        sum_out += std::fabs(ref[i]);
      }
      CHECK(ref.size() == 4u * 8u * 128u);
      row.mean_err = sum_err / ref.size();
      row.mean_out = sum_out / ref.size();
      CHECK(row.mean_err > 0);  // the fp8 reference does read the rounded values
      rows.push_back(row);
    }
  REQUIRE(rows.size() == 6);
  // Half the mantissa bits, twice the rounding: e5m2's logit changes are
  // twice e4m3's at every spread (an rms over 21,928 logits: 1.96-2.03 over
  // 101 random seeds). The outputs follow where the softmax weighs many
  // tokens (spreads 1 and 4: e5m2's mean error 1.46-2.56 times e4m3's over
  // those seeds); at spread 16 a few tokens carry almost all the weight, so
  // the mean output error is those tokens' rounding, and the order of the two
  // formats there is chance (ratios 0.97-3.6), not a property to test.
  int compared = 0;
  for (std::size_t i = 0; i < rows.size(); i += 2, ++compared) {
    INFO("spread " << rows[i].spread);
    REQUIRE(rows[i].f == Fp8Format::e4m3);
    REQUIRE(rows[i + 1].f == Fp8Format::e5m2);
    const double logit_ratio = rows[i + 1].rms_dl / rows[i].rms_dl;
    CHECK(logit_ratio > 1.8);
    CHECK(logit_ratio < 2.2);
    if (rows[i].spread <= 4.0f) CHECK(rows[i + 1].mean_err > rows[i].mean_err);
  }
  CHECK(compared == 3);
  // The figures (printed for the lessons; the checks above are the test).
  std::printf("fp8 KV cache vs fp16 cache: head 128, 8 heads / 2 KV heads, contexts 1,40,700,2000, "
              "scales max|x|/max (fp16 output tolerance %.1e)\n",
              tolerance_for(DType::f16).abs);
  std::printf("%-9s %6s %8s %8s %9s %10s %10s %10s %9s %9s\n", "format", "spread", "max|dl|", "rms dl", "rms pred",
              "max|err|", "mean|err|", "mean|out|", "err/bnd", "(ctx>1)");
  for (const Row& r : rows)
    std::printf("%-9s %6.1f %8.4f %8.4f %9.4f %10.3e %10.3e %10.3e %9.3f %9.3f\n", fp8_format_name(r.f), r.spread,
                r.max_dl, r.rms_dl, r.rms_dl_predicted, r.max_err, r.mean_err, r.mean_out, r.worst_err_over_bound,
                r.worst_long);
}

TEST_CASE("fp8 cache: a problem made with an fp8 kv_dtype is quantize_kv_cache of the same problem in its dtype",
          "[reference][fp8]") {
  int ran = 0;
  for (KvDType kv : {KvDType::fp8_e4m3, KvDType::fp8_e5m2})
    for (DType dt : {DType::f16, DType::bf16})
      for (float ks : {0.0f, 0.02f}) {
        ProblemSpec spec = test::spec_of(dt, 128, 16, 8, 2, {1, 40, 300}, 77 + ran);
        const PagedProblem p = make_problem(spec);
        spec.kv_dtype = kv;
        spec.k_scale = ks;
        spec.v_scale = ks * 1.5f;
        const PagedProblem q = make_problem(spec);
        const Fp8Format f = fp8_format_of(kv);
        const Fp8KvCache c = ks > 0 ? quantize_kv_cache(p, f, {ks, ks * 1.5f}) : quantize_kv_cache(p, f);
        INFO(spec.describe());
        CHECK(q.k_scale == c.scales.k);
        CHECK(q.v_scale == c.scales.v);
        CHECK(q.cache.x == 16);
        CHECK(q.k_bytes == c.k_codes);
        CHECK(q.v_bytes == c.v_codes);
        // The float cache holds the read-back values, bit for bit (NaN where the code is NaN).
        const PagedProblem d = dequantized_problem(p, c);
        std::size_t differ = 0;
        for (int b = 0; b < q.cache.num_blocks; ++b)
          for (int h = 0; h < q.cache.num_kv_heads; ++h)
            for (int dd = 0; dd < q.cache.head_size; ++dd)
              for (int t = 0; t < q.cache.block_size; ++t) {
                const float a = q.k_cache[q.cache.k_offset(b, h, dd, t)], e = d.k_cache[p.cache.k_offset(b, h, dd, t)];
                const float va = q.v_cache[q.cache.v_offset(b, h, dd, t)], ve = d.v_cache[p.cache.v_offset(b, h, dd, t)];
                if (!(a == e || (std::isnan(a) && std::isnan(e)))) ++differ;
                if (!(va == ve || (std::isnan(va) && std::isnan(ve)))) ++differ;
              }
        CHECK(differ == 0);
        ++ran;
      }
  CHECK(ran == 2 * 2 * 2);
}
