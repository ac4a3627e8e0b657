// Device view of stage 7's merge kernel: two attention states in, the merged
// output (and lse) out. Plain data, built on the host without nvcc.
#pragma once

#include "pa/index/cascade.hpp"
#include "pa/index/dtype.hpp"

namespace pa::kernels {

// Stage 7 merge: out = merge(a, b) elementwise over rows = num_seqs * num_heads.
struct MergeArgs {
  const float* a_out = nullptr;
  const float* a_lse = nullptr;
  const float* b_out = nullptr;
  const float* b_lse = nullptr;
  void* out = nullptr;        // dtype (out_dtype) or float
  DType out_dtype = DType::f32;
  float* out_lse = nullptr;   // optional
  int num_seqs = 0, num_heads = 0, head_size = 0;
  StateGeometry stg;
};

}  // namespace pa::kernels
