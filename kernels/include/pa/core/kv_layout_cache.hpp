// A problem's paged cache in any layout (pa/index/kv_layout.hpp: vLLM's, NHD,
// HND) and its page table in either form (padded, CSR): the one conversion
// of each, for the kernels' uploads (DeviceInputs) and the reference
// (reference/kv_layouts.hpp, which attends over the converted floats).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/kv_layout.hpp"

namespace pa {

// Every element (page, kv head, d, t) of the pool moved from layout `from`
// (k, v: its K and V tensors; the same pointer for nhd / hnd) to layout `to`
// (k_out, v_out likewise), elem_bytes bytes each: floats for the reference,
// stored bytes for an upload. from.cache and to.cache describe the same pool.
inline void move_kv_elements(const KvLayoutGeometry& from, const void* k, const void* v, const KvLayoutGeometry& to,
                             void* k_out, void* v_out, int elem_bytes) {
  const auto* ks = static_cast<const unsigned char*>(k);
  const auto* vs = static_cast<const unsigned char*>(v);
  auto* kd = static_cast<unsigned char*>(k_out);
  auto* vd = static_cast<unsigned char*>(v_out);
  const CacheGeometry& g = to.cache;
  for (int page = 0; page < g.num_blocks; ++page)
    for (int kvh = 0; kvh < g.num_kv_heads; ++kvh)
      for (int d = 0; d < g.head_size; ++d)
        for (int t = 0; t < g.block_size; ++t) {
          std::memcpy(kd + to.k_offset(page, kvh, d, t) * elem_bytes, ks + from.k_offset(page, kvh, d, t) * elem_bytes,
                      elem_bytes);
          std::memcpy(vd + to.v_offset(page, kvh, d, t) * elem_bytes, vs + from.v_offset(page, kvh, d, t) * elem_bytes,
                      elem_bytes);
        }
}

// The problem's stored K and V bytes (k_bytes, v_bytes) in `layout`: for
// vllm the two tensors as they are; for nhd / hnd the one K/V tensor in k
// (v empty).
struct KvLayoutBytes {
  KvLayoutGeometry geo;
  std::vector<std::uint8_t> k, v;
};
KvLayoutBytes kv_bytes_in_layout(const PagedProblem& p, KvLayout layout);

// A CSR page table and its arrays (pa/index/kv_layout.hpp, CsrPageTable).
struct CsrTables {
  std::vector<int> indptr, indices, last_page_len;
  CsrPageTable view(int page_size) const { return {indptr.data(), indices.data(), last_page_len.data(), page_size}; }
};
// The problem's block tables as CSR: each sequence's first ceil(context / block) pages, in order.
CsrTables csr_from_block_tables(const PagedProblem& p);
// CSR as a padded table [seqs, max_blocks_per_seq] (unused entries kNoBlock).
// Throws std::invalid_argument when a sequence has more pages than max_blocks_per_seq.
std::vector<int> block_tables_from_csr(const CsrTables& t, int max_blocks_per_seq);

}  // namespace pa
