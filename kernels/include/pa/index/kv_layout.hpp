// KV cache layouts and page tables side by side: where the K or V element
// (page, kv head, dim d, slot t) lives in each layout serving systems use, and
// which page holds a sequence's token under each page-table form. Compiled by
// g++ and nvcc (PA_HD); the vLLM layout's formulas are CacheGeometry's
// (layout.hpp), not written again here.
//
//   vllm  K [pages, kv_heads, head/x, page, x] and V [pages, kv_heads, head, page]:
//         two tensors; x elements (16 bytes) of one token's K contiguous, so a
//         thread group's 16-byte load takes one token's dims, and V transposed
//         so a thread's 16-byte load takes consecutive tokens of one dim.
//   nhd   one tensor [pages, 2, page, kv_heads, head] (index 0: K, 1: V):
//         a token's whole head contiguous, every kv head of a token together.
//   hnd   one tensor [pages, 2, kv_heads, page, head]: one kv head's tokens of
//         a page contiguous, each token's head contiguous inside.
//
// Page tables: vLLM pads every sequence's list of pages to the longest
// (block_tables [seqs, max_blocks_per_seq]); FlashInfer and SGLang keep them
// in CSR form: the pages of sequence s are indices[indptr[s] .. indptr[s+1]),
// its last page holds last_page_len[s] tokens (1 .. page size), and a
// sequence with no pages has none.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "pa/index/hd.hpp"
#include "pa/index/layout.hpp"

namespace pa {

enum class KvLayout : std::uint8_t { vllm, nhd, hnd };
inline constexpr KvLayout kAllKvLayouts[] = {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd};

constexpr const char* kv_layout_name(KvLayout l) {
  return l == KvLayout::vllm ? "vllm" : l == KvLayout::nhd ? "nhd" : "hnd";
}
// True for the layouts that keep each token's head contiguous (nhd, hnd):
// a 16-byte chunk there holds consecutive dims of one token, in K and in V
// alike, and the two differ only in the strides between tokens and between
// kv heads (KvLayoutGeometry::token_stride), so one kernel serves both.
constexpr PA_HD bool kv_layout_token_rows(KvLayout l) { return l != KvLayout::vllm; }

// The two page-table forms (below): vLLM's padded rows, FlashInfer's CSR.
enum class PageTableForm : std::uint8_t { padded, csr };
inline constexpr PageTableForm kAllPageTableForms[] = {PageTableForm::padded, PageTableForm::csr};
constexpr const char* page_table_name(PageTableForm f) { return f == PageTableForm::padded ? "padded" : "csr"; }
// Names as the command lines take them.
inline constexpr std::optional<KvLayout> kv_layout_from_name(std::string_view s) {
  for (KvLayout l : kAllKvLayouts)
    if (s == kv_layout_name(l)) return l;
  return std::nullopt;
}
inline constexpr const char* kKvLayoutNamesText = "vllm, nhd, hnd";
inline constexpr std::optional<PageTableForm> page_table_from_name(std::string_view s) {
  for (PageTableForm f : kAllPageTableForms)
    if (s == page_table_name(f)) return f;
  return std::nullopt;
}
inline constexpr const char* kPageTableNamesText = "padded, csr";

// Element offsets of K and V in `layout`, over the pages of `cache` (num_blocks
// pages of block_size slots, num_kv_heads, head_size, and x for vllm). For nhd
// and hnd both offsets index the one K/V tensor.
struct KvLayoutGeometry {
  KvLayout layout = KvLayout::vllm;
  CacheGeometry cache;

  // Elements of one page's K (or V) for every kv head.
  constexpr PA_HD std::int64_t page_elems() const { return cache.block_elems(); }
  // True when K and V share one tensor (nhd, hnd).
  constexpr PA_HD bool one_tensor() const { return layout != KvLayout::vllm; }
  // Elements of the tensor K lives in (for nhd/hnd: K and V together).
  constexpr PA_HD std::int64_t k_tensor_elems() const { return page_elems() * cache.num_blocks * (one_tensor() ? 2 : 1); }

  constexpr PA_HD std::int64_t k_offset(int page, int kv_head, int d, int t) const {
    if (layout == KvLayout::vllm) return cache.k_offset(page, kv_head, d, t);
    return paged(page, 0, kv_head, d, t);
  }
  constexpr PA_HD std::int64_t v_offset(int page, int kv_head, int d, int t) const {
    if (layout == KvLayout::vllm) return cache.v_offset(page, kv_head, d, t);
    return paged(page, 1, kv_head, d, t);
  }
  // The inverse of k_offset / v_offset: which (page, kv head, d, t) an element
  // offset of the K (or V) tensor holds. For nhd / hnd K and V share the
  // tensor; k_coords of an offset in a V half decodes as V would (the caller
  // knows which half an event reads).
  constexpr PA_HD CacheGeometry::Coords k_coords(std::int64_t off) const {
    return layout == KvLayout::vllm ? cache.k_coords(off) : unpaged(off);
  }
  constexpr PA_HD CacheGeometry::Coords v_coords(std::int64_t off) const {
    return layout == KvLayout::vllm ? cache.v_coords(off) : unpaged(off);
  }
  // nhd / hnd: elements between slot t and slot t + 1 of one kv head (K and
  // V alike): num_kv_heads * head_size for nhd, head_size for hnd. In vLLM's
  // layout a token's dims are not contiguous, so it has no such stride (0).
  constexpr PA_HD std::int64_t token_stride() const {
    return layout == KvLayout::vllm ? 0 : paged(0, 0, 0, 0, 1) - paged(0, 0, 0, 0, 0);
  }

