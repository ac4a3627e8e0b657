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
  check_alibi_slopes(slopes, p.spec.num_heads, who);
}

}  // namespace

TokenTensor ref_logits_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_slopes(p, slopes, "ref_logits_alibi");
  TokenTensor tt = empty_token_tensor(p);
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = paged_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    std::copy(r.logits.begin(), r.logits.end(), tt.values.begin() + tt.index(seq, h, 0));
  });
  return tt;
}

std::vector<AttentionState> ref_states_alibi(const PagedProblem& p, const std::vector<float>& slopes, int token_begin,
                                             int token_end) {
  check_slopes(p, slopes, "ref_states_alibi");
  return states_over(p, token_begin, token_end,
                     [&](int seq, int h, int b, int e) { return paged_softmax(p, seq, h, slopes[h], b, e); });
}

std::vector<double> ref_output_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_slopes(p, slopes, "ref_output_alibi");
  std::vector<double> out(out_size(p));
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = paged_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    const std::vector<double> o = paged_lv(p, seq, h, 0, r);
    for (int d = 0; d < p.spec.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

}  // namespace pa
