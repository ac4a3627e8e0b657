// KV layouts and page tables side by side (pa/index/kv_layout.hpp,
// pa/reference/kv_layouts.hpp): every layout gives every element one slot,
// and the reference attention over any layout and either page-table form is
// exactly ref_output (same values, same arithmetic, same order), including
// the CSR cases a serving system produces: an empty request, last pages of 1
// slot and of a full page, pages shared across requests, pages out of order.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/kv_layouts.hpp"
#include "spec_of.hpp"

using namespace pa;
using pa::test::spec_of;

namespace {

// Bit for bit (the pool's unused slots hold NaN, which == never matches).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<double> through_padded(const PagedProblem& p, const LayoutCache& c) {
  const PaddedPageTable t{p.block_tables.data(), p.table, p.spec.block_size};
  return ref_output_paged(p, c, [&](int s, int tok) { return t.page(s, tok); }, p.context_lens);
}

std::vector<double> through_csr(const PagedProblem& p, const LayoutCache& c, const CsrTables& tables) {
  const CsrPageTable t = tables.view(p.spec.block_size);
  std::vector<int> lens;
  for (int s = 0; s < p.num_seqs(); ++s) lens.push_back(t.seq_len(s));
  return ref_output_paged(p, c, [&](int s, int tok) { return t.page(s, tok); }, lens);
}

}  // namespace

TEST_CASE("every KV layout gives every K and V element its own slot, and inverts", "[reference][layout]") {
  const CacheGeometry cache{3, 2, 16, 8, 8};  // 3 pages, 2 kv heads, head 16, page 8, x 8 (fp16)
  int layouts = 0;
  for (KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    const KvLayoutGeometry g{l, cache};
    const std::int64_t k_elems = g.k_tensor_elems();
    const std::int64_t v_elems = g.one_tensor() ? k_elems : cache.total_elems();
    std::vector<int> k_seen(static_cast<std::size_t>(k_elems), 0), v_seen(static_cast<std::size_t>(v_elems), 0);
    for (int page = 0; page < cache.num_blocks; ++page)
      for (int h = 0; h < cache.num_kv_heads; ++h)
        for (int d = 0; d < cache.head_size; ++d)
          for (int t = 0; t < cache.block_size; ++t) {
            const std::int64_t k = g.k_offset(page, h, d, t), v = g.v_offset(page, h, d, t);
            REQUIRE(k >= 0);
            REQUIRE(k < k_elems);
            REQUIRE(v >= 0);
            REQUIRE(v < v_elems);
            ++k_seen[static_cast<std::size_t>(k)];
            ++(g.one_tensor() ? k_seen : v_seen)[static_cast<std::size_t>(v)];
            // The inverse (the viewer decodes event byte ranges with it).
            const CacheGeometry::Coords kc = g.k_coords(k), vc = g.v_coords(v);
            REQUIRE((kc.physical_block == page && kc.kv_head == h && kc.d == d && kc.t == t));
            REQUIRE((vc.physical_block == page && vc.kv_head == h && vc.d == d && vc.t == t));
          }
    // One tensor: K and V fill it together; two: each fills its own.
    CHECK(std::all_of(k_seen.begin(), k_seen.end(), [](int n) { return n == 1; }));
    if (!g.one_tensor()) CHECK(std::all_of(v_seen.begin(), v_seen.end(), [](int n) { return n == 1; }));
    // A token's head is contiguous in nhd and hnd (one 16-byte load per 8 fp16 dims).
    if (g.one_tensor()) CHECK(g.k_offset(2, 1, 5, 3) + 1 == g.k_offset(2, 1, 6, 3));
    ++layouts;
  }
  CHECK(layouts == 3);
}

TEST_CASE("attention is identical over every layout and both page-table forms", "[reference][layout]") {
  const ProblemSpec specs[] = {
      spec_of(DType::f16, 128, 16, 8, 2, {1, 15, 16, 17, 300}, 11),  // GQA 4, ragged around the page
      spec_of(DType::bf16, 64, 8, 4, 1, {9, 64, 1}, 12),              // MQA
      spec_of(DType::f32, 80, 32, 2, 2, {33, 100}, 13),               // MHA, odd head
  };
  int compared = 0;
  for (const ProblemSpec& s : specs) {
    const PagedProblem p = make_problem(s);
    const std::vector<double> ref = ref_output(p);
    const CsrTables csr = csr_from_block_tables(p);
    for (KvLayout l : kAllKvLayouts) {
      INFO(s.describe() << ", layout " << kv_layout_name(l));
      const LayoutCache c = to_layout(p, l);
      CHECK(through_padded(p, c) == ref);  // exactly: same values, same order
      CHECK(through_csr(p, c, csr) == ref);
      compared += 2;
    }
  }
  CHECK(compared == 3 * 3 * 2);
}