 private:
  // nhd / hnd: page, then K or V (kv = 0 or 1), then the layout's order inside.
  constexpr PA_HD std::int64_t paged(int page, int kv, int kv_head, int d, int t) const {
    const std::int64_t base = (static_cast<std::int64_t>(page) * 2 + kv) * page_elems();
    const int hs = cache.head_size;
    if (layout == KvLayout::nhd)
      return base + (static_cast<std::int64_t>(t) * cache.num_kv_heads + kv_head) * hs + d;
    return base + (static_cast<std::int64_t>(kv_head) * cache.block_size + t) * hs + d;  // hnd
  }
  constexpr PA_HD CacheGeometry::Coords unpaged(std::int64_t off) const {
    const std::int64_t pe = page_elems();
    const int page = static_cast<int>(off / (2 * pe));
    std::int64_t r = off % pe;  // inside the page's K or V half
    const int hs = cache.head_size;
    const int d = static_cast<int>(r % hs);
    r /= hs;
    if (layout == KvLayout::nhd)
      return {page, static_cast<int>(r % cache.num_kv_heads), d, static_cast<int>(r / cache.num_kv_heads)};
    return {page, static_cast<int>(r / cache.block_size), d, static_cast<int>(r % cache.block_size)};  // hnd
  }
};

// vLLM's padded block table: token -> page.
struct PaddedPageTable {
  const int* block_tables = nullptr;  // [num_seqs, table.max_blocks_per_seq]
  BlockTableGeometry table;
  int page_size = 0;
  PA_HD int page(int seq, int token) const { return block_tables[table.offset(seq, token / page_size)]; }
};

// The CSR page table: token -> page, and each sequence's length.
struct CsrPageTable {
  const int* indptr = nullptr;         // [num_seqs + 1], indptr[0] = 0, non-decreasing
  const int* indices = nullptr;        // [indptr[num_seqs]] pages, any order, may repeat across sequences
  const int* last_page_len = nullptr;  // [num_seqs], 1 .. page_size (read only for a sequence with pages)
  int page_size = 0;
  constexpr PA_HD int num_pages(int seq) const { return indptr[seq + 1] - indptr[seq]; }
  constexpr PA_HD int seq_len(int seq) const {
    const int n = num_pages(seq);
    return seq_len_of(n, n == 0 ? 0 : last_page_len[seq], page_size);
  }
  // Tokens of a sequence of num_pages pages whose last holds last_len.
  static constexpr PA_HD int seq_len_of(int num_pages, int last_len, int page_size) {
    return num_pages == 0 ? 0 : (num_pages - 1) * page_size + last_len;
  }
  constexpr PA_HD int page(int seq, int token) const { return indices[indptr[seq] + token / page_size]; }
};

// Static checks of the layouts' shapes (every element has exactly one slot:
// the tests walk them; these pin the strides).
namespace kv_layout_check {
constexpr CacheGeometry kCache{4, 2, 8, 4, 2};  // 4 pages, 2 kv heads, head 8, page 4, x 2
constexpr KvLayoutGeometry kNhd{KvLayout::nhd, kCache};
constexpr KvLayoutGeometry kHnd{KvLayout::hnd, kCache};
static_assert(kNhd.k_offset(0, 0, 1, 0) == 1 && kNhd.k_offset(0, 1, 0, 0) == 8 && kNhd.k_offset(0, 0, 0, 1) == 16,
              "nhd: dims, then kv heads, then slots");
static_assert(kNhd.v_offset(0, 0, 0, 0) == 64 && kNhd.k_offset(1, 0, 0, 0) == 128, "nhd: V after K in each page");
static_assert(kHnd.k_offset(0, 0, 0, 1) == 8 && kHnd.k_offset(0, 1, 0, 0) == 32, "hnd: dims, then slots, then kv heads");
static_assert(kHnd.v_offset(3, 1, 7, 3) + 1 == kHnd.k_tensor_elems(), "hnd: the last element ends the tensor");
static_assert(kNhd.token_stride() == 16 && kHnd.token_stride() == 8, "token stride: kv_heads x head (nhd), head (hnd)");
static_assert(kNhd.k_offset(2, 1, 5, 3) - kNhd.k_offset(2, 1, 5, 0) == 3 * kNhd.token_stride() &&
                  kHnd.v_offset(2, 1, 5, 3) - kHnd.v_offset(2, 1, 5, 0) == 3 * kHnd.token_stride(),
              "token_stride steps one slot of one kv head, in K and V");
constexpr bool same(CacheGeometry::Coords a, CacheGeometry::Coords b) {
  return a.physical_block == b.physical_block && a.kv_head == b.kv_head && a.d == b.d && a.t == b.t;
}
static_assert(same(kNhd.k_coords(kNhd.k_offset(2, 1, 5, 3)), {2, 1, 5, 3}) &&
                  same(kNhd.v_coords(kNhd.v_offset(3, 0, 7, 2)), {3, 0, 7, 2}) &&
                  same(kHnd.k_coords(kHnd.k_offset(1, 1, 6, 3)), {1, 1, 6, 3}) &&
                  same(kHnd.v_coords(kHnd.v_offset(2, 0, 0, 1)), {2, 0, 0, 1}),
              "k_coords / v_coords invert k_offset / v_offset");
}  // namespace kv_layout_check

}  // namespace pa
