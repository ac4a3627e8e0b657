// ALiBi, attention with linear biases (Press, Smith, Lewis, "Train Short, Test
// Long", ICLR 2022): a model without rotary or learned position embeddings
// gets position into attention by adding to each logit a penalty that grows
// linearly with the distance between the query and the key, at a different
// rate (slope) per query head.
//
// Decoding, the query is the sequence's last token, so with vLLM's convention
//   logit(t) = scale * q . k_t + slope[head] * (t - context_len + 1)
// the last token gets no bias and a token d positions back gets -slope * d.
// Softmax is shift invariant, so this equals the paper's
// slope * (t - query position) form. The slope belongs to the query head, not
// the KV head: under GQA the heads that share a KV head still differ.
//
// A problem with slopes (PagedProblem::alibi_slopes, spec.alibi) gets the bias
// in every reference function of attention.hpp: ref_logits, ref_softmax,
// ref_output, ref_v2, ref_states, ref_cascade all attend with it. The
// functions below take the slopes explicitly instead (they replace the
// problem's): everything else is ref_output's convention, in float64, in the
// same order, so all slopes zero gives exactly ref_output without ALiBi.
// ALiBi over an fp8 cache: pass dequantized_problem(p, cache) (fp8_cache.hpp).
#pragma once
#include <vector>

#include "pa/core/alibi.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/reference/attention.hpp"

namespace pa {

// The slopes: alibi_slopes(num_heads) (pa/core/alibi.hpp).

// Scaled logits with the bias, [seq][head][token] (ref_logits's layout). The
// slope arguments below throw std::invalid_argument unless there is one finite
// slope per query head.
TokenTensor ref_logits_alibi(const PagedProblem& p, const std::vector<float>& slopes);

// The attention state of every (seq, head) over tokens [token_begin,
// token_end) clamped to the context (ref_states's convention). The bias of a
// token depends on its position in the whole context, not in the range, so
// merging the states of a split context gives the output over all of it.
std::vector<AttentionState> ref_states_alibi(const PagedProblem& p, const std::vector<float>& slopes, int token_begin,
                                             int token_end);

// The attention output [seq][head][head_size] with the bias.
std::vector<double> ref_output_alibi(const PagedProblem& p, const std::vector<float>& slopes);

}  // namespace pa
