// ALiBi slopes and the reference attention with linear biases.
#include "pa/reference/alibi.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "attention_core.hpp"

namespace pa {
namespace {

using namespace ref_core;

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

// Tokens [begin, end) of (seq, head) with the bias, through ref_output's own
// core (attention_core.hpp): the logit is scale * (q . k) plus the bias, so a
// zero slope (adding +-0) leaves every logit, and the output, as ref_output's.
Softmaxed biased_softmax(const PagedProblem& p, int seq, int head, double slope, int begin, int end) {
  const PagedRow row{p, seq, head, p.kv_head(head), begin};
  const double scale = scale_of(p.spec);
  const int ctx = p.context_len(seq);
  return softmax_of_logits(std::max(end - begin, 0), [&](int i) {
    return scale * row.kdot(i) + slope * static_cast<double>(begin + i - ctx + 1);
  });
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
  TokenTensor tt = empty_token_tensor(p);
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = biased_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    std::copy(r.logits.begin(), r.logits.end(), tt.values.begin() + tt.index(seq, h, 0));
  });
  return tt;
}

std::vector<AttentionState> ref_states_alibi(const PagedProblem& p, const std::vector<float>& slopes, int token_begin,
                                             int token_end) {
  check_slopes(p, slopes, "ref_states_alibi");
  return states_over(p, token_begin, token_end,
                     [&](int seq, int h, int b, int e) { return biased_softmax(p, seq, h, slopes[h], b, e); });
}

std::vector<double> ref_output_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_slopes(p, slopes, "ref_output_alibi");
  std::vector<double> out(out_size(p));
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = biased_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    const std::vector<double> o = paged_lv(p, seq, h, 0, r);
    for (int d = 0; d < p.spec.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

}  // namespace pa
