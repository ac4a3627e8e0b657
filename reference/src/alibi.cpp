// The reference attention with linear biases and explicit slopes (the
// slopes themselves: pa/core/alibi.hpp).
#include "pa/reference/alibi.hpp"

#include <algorithm>

#include "attention_core.hpp"

namespace pa {

using namespace ref_core;

TokenTensor ref_logits_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_alibi_slopes(slopes, p.spec.num_heads, "ref_logits_alibi");
  TokenTensor tt = empty_token_tensor(p);
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = paged_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    std::copy(r.logits.begin(), r.logits.end(), tt.values.begin() + tt.index(seq, h, 0));
  });
  return tt;
}

std::vector<AttentionState> ref_states_alibi(const PagedProblem& p, const std::vector<float>& slopes, int token_begin,
                                             int token_end) {
  check_alibi_slopes(slopes, p.spec.num_heads, "ref_states_alibi");
  return states_over(p, token_begin, token_end,
                     [&](int seq, int h, int b, int e) { return paged_softmax(p, seq, h, slopes[h], b, e); });
}

std::vector<double> ref_output_alibi(const PagedProblem& p, const std::vector<float>& slopes) {
  check_alibi_slopes(slopes, p.spec.num_heads, "ref_output_alibi");
  std::vector<double> out(out_size(p));
  for_each_row(p, [&](int seq, int h) {
    const Softmaxed r = paged_softmax(p, seq, h, slopes[h], 0, p.context_len(seq));
    const std::vector<double> o = paged_lv(p, seq, h, 0, r);
    for (int d = 0; d < p.spec.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

}  // namespace pa
