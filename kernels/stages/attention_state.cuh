// The attention state and its merge: the one type that stages 6, 7 and 8
// (and the merge across GPUs) combine partial attention with.
//
// A query's attention over a token set T is summed up by its STATE: the
// output normalized over T, and T's softmax statistics, m = the largest logit
// and l = sum_t b^(logit_t - m), whose log-sum-exp lse = m + log_b l carries
// both in one float (how states travel between kernels: natural log). The
// empty set is (out 0, m -inf, l 0, lse -inf). Two states over disjoint sets
// merge into the state over their union: with M >= both maxima,
//   w_a = b^(m_a - M) l_a,  w_b = b^(m_b - M) l_b,
//   out = (w_a out_a + w_b out_b) / (w_a + w_b),  lse = M + log_b(w_a + w_b),
// and any number of states merge the same way (one M, one sum).
//
// Stage 3 computes a set's (m, l) in base e (softmax_block). Who merges what:
//   stage 6's reduce: the partitions' (part_max, part_sum), base e;
//   stage 7's merge: the prefix and suffix states (lse), base e;
//   stage 8's warp and split merges: its warps' and splits' (max, sum) in
//     base 2 (its logits are pre-scaled by log2 e, so b^x is one ex2);
//   the merge across GPUs (07_shard_merge.cuh): the devices' states (lse).
// Base e uses the accurate expf and logf: every merge here is memory bound.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

namespace pa::kernels {

enum class LogBase { e, two };

// The change of base between them: e^x = 2^(x kLog2e) (kernels that work in
// base 2 pre-scale their logits by it), and a base-2 max or lse times kLn2 is
// in natural log (how states leave those kernels).
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

template <LogBase B>
__device__ __forceinline__ float exp_b(float x) {
  if constexpr (B == LogBase::two) return exp2f(x);
  else return expf(x);
}
template <LogBase B>
__device__ __forceinline__ float log_b(float x) {
  if constexpr (B == LogBase::two) return log2f(x);
  else return logf(x);
}

// b^(m - M): the factor that moves a set's sum (and its output) from its own
// max m to a common max M >= m. M finite; an empty set (m = -inf) gets 0.
template <LogBase B>
__device__ __forceinline__ float rescale(float m, float M) {
  return exp_b<B>(m - M);
}

// A token set's softmax statistics in base B (stage 3's softmax computes
// them, in base e).
template <LogBase B = LogBase::e>
struct SoftmaxStats {
  float max;  // m, the largest logit; -inf for the empty set
  float sum;  // l, the sum of b^(logit - m); 0 for the empty set

  // The sum moved to M: b^(m - M) l, and 0 for the empty set whatever M is
  // (never NaN, also when every set is empty and M is -inf).
  __device__ __forceinline__ float sum_at(float M) const {
    return (max == -INFINITY || !(sum > 0.f)) ? 0.f : exp_b<B>(max - M) * sum;
  }
  // m + log_b l; -inf for the empty set with no test (-inf + log 0 is
  // -inf), and a set that holds a token has l >= 1.
  __device__ __forceinline__ float lse() const { return max + log_b<B>(sum); }
};

// The merge of two states given by their lse (natural log): each one's share
// of the union, w_a + w_b = 1 unless both are empty, and the union's lse.
struct MergeWeights {
  float wa, wb, lse;
};
__device__ __forceinline__ MergeWeights merge_weights(float la, float lb) {
  const float m = fmaxf(la, lb);
  if (m == -INFINITY) return {0.f, 0.f, -INFINITY};
  const float ea = SoftmaxStats<>{la, 1.f}.sum_at(m);  // a state of lse l is (max l, sum 1)
  const float eb = SoftmaxStats<>{lb, 1.f}.sum_at(m);
  const float s = ea + eb;  // >= 1: the larger one is e^0
  return {ea / s, eb / s, SoftmaxStats<>{m, s}.lse()};
}

// w x and w x + r, four elements of a state row at a time: the merges'
// weighted sums (a state of weight 0 is never loaded, so its row may hold
// anything, even NaN).
__device__ __forceinline__ float4 scaled4(float w, float4 x) {
  return make_float4(w * x.x, w * x.y, w * x.z, w * x.w);
}
__device__ __forceinline__ float4 fma4(float w, float4 x, float4 r) {
  return make_float4(fmaf(w, x.x, r.x), fmaf(w, x.y, r.y), fmaf(w, x.z, r.z), fmaf(w, x.w, r.w));
}
__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

}  // namespace pa::kernels
