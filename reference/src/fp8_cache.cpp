// The KV cache in fp8 with per-tensor scales, and the reference over it.
#include "pa/reference/fp8_cache.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "pa/core/parallel.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/reference/attention.hpp"

namespace pa {
namespace {

// One byte per element: 16 of them fill the 16-byte chunk of the K layout.
constexpr int kFp8X = 16;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void check_scale(const char* name, float s) {
  if (!(s > 0.0f) || !std::isfinite(s)) {
    throw std::invalid_argument(std::string("quantize_kv_cache: ") + name + " " + num(s) +
                                " is not accepted (accepted: finite and > 0)");
  }
}

// f(physical block, kv head, d, t) for every element of the pool, blocks in parallel.
template <class F>
void for_each_element(const CacheGeometry& g, F&& f) {
  detail::parallel_for(g.num_blocks, [&](std::int64_t b) {
    for (int h = 0; h < g.num_kv_heads; ++h)
      for (int d = 0; d < g.head_size; ++d)
        for (int t = 0; t < g.block_size; ++t) f(static_cast<int>(b), h, d, t);
  });
}

void check_same_pool(const PagedProblem& p, const Fp8KvCache& c, const char* who) {
  const CacheGeometry& a = p.cache;
  const CacheGeometry& b = c.cache;
  if (a.num_blocks != b.num_blocks || a.num_kv_heads != b.num_kv_heads || a.head_size != b.head_size ||
      a.block_size != b.block_size || b.x != kFp8X ||
      c.k_codes.size() != static_cast<std::size_t>(b.total_elems()) ||
      c.v_codes.size() != static_cast<std::size_t>(b.total_elems())) {
    throw std::invalid_argument(std::string(who) + ": the fp8 cache (" + std::to_string(b.num_blocks) + " blocks, " +
                                std::to_string(b.num_kv_heads) + " kv heads, head size " +
                                std::to_string(b.head_size) + ", block size " + std::to_string(b.block_size) +
                                ", x " + std::to_string(b.x) + ") is not the problem's pool (" +
                                std::to_string(a.num_blocks) + ", " + std::to_string(a.num_kv_heads) + ", " +
                                std::to_string(a.head_size) + ", " + std::to_string(a.block_size) +
                                ", x 16); accepted: quantize_kv_cache of this problem");
  }
}

}  // namespace

Fp8Scales fp8_scales_for(const PagedProblem& p, Fp8Format f) {
  const KvMaxAbs m = kv_read_max_abs(p);
  return {fp8_scale_for(m.k, f), fp8_scale_for(m.v, f)};
}

Fp8KvCache quantize_kv_cache(const PagedProblem& p, Fp8Format f, Fp8Scales scales) {
  check_scale("k_scale", scales.k);
  check_scale("v_scale", scales.v);
  if (p.spec.head_size % kFp8X != 0) {
    throw std::invalid_argument("quantize_kv_cache: head size " + std::to_string(p.spec.head_size) +
                                " is not accepted for an fp8 cache (accepted: a multiple of 16, the fp8 K layout's x)");
  }
  Fp8KvCache c;
  c.format = f;
  c.scales = scales;
  c.cache = p.cache;
  c.cache.x = kFp8X;
  Fp8CacheCodes codes = fp8_encode_cache(p.cache, p.k_cache, p.v_cache, c.cache, f, scales.k, scales.v);
  c.k_codes = std::move(codes.k);
  c.v_codes = std::move(codes.v);
  return c;
}

Fp8KvCache quantize_kv_cache(const PagedProblem& p, Fp8Format f) {
  return quantize_kv_cache(p, f, fp8_scales_for(p, f));
}

PagedProblem dequantized_problem(const PagedProblem& p, const Fp8KvCache& c) {
  check_same_pool(p, c, "dequantized_problem");
  PagedProblem d = p;
  d.k_bytes.clear();
  d.v_bytes.clear();
  for_each_element(p.cache, [&](int b, int h, int dim, int t) {
    d.k_cache[p.cache.k_offset(b, h, dim, t)] = c.k_value(b, h, dim, t);
    d.v_cache[p.cache.v_offset(b, h, dim, t)] = c.v_value(b, h, dim, t);
  });
  return d;
}

std::vector<double> ref_output_fp8(const PagedProblem& p, const Fp8KvCache& c) {
  return ref_output(dequantized_problem(p, c));
}

std::vector<double> fp8_output_error_bound(const PagedProblem& p, const Fp8KvCache& c) {
  check_same_pool(p, c, "fp8_output_error_bound");
  // The element bound holds only inside the format's range at each scale. A
  // scale from fp8_scale_for is itself rounded, so the largest element may
  // lie a float rounding (2^-24 relative per rounding) above max * scale;
  // that much still rounds to the largest code within the element bound.
  constexpr double kRoundingSlack = 1.0 + 2.384185791015625e-07;  // 1 + 2^-22
  const double kmax = static_cast<double>(fp8_max_finite(c.format)) * c.scales.k * kRoundingSlack;
  const double vmax = static_cast<double>(fp8_max_finite(c.format)) * c.scales.v * kRoundingSlack;
  for_each_read_element(p, [&](int phys, int h, int d, int t) {
    const double k = p.k_cache[p.cache.k_offset(phys, h, d, t)], v = p.v_cache[p.cache.v_offset(phys, h, d, t)];
    if (!(std::fabs(k) <= kmax) || !(std::fabs(v) <= vmax)) {
      throw std::invalid_argument("fp8_output_error_bound: element k " + num(k) + ", v " + num(v) +
                                  " lies beyond the fp8 range at k_scale " + num(c.scales.k) + ", v_scale " +
                                  num(c.scales.v) + " (accepted: |k| <= " + num(kmax) + ", |v| <= " + num(vmax) +
                                  ", e.g. with fp8_scales_for)");
    }
  });
  const PagedProblem dq = dequantized_problem(p, c);
  const TokenTensor logits = ref_logits(p), logits_q = ref_logits(dq);
  const SoftmaxRef sm = ref_softmax(p), sm_q = ref_softmax(dq);
  const std::vector<double> out = ref_output(p);
  const Tolerance vtol = fp8_quantization_tolerance(c.format, c.scales.v);
  std::vector<double> bound(out.size(), 0.0);
  const int nh = p.spec.num_heads, hs = p.spec.head_size;
  detail::parallel_for(static_cast<std::int64_t>(p.num_seqs()) * nh, [&](std::int64_t row) {
    const int seq = static_cast<int>(row / nh), h = static_cast<int>(row % nh), n = p.context_len(seq);
    const int kvh = p.kv_head(h);
    double dl_min = INFINITY, dl_max = -INFINITY;
    for (int t = 0; t < n; ++t) {
      const double dl = logits_q.at(seq, h, t) - logits.at(seq, h, t);
      dl_min = std::min(dl_min, dl);
      dl_max = std::max(dl_max, dl);
    }
    const double weight_change = std::expm1(dl_max - dl_min);  // |p'_t - p_t| <= this * p_t
    for (int d = 0; d < hs; ++d) {
      const double o = out[p.query.out_offset(seq, h, d)];
      double v_term = 0.0, w_term = 0.0;
      for (int t = 0; t < n; ++t) {
        const double v = p.v_at(seq, kvh, t, d);
        v_term += sm_q.probs.at(seq, h, t) * (vtol.abs + vtol.rel * std::fabs(v));
        w_term += sm.probs.at(seq, h, t) * std::fabs(v - o);
      }
      bound[p.query.out_offset(seq, h, d)] = v_term + weight_change * w_term;
    }
  });
  return bound;
}

}  // namespace pa
