// The reference's attention core, shared by attention.cpp (every stage's
// expected output, with ALiBi's bias where the problem has slopes) and
// alibi.cpp (explicit slopes), so that the softmax and the LV sum are written once
// and every variant agrees with ref_output bit for bit where its inputs do.
// Internal to reference/src.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/core/parallel.hpp"
#include "pa/index/alibi.hpp"
#include "pa/reference/attention.hpp"

namespace pa::ref_core {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One attention core for both the paged and the dense reference, so that the
// two differ only in how they find K and V (and must agree bit for bit).
struct Softmaxed {
  std::vector<double> logits;  // scaled (and biased, where a variant adds a bias)
  double max = kNegInf;
  double sum = 0.0;            // sum exp(l - max)
};

// logit(t): token t's final logit (double). The max, then the sum of
// exp(l - max), in token order.
template <class Logit>
Softmaxed softmax_of_logits(int n, Logit&& logit) {
  Softmaxed r;
  r.logits.resize(n);
  for (int t = 0; t < n; ++t) {
    r.logits[t] = logit(t);
    r.max = std::max(r.max, r.logits[t]);
  }
  for (int t = 0; t < n; ++t) r.sum += std::exp(r.logits[t] - r.max);
  return r;
}

// vadd(t, w, out) adds w * v_t to out.
template <class VAdd>
std::vector<double> lv_core(const Softmaxed& sm, int head_size, VAdd&& vadd) {
  std::vector<double> out(head_size, 0.0);
  const int n = static_cast<int>(sm.logits.size());
  for (int t = 0; t < n; ++t) vadd(t, std::exp(sm.logits[t] - sm.max) / sm.sum, out);
  return out;
}

inline double scale_of(const ProblemSpec& s) { return static_cast<double>(s.scale()); }

// Paged accessors for tokens [begin, begin + n) of (seq, head): each token's
// physical block comes from the block table, each element's offset from
// CacheGeometry.
struct PagedRow {
  const PagedProblem& p;
  int seq, head, kv_head, begin;
  double kdot(int i) const {
    const int token = begin + i, bs = p.spec.block_size;
    const int phys = p.physical_block(seq, token / bs), t = token % bs;
    double acc = 0.0;
    for (int d = 0; d < p.spec.head_size; ++d) {
      acc += static_cast<double>(p.q_at(seq, head, d)) *
             static_cast<double>(p.k_cache[p.cache.k_offset(phys, kv_head, d, t)]);
    }
    return acc;
  }
  void vadd(int i, double w, std::vector<double>& out) const {
    const int token = begin + i, bs = p.spec.block_size;
    const int phys = p.physical_block(seq, token / bs), t = token % bs;
    for (int d = 0; d < p.spec.head_size; ++d) {
      out[d] += w * static_cast<double>(p.v_cache[p.cache.v_offset(phys, kv_head, d, t)]);
    }
  }
};

// The ALiBi slope of a head: the problem's, or none (a NaN, which no slope is).
inline double alibi_slope_of(const PagedProblem& p, int head) {
  return p.has_alibi() ? static_cast<double>(p.alibi_slopes[head]) : std::numeric_limits<double>::quiet_NaN();
}

// Token `token`'s final logit from its scaled dot product: with an ALiBi
// slope (not NaN) plus pa/index/alibi.hpp's bias, measured from the end of a
// context of context_len tokens; a zero slope adds +-0 and leaves it as it was.
// The one place every reference (paged, dense, other layouts) adds the bias.
inline double biased_logit(double scaled, double slope, int token, int context_len) {
  return std::isnan(slope) ? scaled : scaled + alibi_bias(slope, token, context_len);
}

// Tokens [begin, end) of (seq, head): the softmax of their logits (with the
// slope's bias), and the LV sum with those probabilities.
inline Softmaxed paged_softmax(const PagedProblem& p, int seq, int head, double slope, int begin, int end) {
  const PagedRow row{p, seq, head, p.kv_head(head), begin};
  const double scale = scale_of(p.spec);
  const int ctx = p.context_len(seq);
  return softmax_of_logits(std::max(end - begin, 0),
                           [&](int i) { return biased_logit(scale * row.kdot(i), slope, begin + i, ctx); });
}
inline Softmaxed paged_softmax(const PagedProblem& p, int seq, int head, int begin, int end) {
  return paged_softmax(p, seq, head, alibi_slope_of(p, head), begin, end);
}

inline std::vector<double> paged_lv(const PagedProblem& p, int seq, int head, int begin, const Softmaxed& sm) {
  const PagedRow row{p, seq, head, p.kv_head(head), begin};
  return lv_core(sm, p.spec.head_size, [&](int i, double w, std::vector<double>& out) { row.vadd(i, w, out); });
}

// A [seq][head][token] tensor of zeros, ragged over the context lengths.
inline TokenTensor empty_token_tensor(const PagedProblem& p) {
  TokenTensor tt;
  tt.num_heads = p.spec.num_heads;
  tt.lens = p.context_lens;
  std::int64_t off = 0;
  for (int c : p.context_lens) {
    tt.seq_offset.push_back(off);
    off += static_cast<std::int64_t>(c) * p.spec.num_heads;
  }
  tt.values.assign(static_cast<std::size_t>(off), 0.0);
  return tt;
}

// Runs f(seq, head) for every row, in parallel (rows write disjoint outputs).
template <class F>
void for_each_row(const PagedProblem& p, F&& f) {
  const int nh = p.spec.num_heads;
  detail::parallel_for(static_cast<std::int64_t>(p.num_seqs()) * nh,
                       [&](std::int64_t i) { f(static_cast<int>(i / nh), static_cast<int>(i % nh)); });
}

// The attention state of every (seq, head) over tokens [token_begin,
// token_end) clamped to its context (index seq * num_heads + head): the empty
// state (out 0, lse -inf) where the range holds no token, else the state of
// the softmax softmax_of(seq, head, b, e) returns (the row's logits over
// [b, e)) and its LV sum.
template <class SoftmaxOf>
std::vector<AttentionState> states_over(const PagedProblem& p, int token_begin, int token_end,
                                        SoftmaxOf&& softmax_of) {
  std::vector<AttentionState> states(static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads);
  for_each_row(p, [&](int seq, int h) {
    const int b = std::clamp(token_begin, 0, p.context_len(seq));
    const int e = std::clamp(token_end, b, p.context_len(seq));
    AttentionState& st = states[static_cast<std::size_t>(seq) * p.spec.num_heads + h];
    if (e <= b) {
      st.out.assign(p.spec.head_size, 0.0);
      return;  // lse stays -inf
    }
    const Softmaxed sm = softmax_of(seq, h, b, e);
    st.out = paged_lv(p, seq, h, b, sm);
    st.lse = sm.max + std::log(sm.sum);
  });
  return states;
}

inline std::size_t out_size(const PagedProblem& p) {
  return static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads * p.spec.head_size;
}

}  // namespace pa::ref_core
