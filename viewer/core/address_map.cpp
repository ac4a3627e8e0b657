#include "core/address_map.hpp"

namespace pa::viewer {

PageAddressMap page_address_map(const KvLayoutGeometry& g, int page, int elem_bytes) {
  PageAddressMap m;
  m.page = page;
  m.elem_bytes = elem_bytes;
  const std::int64_t k0 = g.k_offset(page, 0, 0, 0), v0 = g.v_offset(page, 0, 0, 0);  // each half's first element
  m.k_base = k0 * elem_bytes;
  m.v_base = v0 * elem_bytes;
  const std::int64_t per_line = PageAddressMap::kLineBytes / elem_bytes;
  const std::int64_t lines = g.page_elems() / per_line;
  for (int half = 0; half < 2; ++half) {
    std::vector<PageLine>& out = half == 0 ? m.k : m.v;
    const std::int64_t base = half == 0 ? k0 : v0;
    out.reserve(static_cast<std::size_t>(lines));
    for (std::int64_t l = 0; l < lines; ++l) {
      const std::int64_t first = base + l * per_line, last = first + per_line - 1;
      const CacheGeometry::Coords a = half == 0 ? g.k_coords(first) : g.v_coords(first);
      const CacheGeometry::Coords b = half == 0 ? g.k_coords(last) : g.v_coords(last);
      out.push_back({a.kv_head, a.t, a.d, b.t, b.d});
    }
  }
  return m;
}

}  // namespace pa::viewer
