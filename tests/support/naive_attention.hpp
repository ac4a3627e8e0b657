// Attention recomputed naively through PagedProblem's public accessors only,
// written apart from the reference (pa/reference), so that a test can check
// the reference against something that shares none of its code. bias(seq,
// head, token, context_len) is added to each logit (0 for plain attention;
// ALiBi's -slope * distance); the logit's scale is spec.scale() (the float
// 1/sqrt(head_size) the kernels and the reference use).
// Output [seq][head][head_size].
#pragma once
#include <algorithm>
#include <cmath>
#include <vector>

#include "pa/core/paged_cache.hpp"

namespace pa::test {

template <class Bias>
std::vector<double> naive_output(const PagedProblem& p, Bias&& bias) {
  const auto& s = p.spec;
  std::vector<double> out(static_cast<std::size_t>(p.num_seqs()) * s.num_heads * s.head_size);
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < s.num_heads; ++h) {
      const int kvh = h / (s.num_heads / s.num_kv_heads), c = p.context_len(seq);
      std::vector<double> l(c);
      for (int t = 0; t < c; ++t) {
        double acc = 0;
        for (int d = 0; d < s.head_size; ++d) acc += double(p.q_at(seq, h, d)) * p.k_at(seq, kvh, t, d);
        l[t] = double(s.scale()) * acc + bias(seq, h, t, c);
      }
      const double m = *std::max_element(l.begin(), l.end());
      double sum = 0;
      for (double x : l) sum += std::exp(x - m);
      for (int d = 0; d < s.head_size; ++d) {
        double acc = 0;
        for (int t = 0; t < c; ++t) acc += std::exp(l[t] - m) / sum * p.v_at(seq, kvh, t, d);
        out[(static_cast<std::size_t>(seq) * s.num_heads + h) * s.head_size + d] = acc;
      }
    }
  return out;
}

inline std::vector<double> naive_output(const PagedProblem& p) {
  return naive_output(p, [](int, int, int, int) { return 0.0; });
}

}  // namespace pa::test
