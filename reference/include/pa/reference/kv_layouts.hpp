// The paged KV cache of a problem in any layout (pa/index/kv_layout.hpp:
// vLLM's, NHD, HND) and under either page-table form (padded block tables,
// CSR), and the reference attention over any of them. The values are the
// problem's own (p.k_cache / p.v_cache), moved, not recomputed; the attention
// is the reference's arithmetic in the reference's order, so every layout and
// table form gives exactly ref_output(p).
#pragma once
#include <functional>
#include <vector>

#include "pa/core/kv_layout_cache.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/index/kv_layout.hpp"

namespace pa {

// A cache in one layout over the problem's pages (same page numbers).
struct LayoutCache {
  KvLayoutGeometry geo;
  std::vector<float> k;  // the K tensor; for nhd / hnd the one K/V tensor
  std::vector<float> v;  // the V tensor (vllm only; empty otherwise)
  const float* k_data() const { return k.data(); }
  const float* v_data() const { return geo.one_tensor() ? k.data() : v.data(); }
};
LayoutCache to_layout(const PagedProblem& p, KvLayout layout);
// The same cache in another layout (any to any; every element moved once).
LayoutCache convert_layout(const LayoutCache& from, KvLayout to);

// CsrTables, csr_from_block_tables and block_tables_from_csr: pa/core/kv_layout_cache.hpp.

// Attention output [seq][head][head_size] (p.query.out_offset) of p's queries
// over `cache`: sequence s attends tokens 0 .. lens[s] - 1, token t on page
// page_of(s, t), slot t % block_size. A sequence of length 0 gets zeros.
// Throws std::invalid_argument when lens does not hold one length per sequence.
std::vector<double> ref_output_paged(const PagedProblem& p, const LayoutCache& cache,
                                     const std::function<int(int seq, int token)>& page_of,
                                     const std::vector<int>& lens);

}  // namespace pa