TEST_CASE("CSR page tables: empty requests, last pages, shared pages, pages out of order", "[reference][layout]") {
  // Three sequences over one pool; the problem's own tables give the reference.
  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 4, 2, {16, 33, 17}, 21));
  const std::vector<double> ref = ref_output(p);
  const std::size_t row = static_cast<std::size_t>(p.spec.num_heads) * p.spec.head_size;
  for (KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    const LayoutCache c = to_layout(p, l);
    CsrTables t = csr_from_block_tables(p);
    // Last pages: a full page (16 of 16), one slot (33 = 2 x 16 + 1), one slot again.
    CHECK(t.last_page_len == std::vector<int>{16, 1, 1});
    CHECK(through_csr(p, c, t) == ref);

    // Pages out of order: the pool's pages relabelled by a permutation (page q's
    // contents moved to page pi(q), every index mapped through pi) so that
    // each sequence's page numbers run downwards: the same attention.
    const int pages = p.cache.num_blocks;
    auto pi = [&](int q) { return pages - 1 - q; };
    LayoutCache moved = c;
    float* mv = moved.geo.one_tensor() ? moved.k.data() : moved.v.data();
    for (int q = 0; q < pages; ++q)
      for (int h = 0; h < p.cache.num_kv_heads; ++h)
        for (int d = 0; d < p.cache.head_size; ++d)
          for (int slot = 0; slot < p.cache.block_size; ++slot) {
            moved.k[c.geo.k_offset(pi(q), h, d, slot)] = c.k_data()[c.geo.k_offset(q, h, d, slot)];
            mv[c.geo.v_offset(pi(q), h, d, slot)] = c.v_data()[c.geo.v_offset(q, h, d, slot)];
          }
    CsrTables relabelled = t;
    for (int& q : relabelled.indices) q = pi(q);
    CHECK_FALSE(std::is_sorted(relabelled.indices.begin() + relabelled.indptr[1],
                               relabelled.indices.begin() + relabelled.indptr[2]));
    CHECK(through_csr(p, moved, relabelled) == ref);

    // An empty request: no pages, length 0, its output zero; the others unchanged.
    CsrTables empty = t;
    const int gone = empty.indptr[1];
    empty.indices.erase(empty.indices.begin(), empty.indices.begin() + gone);
    for (std::size_t i = 1; i < empty.indptr.size(); ++i) empty.indptr[i] -= gone;
    CHECK(empty.view(16).num_pages(0) == 0);
    CHECK(empty.view(16).seq_len(0) == 0);
    const std::vector<double> got = through_csr(p, c, empty);
    CHECK(std::all_of(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(row), [](double x) { return x == 0.0; }));
    CHECK(std::equal(got.begin() + static_cast<std::ptrdiff_t>(row), got.end(),
                     ref.begin() + static_cast<std::ptrdiff_t>(row)));

    // Shared pages: sequence 2 reads sequence 1's pages (one list for both):
    // it then attends sequence 1's tokens with its own queries, which is
    // sequence 1's problem with sequence 2's Q. Checked against the padded
    // table that says the same.
    CsrTables shared = t;
    shared.indices.resize(static_cast<std::size_t>(shared.indptr[2]));
    shared.indices.insert(shared.indices.end(), t.indices.begin() + t.indptr[1], t.indices.begin() + t.indptr[2]);
    shared.indptr[3] = static_cast<int>(shared.indices.size());
    shared.last_page_len[2] = shared.last_page_len[1];
    std::vector<int> padded = p.block_tables;
    const auto mb = static_cast<std::size_t>(p.max_blocks_per_seq);
    std::copy(padded.begin() + static_cast<std::ptrdiff_t>(mb), padded.begin() + static_cast<std::ptrdiff_t>(2 * mb),
              padded.begin() + static_cast<std::ptrdiff_t>(2 * mb));
    const PaddedPageTable pt{padded.data(), p.table, 16};
    std::vector<int> lens = p.context_lens;
    lens[2] = lens[1];
    const std::vector<double> want = ref_output_paged(p, c, [&](int s, int tok) { return pt.page(s, tok); }, lens);
    CHECK(through_csr(p, c, shared) == want);
    CHECK(std::equal(want.begin(), want.begin() + static_cast<std::ptrdiff_t>(2 * row), ref.begin()));
  }
}

TEST_CASE("layouts and page tables convert into one another and back exactly", "[reference][layout]") {
  const PagedProblem p = make_problem(spec_of(DType::bf16, 96, 32, 6, 3, {1, 31, 32, 33, 200}, 41));
  const LayoutCache vllm = to_layout(p, KvLayout::vllm);
  REQUIRE(same_bits(vllm.k, p.k_cache));
  REQUIRE(same_bits(vllm.v, p.v_cache));
  int pairs = 0;
  for (KvLayout a : kAllKvLayouts)
    for (KvLayout b : kAllKvLayouts) {
      INFO(kv_layout_name(a) << " -> " << kv_layout_name(b) << " -> vllm");
      const LayoutCache back = convert_layout(convert_layout(to_layout(p, a), b), KvLayout::vllm);
      CHECK(same_bits(back.k, p.k_cache));
      CHECK(same_bits(back.v, p.v_cache));
      ++pairs;
    }
  CHECK(pairs == 9);
  const CsrTables csr = csr_from_block_tables(p);
  CHECK(csr.indptr.back() == static_cast<int>(csr.indices.size()));
  const std::vector<int> padded = block_tables_from_csr(csr, p.max_blocks_per_seq);
  // The problem's rows hold kNoBlock past each context: the same table.
  CHECK(padded == p.block_tables);
  CHECK_THROWS_AS(block_tables_from_csr(csr, 1), std::invalid_argument);
}

TEST_CASE("ref_output_paged refuses a length list of the wrong size", "[reference][layout]") {
  const PagedProblem p = make_problem(spec_of(DType::f16, 64, 16, 2, 2, {5, 6}, 31));
  const LayoutCache c = to_layout(p, KvLayout::nhd);
  CHECK_THROWS_AS(ref_output_paged(p, c, [](int, int) { return 0; }, {5}), std::invalid_argument);
}
