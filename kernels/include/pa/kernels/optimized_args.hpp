// Stage 8's arguments from the launch shape every stage shares (StageArgs):
// the one place they are built, for pa-lab run, pa-bench, the cascade's
// suffix, trace recording and the tests. Header-only, plain C++.
#pragma once
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/stage_args.hpp"

namespace pa::kernels {

// Stage 8 over the problem of `base` (its inputs and its `out`), attending
// tokens [first_token, context) of each sequence (the cascade's suffix uses
// first_token = the prefix length).
inline OptimizedArgs optimized_args(const StageArgs& base, int first_token = 0) {
  OptimizedArgs o;
  o.out = base.out;
  o.q = base.q;
  o.k_cache = base.k_cache;
  o.v_cache = base.v_cache;
  o.kv_layout = base.kv_layout;
  o.block_tables = base.block_tables;
  o.context_lens = base.context_lens;
  o.kv_indptr = base.kv_indptr;
  o.kv_last_page_len = base.kv_last_page_len;
  o.alibi_slopes = base.alibi_slopes;
  o.dtype = base.dtype;
  o.kv_dtype = base.kv_dtype;
  o.k_scale = base.k_scale;
  o.v_scale = base.v_scale;
  o.head_size = base.head_size;
  o.block_size = base.block_size;
  o.num_seqs = base.num_seqs;
  o.num_heads = base.num_heads;
  o.num_kv_heads = base.num_kv_heads;
  o.q_stride = base.qg.q_stride;
  o.max_blocks_per_seq = base.btg.max_blocks_per_seq;
  o.num_blocks = base.cg.num_blocks;
  o.scale = base.scale;
  o.max_context_len = base.max_context_len;
  o.host_context_lens = base.host_context_lens;
  o.first_token = first_token;
  return o;
}

}  // namespace pa::kernels
