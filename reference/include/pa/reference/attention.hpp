// The CPU reference: dense attention and every stage's expected output
// (DESIGN.md's table), all accumulated in float64 from the exact stored
// values of a PagedProblem. Every paged read goes through the block tables
// (PagedProblem::k_at / v_at), every thread-mapping fact through
// pa/index/mapping.hpp (ThreadMapping of the problem's KernelConfig).
//
// Conventions:
// - scale = spec.scale() = 1/sqrt(head_size); logit(t) = scale * q . k_t,
//   plus ALiBi's bias where the problem has slopes (alibi.hpp).
// - Softmax is the max-subtracted form: p_t = exp(l_t - m) / sum_u exp(l_u - m).
// - Log-sum-exp is in natural log: lse = m + log(sum exp(l - m)).
// - Outputs [seq][head][head_size] use QueryGeometry::out_offset's dense order.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

#include "pa/core/paged_cache.hpp"

namespace pa {

// ---- dense reference ---------------------------------------------------------
// One query head over contiguous K/V: k and v are [context_len] rows of
// `row_stride` floats, the head's values at offset 0..head_size-1 of each row.
// Returns out[head_size]. Optional: the lse (natural log) of the logits, and
// an ALiBi slope (NaN: none; the query is the last of the context_len tokens).
std::vector<double> dense_attention(const float* q, const float* k, const float* v, int context_len,
                                    int head_size, int row_stride, double scale,
                                    double* lse_out = nullptr,
                                    double alibi_slope = std::numeric_limits<double>::quiet_NaN());

// Dense attention for every (seq, head) from make_dense_kv (no block tables):
// [seq][head][head_size]. What the paged reference must equal.
std::vector<double> dense_output(const PagedProblem& p);

// ---- stage 1: Q as read back from shared memory ------------------------------
// For each (seq, head), head_size floats in the kernel's q_vecs order: element
// j = slot * kVecSize + e holds q[qk_vec_dim(g_off, i) + e] where slot =
// q_smem_slot(g_off, i). Layout [seq][head][head_size]. Exact (values are the
// stored dtype values).
std::vector<float> ref_q_smem(const PagedProblem& p);
// The head dimension stored at each q_vecs element (the permutation above).
std::vector<int> q_smem_dim_order(const ProblemSpec& spec);

// ---- per-token tensors --------------------------------------------------------
// [seq][head][token] for token < context_len(seq), ragged over sequences.
struct TokenTensor {
  int num_heads = 0;
  std::vector<int> lens;                 // context length per sequence
  std::vector<std::int64_t> seq_offset;  // first element of each sequence
  std::vector<double> values;

  std::int64_t index(int seq, int head, int token) const {
    return seq_offset[seq] + static_cast<std::int64_t>(head) * lens[seq] + token;
  }
  double at(int seq, int head, int token) const { return values[index(seq, head, token)]; }
  // The (seq, head) row: lens[seq] values.
  const double* row(int seq, int head) const { return values.data() + index(seq, head, 0); }
};

// ---- stage 2: scaled logits -----------------------------------------------------
TokenTensor ref_logits(const PagedProblem& p);

// ---- stage 3: softmax -------------------------------------------------------------
struct SoftmaxRef {
  TokenTensor probs;            // p_t, summing to 1 per (seq, head)
  std::vector<double> max_logit;  // [seq][head]
  std::vector<double> exp_sum;    // [seq][head]: sum_t exp(l_t - max)
};
SoftmaxRef ref_softmax(const PagedProblem& p);

// ---- stage 4: per-warp partial outputs --------------------------------------------
// Warp w of the (seq, head) thread block sums p_t * v_t over the tokens of the
// logical blocks ThreadMapping::warp_block(0, w, iter) assigns it (p_t
// normalized by the whole context's exp-sum). Warps with no block hold zeros.
struct WarpPartials {
  int num_warps = 0, num_heads = 0, head_size = 0;
  std::vector<double> values;  // [seq][head][warp][head_size]
  std::int64_t index(int seq, int head, int warp, int d) const {
    return ((static_cast<std::int64_t>(seq) * num_heads + head) * num_warps + warp) * head_size + d;
  }
};
WarpPartials ref_warp_partials(const PagedProblem& p);
// The warp that handles each logical block of a context of num_blocks blocks
// (from ThreadMapping::warp_block), for the problem's kernel configuration.
std::vector<int> warp_of_logical_block(const ProblemSpec& spec, int num_blocks);

// ---- stage 5: output ------------------------------------------------------------------
std::vector<double> ref_output(const PagedProblem& p);  // [seq][head][head_size]

// ---- stage 6: V2 partitions -------------------------------------------------------------
// Partitions of partition_size tokens (a multiple of block_size; 0 = one
// partition, i.e. v1), laid out by PartitionGeometry with max_partitions =
// num_partitions(max context, partition_size). A partition past a sequence's
// context is empty: out 0, max -inf, sum 0.
struct V2Ref {
  int partition_size = 0;
  int max_partitions = 0;
  PartitionGeometry geom;
  std::vector<double> part_out;  // [seq][head][partition][head_size], normalized within the partition
  std::vector<double> part_max;  // [seq][head][partition]
  std::vector<double> part_sum;  // [seq][head][partition]: sum exp(l - part_max)
  std::vector<double> out;       // [seq][head][head_size], the reduced output
};
V2Ref ref_v2(const PagedProblem& p, int partition_size);
// Same, with spec.partition_size.
V2Ref ref_v2(const PagedProblem& p);

// ---- stage 7: attention states and cascade ---------------------------------------------
// The attention of one query over a set of tokens, as (normalized output,
// log-sum-exp of its scaled logits, natural log). The empty state has
// lse = -inf and out = 0 and is the identity of merge_states.
struct AttentionState {
  std::vector<double> out;
  double lse = -std::numeric_limits<double>::infinity();
  bool empty() const { return lse == -std::numeric_limits<double>::infinity(); }
};
// Merge two states over disjoint token sets: the state over their union.
// Commutative and associative (up to rounding); never NaN for empty inputs.
// Throws std::invalid_argument when both are non-empty with different sizes.
AttentionState merge_states(const AttentionState& a, const AttentionState& b);
// The state of every (seq, head) over tokens [token_begin, token_end) clamped
// to [0, context_len(seq)): index seq * num_heads + head.
std::vector<AttentionState> ref_states(const PagedProblem& p, int token_begin, int token_end);

struct CascadeRef {
  std::vector<AttentionState> prefix;  // tokens [0, shared_prefix_len), per (seq, head)
  std::vector<AttentionState> suffix;  // tokens [shared_prefix_len, context_len)
  std::vector<AttentionState> merged;  // merge(prefix, suffix)
  std::vector<double> out;             // merged outputs, [seq][head][head_size]
  std::vector<double> lse;             // merged lse, [seq][head]
};
CascadeRef ref_cascade(const PagedProblem& p);

// ---- output as a kernel stores it ---------------------------------------------------------
// Rounds float64 results to the stored dtype (via float), the value a correct
// kernel writes (up to accumulation error).
std::vector<float> round_to_dtype(const std::vector<double>& values, DType t);

}  // namespace pa
