// ALiBi's bias on a logit, the one formula the kernels (float), the
// reference (double) and the host trace model use.
//
// Decoding, the query is the sequence's last token (position context_len - 1),
// and vLLM adds to the scaled logit of token t
//   bias = slope[head] * (t - context_len + 1),
// 0 for the last token and -slope * d for a token d positions back. Softmax
// is shift invariant, so this is the paper's slope * (t - query position).
// The position depends on the token's place in the whole context: a kernel
// that attends a range (a V2 partition, a split, the cascade's prefix or
// suffix) still measures it from the sequence's end.
#pragma once
#include "pa/index/hd.hpp"

namespace pa {

// The relative position t - context_len + 1 (<= 0 inside the context). An
// int: exact in float up to 2^24 tokens.
PA_HD constexpr int alibi_position(int token, int context_len) { return token - context_len + 1; }

template <class F>
PA_HD constexpr F alibi_bias(F slope, int token, int context_len) {
  return slope * static_cast<F>(alibi_position(token, context_len));
}

}  // namespace pa
