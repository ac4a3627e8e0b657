// The cache and page-table conversions of kv_layout_cache.hpp.
#include "pa/core/kv_layout_cache.hpp"

#include <stdexcept>
#include <string>

namespace pa {

KvLayoutBytes kv_bytes_in_layout(const PagedProblem& p, KvLayout layout) {
  KvLayoutBytes b;
  b.geo = KvLayoutGeometry{layout, p.cache};
  if (layout == KvLayout::vllm) {
    b.k = p.k_bytes;
    b.v = p.v_bytes;
    return b;
  }
  const int eb = kv_elem_bytes(p.spec.dtype, p.spec.kv_dtype);
  b.k.assign(static_cast<std::size_t>(b.geo.k_tensor_elems()) * eb, 0);
  move_kv_elements(KvLayoutGeometry{KvLayout::vllm, p.cache}, p.k_bytes.data(), p.v_bytes.data(), b.geo, b.k.data(),
                   b.k.data(), eb);
  return b;
}

CsrTables csr_from_block_tables(const PagedProblem& p) {
  CsrTables t;
  t.indptr.push_back(0);
  for (int s = 0; s < p.num_seqs(); ++s) {
    const int n = p.num_logical_blocks(s);
    for (int b = 0; b < n; ++b) t.indices.push_back(p.physical_block(s, b));
    t.indptr.push_back(static_cast<int>(t.indices.size()));
    t.last_page_len.push_back(p.context_len(s) - (n - 1) * p.spec.block_size);
  }
  return t;
}

std::vector<int> block_tables_from_csr(const CsrTables& t, int max_blocks_per_seq) {
  const int seqs = static_cast<int>(t.indptr.size()) - 1;
  std::vector<int> bt(static_cast<std::size_t>(seqs) * max_blocks_per_seq, kNoBlock);
  for (int s = 0; s < seqs; ++s) {
    const int n = t.indptr[s + 1] - t.indptr[s];
    if (n > max_blocks_per_seq)
      throw std::invalid_argument("block_tables_from_csr: sequence " + std::to_string(s) + " has " + std::to_string(n) +
                                  " pages (accepted: at most max_blocks_per_seq " +
                                  std::to_string(max_blocks_per_seq) + ")");
    for (int i = 0; i < n; ++i) bt[static_cast<std::size_t>(s) * max_blocks_per_seq + i] = t.indices[t.indptr[s] + i];
  }
  return bt;
}

}  // namespace pa
