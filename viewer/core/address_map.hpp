// One page of the KV cache in address order, 128-byte line by 128-byte line:
// what each line holds (K or V, which kv head, the first and last element's
// token and dim), for the KV panel's picture beside the logical tiles. The
// same (token, dim) grid looks alike in every layout; the lines show what a
// layout changes: in vLLM's and HND's pages one kv head's K is one run of
// lines, in NHD its token rows alternate with the other kv heads' rows.
#pragma once
#include <cstdint>
#include <vector>

#include "pa/index/kv_layout.hpp"

namespace pa::viewer {

struct PageLine {
  int kv_head = 0;
  int t0 = 0, d0 = 0;  // the line's first element (token in the page, dim)
  int t1 = 0, d1 = 0;  // its last
};

struct PageAddressMap {
  static constexpr int kLineBytes = 128;
  int page = 0;
  int elem_bytes = 2;
  // Byte offset of the page's K (V) half in the tensor it lives in: vLLM's
  // k_cache (v_cache), or the one K/V tensor of nhd and hnd.
  std::int64_t k_base = 0, v_base = 0;
  std::vector<PageLine> k, v;  // the halves' lines in address order

  // Line of the K (V) half holding tensor byte `byte`, or -1 outside the page.
  int k_line(std::int64_t byte) const { return line_of(byte, k_base, k.size()); }
  int v_line(std::int64_t byte) const { return line_of(byte, v_base, v.size()); }

 private:
  static int line_of(std::int64_t byte, std::int64_t base, std::size_t n) {
    if (byte < base) return -1;
    const std::int64_t l = (byte - base) / kLineBytes;
    return l < static_cast<std::int64_t>(n) ? static_cast<int>(l) : -1;
  }
};

// The map of physical page `page` of a cache of geometry g (num_blocks may be
// 0: no formula needs it) with elements of elem_bytes.
PageAddressMap page_address_map(const KvLayoutGeometry& g, int page, int elem_bytes);

}  // namespace pa::viewer
