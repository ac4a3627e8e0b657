// ALiBi slopes and the reference attention with linear biases.
#include "pa/reference/alibi.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "pa/core/parallel.hpp"

namespace pa {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

void check_slopes(const PagedProblem& p, const std::vector<float>& slopes, const char* who) {
  if (slopes.size() != static_cast<std::size_t>(p.spec.num_heads)) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(slopes.size()) + " slopes for " +
                                std::to_string(p.spec.num_heads) +
                                " query heads (accepted: one slope per query head)");
  }
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    if (!std::isfinite(slopes[h])) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(slopes[h]));
      throw std::invalid_argument(std::string(who) + ": slope of head " + std::to_string(h) + " is " + buf +
                                  " (accepted: finite values)");
    }
  }
}

// Tokens [begin, end) of (seq, head) with the bias, in ref_output's order:
// q . k summed over d in float64, times the scale, plus the bias; then the
// max and the sum of exp(l - max) in token order.
struct BiasedRow {
  int begin = 0;
  std::vector<double> logits;
  double max = kNegInf;
  double sum = 0.0;
};

BiasedRow biased_row(const PagedProblem& p, int seq, int head, double slope, int begin, int end) {
  BiasedRow r;
  r.begin = begin;
  const double scale = static_cast<double>(p.spec.scale());
  const int kvh = p.kv_head(head), ctx = p.context_len(seq);
  for (int t = begin; t < end; ++t) {
    double acc = 0.0;
    for (int d = 0; d < p.spec.head_size; ++d)
      acc += static_cast<double>(p.q_at(seq, head, d)) * static_cast<double>(p.k_at(seq, kvh, t, d));
    // A zero slope adds +-0, which leaves every logit as it was.
    const double l = scale * acc + slope * static_cast<double>(t - ctx + 1);
    r.logits.push_back(l);
    r.max = std::max(r.max, l);
  }
  for (double l : r.logits) r.sum += std::exp(l - r.max);
  return r;
}

std::vector<double> row_output(const PagedProblem& p, int seq, int head, const BiasedRow& r) {
  std::vector<double> out(p.spec.head_size, 0.0);
  const int kvh = p.kv_head(head);
  for (std::size_t i = 0; i < r.logits.size(); ++i) {
    const double w = std::exp(r.logits[i] - r.max) / r.sum;
    const int t = r.begin + static_cast<int>(i);
    for (int d = 0; d < p.spec.head_size; ++d) out[d] += w * static_cast<double>(p.v_at(seq, kvh, t, d));
  }
  return out;
}

template <class F>
void for_each_row(const PagedProblem& p, F&& f) {
  const int nh = p.spec.num_heads;
  detail::parallel_for(static_cast<std::int64_t>(p.num_seqs()) * nh,
                       [&](std::int64_t i) { f(static_cast<int>(i / nh), static_cast<int>(i % nh)); });
}

}  // namespace

std::vector<float> alibi_slopes(int num_heads) {
  if (num_heads < 1) {
    throw std::invalid_argument("alibi_slopes: " + std::to_string(num_heads) +
                                " heads (accepted: at least 1)");
  }
  int c = 1;  // the largest power of two <= num_heads
  while (c * 2 <= num_heads) c *= 2;
  std::vector<float> slopes;
  for (int i = 1; i <= c; ++i) slopes.push_back(static_cast<float>(std::exp2(-8.0 * i / c)));
  for (int i = 1; static_cast<int>(slopes.size()) < num_heads; i += 2)
    slopes.push_back(static_cast<float>(std::exp2(-8.0 * i / (2 * c))));
  return slopes;
}

TokenTensor ref_logits_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_slopes(p, slopes, "ref_logits_alibi");
  TokenTensor tt;
  tt.num_heads = p.spec.num_heads;
  tt.lens = p.context_lens;
  std::int64_t off = 0;
  for (int c : p.context_lens) {
    tt.seq_offset.push_back(off);
    off += static_cast<std::int64_t>(c) * p.spec.num_heads;
  }
  tt.values.assign(static_cast<std::size_t>(off), 0.0);
  for_each_row(p, [&](int seq, int h) {
    const BiasedRow r = biased_row(p, seq, h, slopes[h], 0, p.context_len(seq));
    std::copy(r.logits.begin(), r.logits.end(), tt.values.begin() + tt.index(seq, h, 0));
  });
  return tt;
}

std::vector<AttentionState> ref_states_alibi(const PagedProblem& p, const std::vector<float>& slopes, int token_begin,
                                             int token_end) {
  check_slopes(p, slopes, "ref_states_alibi");
  std::vector<AttentionState> states(static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads);
  for_each_row(p, [&](int seq, int h) {
    const int b = std::clamp(token_begin, 0, p.context_len(seq));
    const int e = std::clamp(token_end, b, p.context_len(seq));
    AttentionState& st = states[static_cast<std::size_t>(seq) * p.spec.num_heads + h];
    if (e <= b) {
      st.out.assign(p.spec.head_size, 0.0);
      return;  // the empty state: lse stays -inf
    }
    const BiasedRow r = biased_row(p, seq, h, slopes[h], b, e);
    st.out = row_output(p, seq, h, r);
    st.lse = r.max + std::log(r.sum);
  });
  return states;
}

std::vector<double> ref_output_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_slopes(p, slopes, "ref_output_alibi");
  std::vector<double> out(static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads * p.spec.head_size);
  for_each_row(p, [&](int seq, int h) {
    const BiasedRow r = biased_row(p, seq, h, slopes[h], 0, p.context_len(seq));
    const std::vector<double> o = row_output(p, seq, h, r);
    for (int d = 0; d < p.spec.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

}  // namespace pa
