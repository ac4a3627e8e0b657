// Multi-level cascade on the CPU (pa/reference/multilevel_cascade.hpp): the
// states of every level's shared span, merged level by level, equal plain
// attention over each request's concatenated tokens (output and lse), for 1 to
// 4 levels, a level shared by one request, empty levels and empty groups,
// last pages of 1 slot and of a full page, pages out of order and shared,
// GQA and MQA; every KV layout gives exactly the same result; and every
// malformed cascade is refused with a message naming the value.
//
// "Plain attention" is the one-level cascade of the flat copy (each request's
// tokens copied into pages of its own), whose output is checked to be
// exactly ref_output_paged's: the existing paged reference anchors it, and the
// flat copy shares no page with the cascade, so a wrong index on one side
// cannot be matched by the same wrong index on the other.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/kv_layouts.hpp"
#include "pa/reference/multilevel_cascade.hpp"
#include "require_close.hpp"
#include "spec_of.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;
using Levels = std::vector<CascadeLevelSpec>;

namespace {

const Tolerance kRef = reference_tolerance();
// An lse matters only through differences (tolerance.hpp): compared with an
// absolute bound, the reference tolerance's.
const Tolerance kRefLse{kRef.abs, 0.0};

// A base spec (its context lengths are replaced by the levels); fresh values
// on every run (the seed is printed on failure).
ProblemSpec base_of(DType t, int head, int page, int heads, int kv_heads, std::uint64_t salt) {
  return test::spec_of(t, head, page, heads, kv_heads, {1}, test::fresh_seed(salt));
}

// Level of explicit groups: sizes (consecutive requests) and tokens per group.
CascadeLevelSpec level(std::vector<int> sizes, std::vector<int> tokens) { return {std::move(sizes), std::move(tokens)}; }

// The cascade over `pool` against plain attention over flatten_cascade's
// copy of the same tokens; returns the cascade's result.
MultiLevelRef check_against_plain(const PagedProblem& queries, const LayoutCache& pool, const MultiLevelCascade& c) {
  const FlatTokens flat = flatten_cascade(c, pool);
  const MultiLevelRef want = ref_multilevel_cascade(queries, flat.cache, flat.as_cascade());
  const CsrPageTable t = flat.tables.view(flat.page_size());
  std::vector<int> lens;
  for (int r = 0; r < c.num_requests; ++r) {
    lens.push_back(t.seq_len(r));
    REQUIRE(lens.back() == c.context_len(r));
  }
  REQUIRE(ref_output_paged(queries, flat.cache, [&](int s, int tok) { return t.page(s, tok); }, lens) == want.out);
  const MultiLevelRef got = ref_multilevel_cascade(queries, pool, c);
  REQUIRE(got.levels.size() == static_cast<std::size_t>(c.num_levels()));
  test::require_close(want.out, got.out, kRef);
  test::require_close(want.lse, got.lse, kRefLse);
  return got;
}

MultiLevelRef check_against_plain(const CascadeProblem& cp, KvLayout layout = KvLayout::vllm) {
  return check_against_plain(cp.queries, cp.cache(layout), cp.cascade);
}

// Every query head of request r at `level` holds the empty state (0, -inf).
bool empty_at(const MultiLevelRef& ref, const CascadeProblem& cp, int level, int r) {
  const int nh = cp.queries.spec.num_heads;
  for (int h = 0; h < nh; ++h) {
    const AttentionState& s = ref.levels[level][static_cast<std::size_t>(r) * nh + h];
    if (!s.empty() || s.out.size() != static_cast<std::size_t>(cp.queries.spec.head_size) ||
        std::any_of(s.out.begin(), s.out.end(), [](double x) { return x != 0.0; }))
      return false;
  }
  return true;
}

// Group g of t now holds `pages` (its last one filled to last_len); the other
// groups keep theirs.
void set_group_pages(CsrTables& t, int g, const std::vector<int>& pages, int last_len) {
  std::vector<int> indices;
  std::vector<int> indptr{0};
  for (int i = 0; i + 1 < static_cast<int>(t.indptr.size()); ++i) {
    if (i == g) indices.insert(indices.end(), pages.begin(), pages.end());
    else indices.insert(indices.end(), t.indices.begin() + t.indptr[i], t.indices.begin() + t.indptr[i + 1]);
    indptr.push_back(static_cast<int>(indices.size()));
  }
  t.indices = std::move(indices);
  t.indptr = std::move(indptr);
  t.last_page_len[g] = last_len;
}

std::vector<int> group_pages(const CsrTables& t, int g) {
  return {t.indices.begin() + t.indptr[g], t.indices.begin() + t.indptr[g + 1]};
}

}  // namespace

TEST_CASE("multi-level cascade: 1 to 4 levels equal plain attention over the concatenated tokens",
          "[reference][cascade]") {
  const std::vector<Levels> cases = {
      {level({1, 1, 1}, {17, 32, 5})},
      {CascadeLevelSpec::uniform(4, 4, 48), level({1, 1, 1, 1}, {17, 16, 1, 30})},
      {CascadeLevelSpec::uniform(6, 6, 33), level({3, 3}, {16, 20}), level({1, 1, 1, 1, 1, 1}, {1, 2, 15, 16, 17, 40})},
      {CascadeLevelSpec::uniform(8, 8, 32), level({4, 4}, {17, 9}), level({2, 2, 2, 2}, {16, 1, 40, 3}),
       level({1, 1, 1, 1, 1, 1, 1, 1}, {7, 16, 33, 1, 2, 9, 31, 64})},
  };
  int ran = 0;
  for (const Levels& lv : cases) {
    const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 64, 16, 4, 2, 100 + ran), lv);
    INFO(lv.size() << " levels, " << cp.pool.spec.describe());
    REQUIRE(cp.cascade.num_levels() == static_cast<int>(lv.size()));
    const MultiLevelRef got = check_against_plain(cp);
    if (lv.size() == 1) {
      // One group per request: the same tokens in the same order as the flat
      // copy, so the same numbers exactly.
      const MultiLevelRef flat = ref_multilevel_cascade(cp.queries, cp.flat.cache, cp.flat.as_cascade());
      CHECK(got.out == flat.out);
      CHECK(got.lse == flat.lse);
    }
    ++ran;
  }
  CHECK(ran == 4);
}

TEST_CASE("multi-level cascade: a level shared by exactly one request", "[reference][cascade]") {
  const std::vector<Levels> cases = {
      // Level 1: a group of one request beside a group of three.
      {CascadeLevelSpec::uniform(4, 4, 40), level({1, 3}, {24, 18}), CascadeLevelSpec::uniform(4, 1, 9)},
      // One request: every level is shared by exactly one request.
      {level({1}, {50}), level({1}, {16}), level({1}, {3})},
  };
  int ran = 0;
  for (const Levels& lv : cases) {
    const CascadeProblem cp = make_cascade_problem(base_of(DType::bf16, 64, 16, 4, 4, 200 + ran), lv);
    INFO(cp.pool.spec.describe());
    check_against_plain(cp);
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("multi-level cascade: empty levels and an empty group pass the other levels through",
          "[reference][cascade]") {
  const std::vector<Levels> cases = {
      // An empty level first, in the middle and last.
      {CascadeLevelSpec::uniform(4, 4, 0), CascadeLevelSpec::uniform(4, 2, 20), CascadeLevelSpec::uniform(4, 1, 5)},
      {CascadeLevelSpec::uniform(4, 4, 37), CascadeLevelSpec::uniform(4, 2, 0), CascadeLevelSpec::uniform(4, 1, 5)},
      {CascadeLevelSpec::uniform(4, 4, 37), CascadeLevelSpec::uniform(4, 2, 20), CascadeLevelSpec::uniform(4, 1, 0)},
      // Request 1 alone has nothing of its own: an empty group at the last level.
      {CascadeLevelSpec::uniform(4, 4, 37), CascadeLevelSpec::uniform(4, 2, 20), level({1, 1, 1, 1}, {5, 0, 9, 12})},
  };
  const int empty_level[] = {0, 1, 2, 2};
  int ran = 0, empty_states = 0;
  for (const Levels& lv : cases) {
    const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 64, 16, 4, 2, 300 + ran), lv);
    INFO("case " << ran << ", " << cp.pool.spec.describe());
    const MultiLevelRef got = check_against_plain(cp);
    for (int r = 0; r < cp.cascade.num_requests; ++r) {
      const int l = empty_level[ran];
      const bool is_empty = cp.cascade.tokens(l, r) == 0;
      CHECK(empty_at(got, cp, l, r) == is_empty);
      empty_states += is_empty ? 1 : 0;
    }
    ++ran;
  }
  CHECK(ran == 4);
  CHECK(empty_states == 3 * 4 + 1);
}

TEST_CASE("multi-level cascade: last pages of one slot and of a full page", "[reference][cascade]") {
  // Page 16: 17 and 33 tokens end with one slot, 32 and 16 with a full page,
  // at every level; the pool's tails past them hold NaN, so reading a slot
  // past last_page_len poisons the result.
  const Levels lv = {level({4}, {17}), level({2, 2}, {32, 33}), level({1, 1, 1, 1}, {16, 1, 48, 49})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f32, 64, 16, 2, 2, 400), lv);
  INFO(cp.pool.spec.describe());
  check_against_plain(cp);
  const LayoutCache pool = cp.cache(KvLayout::vllm);
  int one_slot = 0, full = 0, tails = 0;
  for (const CascadeLevel& l : cp.cascade.levels)
    for (int g = 0; g < l.num_groups(); ++g) {
      const int last = l.groups.last_page_len[g];
      one_slot += last == 1;
      full += last == 16;
      if (last < 16) {
        const int page = l.groups.indices[l.groups.indptr[g + 1] - 1];
        CHECK(std::isnan(pool.k[pool.geo.k_offset(page, 0, 0, last)]));
        ++tails;
      }
    }
  CHECK(one_slot == 4);
  CHECK(full == 3);
  CHECK(tails == 4);
}

TEST_CASE("multi-level cascade: pages out of order and shared, groups of any requests", "[reference][cascade]") {
  const Levels lv = {CascadeLevelSpec::uniform(4, 4, 40), level({2, 2}, {20, 36}), level({1, 1, 1, 1}, {5, 17, 16, 1})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 64, 16, 8, 2, 500), lv);
  const LayoutCache pool = cp.cache(KvLayout::vllm);
  int ran = 0;
  for (int variant = 0; variant < 4; ++variant) {
    INFO("variant " << variant << ", " << cp.pool.spec.describe());
    MultiLevelCascade c = cp.cascade;
    CsrTables& l1 = c.levels[1].groups;
    const std::vector<int> l0_pages = group_pages(c.levels[0].groups, 0);
    if (variant == 0) {
      // Level 1 group 1 reads level 0's pages: a page shared by two levels,
      // so requests 2 and 3 see those tokens twice.
      set_group_pages(l1, 1, l0_pages, c.levels[0].groups.last_page_len[0]);
    } else if (variant == 1) {
      // Level 1 group 1's full pages swapped and one listed twice, its
      // partial page still last: its tokens come in another order, which the
      // flat copy follows.
      const std::vector<int> own = group_pages(l1, 1);
      REQUIRE(own.size() == 3);
      const std::vector<int> pages = {own[1], own[0], own[1], own[2]};
      set_group_pages(l1, 1, pages, l1.last_page_len[1]);
      CHECK_FALSE(std::is_sorted(pages.begin(), pages.end()));
    } else if (variant == 2) {
      // Groups need not be runs of requests: level 1 pairs 0 with 2 and 1 with 3.
      c.levels[1].group_of = {0, 1, 0, 1};
    } else {
      // Request 3's own group reads request 0's pages: two groups, one page list.
      CsrTables& l2 = c.levels[2].groups;
      set_group_pages(l2, 3, group_pages(l2, 0), l2.last_page_len[0]);
    }
    check_against_plain(cp.queries, pool, c);
    ++ran;
  }
  CHECK(ran == 4);
  // The builder's pages come shuffled (13 pages and 3 spares: the first 13 of
  // a random permutation are ascending with probability 1/13!, about once in
  // 6 x 10^9 runs), and every shared span is stored once.
  std::vector<int> all;
  for (const CascadeLevel& l : cp.cascade.levels) all.insert(all.end(), l.groups.indices.begin(), l.groups.indices.end());
  CHECK(all.size() == 3 + 2 + 3 + 1 + 2 + 1 + 1);
  CHECK_FALSE(std::is_sorted(all.begin(), all.end()));
  CHECK(std::set<int>(all.begin(), all.end()).size() == all.size());
}

TEST_CASE("multi-level cascade: MHA, GQA and MQA", "[reference][cascade]") {
  struct Heads {
    int heads, kv_heads;
  };
  const Heads shapes[] = {{4, 4}, {8, 2}, {8, 1}, {6, 3}};
  const Levels lv = {CascadeLevelSpec::uniform(4, 4, 50), CascadeLevelSpec::uniform(4, 2, 17),
                     level({1, 1, 1, 1}, {3, 16, 20, 1})};
  int ran = 0;
  for (const Heads& h : shapes) {
    const CascadeProblem cp = make_cascade_problem(base_of(DType::bf16, 128, 16, h.heads, h.kv_heads, 600 + ran), lv);
    INFO(cp.pool.spec.describe());
    check_against_plain(cp);
    ++ran;
  }
  CHECK(ran == 4);
}

TEST_CASE("multi-level cascade: every KV layout gives exactly the same result", "[reference][cascade][layout]") {
  const Levels lv = {CascadeLevelSpec::uniform(6, 6, 45), level({2, 4}, {16, 30}),
                     level({1, 1, 1, 1, 1, 1}, {1, 2, 33, 0, 8, 16})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 96, 32, 6, 3, 700), lv);
  INFO(cp.pool.spec.describe());
  const MultiLevelRef vllm = ref_multilevel_cascade(cp.queries, cp.cache(KvLayout::vllm), cp.cascade);
  const MultiLevelRef vllm_flat = ref_multilevel_cascade(cp.queries, cp.flat.cache, cp.flat.as_cascade());
  int ran = 0;
  for (KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    // Same values, same arithmetic in the same order: equal, not close.
    const MultiLevelRef got = check_against_plain(cp, l);
    CHECK(got.out == vllm.out);
    CHECK(got.lse == vllm.lse);
    const MultiLevelRef flat =
        ref_multilevel_cascade(cp.queries, convert_layout(cp.flat.cache, l), cp.flat.as_cascade());
    CHECK(flat.out == vllm_flat.out);
    // flatten_cascade copies in the pool's layout: the same as converting the vllm copy.
    const FlatTokens direct = flatten_cascade(cp.cascade, cp.cache(l));
    CHECK(direct.cache.geo.layout == l);
    CHECK(ref_multilevel_cascade(cp.queries, direct.cache, direct.as_cascade()).out == vllm_flat.out);
    ++ran;
  }
  CHECK(ran == 3);
}

TEST_CASE("multi-level cascade: the builder's flat copy holds each request's tokens in level order",
          "[reference][cascade]") {
  // Checked through the pool problem's own block tables (PagedProblem::k_at),
  // not through the cascade's CSR tables: group g's tokens are the pool's
  // sequence of that group.
  const Levels lv = {level({3}, {20}), level({1, 2}, {0, 17}), level({1, 1, 1}, {4, 16, 1})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 64, 8, 2, 2, 800), lv);
  const std::vector<std::vector<int>> seqs_of_request = {{0, 2}, {0, 1, 3}, {0, 1, 4}};  // pool sequences, in order
  const CsrPageTable flat = cp.flat.tables.view(cp.flat.page_size());
  const LayoutCache& fc = cp.flat.cache;
  int tokens = 0;
  for (int r = 0; r < 3; ++r) {
    int to = 0;
    for (int seq : seqs_of_request[r])
      for (int t = 0; t < cp.pool.context_len(seq); ++t, ++to)
        for (int kvh = 0; kvh < 2; ++kvh)
          for (int d = 0; d < 64; ++d) {
            const int page = flat.page(r, to), slot = to % 8;
            REQUIRE(fc.k[fc.geo.k_offset(page, kvh, d, slot)] == cp.pool.k_at(seq, kvh, t, d));
            REQUIRE(fc.v[fc.geo.v_offset(page, kvh, d, slot)] == cp.pool.v_at(seq, kvh, t, d));
          }
    CHECK(to == flat.seq_len(r));
    CHECK(to == cp.cascade.context_len(r));
    tokens += to;
  }
  CHECK(tokens == (20 + 4) + (20 + 17 + 16) + (20 + 17 + 1));
}

TEST_CASE("multi-level cascade: three levels (one prefix for 8 requests, 2 groups of 4, own tokens)",
          "[reference][cascade]") {
  // The shape of a served batch, reduced: a system prompt for everyone, a
  // few-shot block per group of 4, each request's own question.
  const Levels lv = {CascadeLevelSpec::uniform(8, 8, 256), CascadeLevelSpec::uniform(8, 4, 64),
                     level({1, 1, 1, 1, 1, 1, 1, 1}, {9, 16, 17, 23, 31, 32, 40, 1})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 128, 16, 8, 2, 900), lv);
  INFO(cp.pool.spec.describe());
  int ran = 0;
  for (KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    check_against_plain(cp, l);
    ++ran;
  }
  CHECK(ran == 3);
  // What the cascade saves: every shared page read once (16 + 2 x 4), against
  // once per request (8 x (16 + 4)); the shared spans end on page boundaries
  // here, so the own tokens take the same 14 pages either way.
  const int own_pages = 1 + 1 + 2 + 2 + 2 + 2 + 3 + 1;
  std::set<int> cascade_pages;
  for (const CascadeLevel& l : cp.cascade.levels) cascade_pages.insert(l.groups.indices.begin(), l.groups.indices.end());
  CHECK(cascade_pages.size() == 16 + 2 * 4 + own_pages);
  CHECK(cp.flat.tables.indices.size() == 8 * (16 + 4) + own_pages);
}

TEST_CASE("multi-level cascade: joining trailing levels keeps the attention and reads shared pages per request",
          "[reference][cascade]") {
  // Page-aligned shared spans (a system prompt, a few-shot block per group),
  // ragged own tokens: every join is possible.
  const Levels lv = {CascadeLevelSpec::uniform(6, 6, 64), level({2, 4}, {32, 48}),
                     level({1, 1, 1, 1, 1, 1}, {5, 16, 1, 0, 33, 2})};
  const CascadeProblem cp = make_cascade_problem(base_of(DType::bf16, 64, 16, 4, 2, 950), lv);
  const LayoutCache pool = cp.cache(KvLayout::vllm);
  const MultiLevelRef three = ref_multilevel_cascade(cp.queries, pool, cp.cascade);
  int ran = 0;
  for (int first = 0; first < 3; ++first) {
    INFO("levels from " << first << " joined");
    const MultiLevelCascade j = join_levels_from(cp.cascade, first);
    CHECK(j.num_levels() == first + 1);
    for (int r = 0; r < j.num_requests; ++r) CHECK(j.context_len(r) == cp.cascade.context_len(r));
    const MultiLevelRef got = ref_multilevel_cascade(cp.queries, pool, j);
    test::require_close(three.out, got.out, kRef);
    test::require_close(three.lse, got.lse, kRefLse);
    ++ran;
  }
  CHECK(ran == 3);
  // The plain table lists the shared pages once per request: 6 x 4 level-0
  // pages, 2 x 2 + 4 x 3 level-1 pages, and the own pages.
  CHECK(join_levels_from(cp.cascade, 0).levels[0].groups.indices.size() == 6 * 4 + (2 * 2 + 4 * 3) + (1 + 1 + 1 + 0 + 3 + 1));
  // A joined span that ends inside a page (not the request's last) is refused.
  const CascadeProblem ragged = make_cascade_problem(base_of(DType::f16, 64, 16, 4, 2, 951),
                                                     Levels{level({2}, {20}), level({1, 1}, {3, 4})});
  CHECK_THROWS_WITH(join_levels_from(ragged.cascade, 0),
                    ContainsSubstring("request 0 has 20 tokens before level 1") && ContainsSubstring("accepted"));
  CHECK_NOTHROW(join_levels_from(ragged.cascade, 1));
  CHECK_THROWS_WITH(join_levels_from(ragged.cascade, 2), ContainsSubstring("accepted: 0 .. 1"));
}

TEST_CASE("multi-level cascade: levels from text (G:T per level)", "[reference][cascade]") {
  const std::vector<CascadeLevelSpec> l = parse_cascade_levels("8:1024,4:0,1:37", 8);
  REQUIRE(l.size() == 3);
  CHECK(l[0].group_sizes == std::vector<int>{8});
  CHECK(l[0].group_tokens == std::vector<int>{1024});
  CHECK(l[1].group_sizes == std::vector<int>{4, 4});
  CHECK(l[1].group_tokens == std::vector<int>{0, 0});
  CHECK(l[2].group_sizes.size() == 8);
  CHECK(l[2].group_tokens == std::vector<int>(8, 37));
  int ran = 0;
  for (const char* bad : {"", "8", "8:", ":5", "3:5", "0:5", "8:-1", "8:1,,1:1", "1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_cascade_levels(bad, 8), ContainsSubstring(std::string("levels '") + bad + "'") &&
                                                        ContainsSubstring("accepted: G:T,G:T"));
    ++ran;
  }
  CHECK(ran == 9);
}

// ---- refusals ------------------------------------------------------------------------

namespace {

// A valid two-level cascade over 6 pages of 4 slots, 3 requests: level 0 one
// group of 2 pages, level 1 one group per request (the second empty).
MultiLevelCascade small_cascade() {
  MultiLevelCascade c;
  c.page_size = 4;
  c.num_pages = 6;
  c.num_requests = 3;
  c.levels.push_back({{{0, 2}, {5, 1}, {3}}, {0, 0, 0}});
  c.levels.push_back({{{0, 1, 1, 3}, {2, 4, 0}, {4, 0, 1}}, {0, 1, 2}});
  return c;
}

void check_refused(const MultiLevelCascade& c, const std::string& what) {
  CHECK_THROWS_AS(c.validate(), std::invalid_argument);
  CHECK_THROWS_WITH(c.validate(), ContainsSubstring(what) && ContainsSubstring("accepted"));
}

}  // namespace

TEST_CASE("multi-level cascade: malformed cascades are refused, naming the value", "[reference][cascade]") {
  REQUIRE_NOTHROW(small_cascade().validate());
  int refused = 0;
  auto refuse = [&](auto&& edit, const std::string& what) {
    MultiLevelCascade c = small_cascade();
    edit(c);
    INFO(what);
    check_refused(c, what);
    ++refused;
  };
  // The pool and the request count.
  refuse([](MultiLevelCascade& c) { c.page_size = 0; }, "page_size 0");
  refuse([](MultiLevelCascade& c) { c.num_pages = -1; }, "num_pages -1");
  refuse([](MultiLevelCascade& c) { c.num_requests = 0; }, "num_requests 0");
  refuse([](MultiLevelCascade& c) { c.levels.clear(); }, "0 levels");
  // The CSR arrays of a level.
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.indptr.clear(); }, "level 1: indptr is empty");
  refuse([](MultiLevelCascade& c) { c.levels[0].groups.indptr = {1, 2}; }, "level 0: indptr[0] = 1");
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.indptr = {0, 2, 1, 3}; }, "indptr[2] = 1 < indptr[1] = 2");
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.indptr = {0, 1, 1, 2}; }, "indptr ends at 2 but indices holds 3");
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.last_page_len = {4, 0}; }, "2 last_page_len entries for 3 groups");
  // Pages and last pages.
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.indices[1] = 6; }, "level 1 group 2: page 6 (indices[1])");
  refuse([](MultiLevelCascade& c) { c.levels[0].groups.indices[0] = -1; }, "level 0 group 0: page -1");
  refuse([](MultiLevelCascade& c) { c.levels[0].groups.last_page_len[0] = 0; }, "level 0 group 0: last_page_len 0");
  refuse([](MultiLevelCascade& c) { c.levels[1].groups.last_page_len[2] = 5; }, "level 1 group 2: last_page_len 5");
  // Requests and their groups.
  refuse([](MultiLevelCascade& c) { c.levels[1].group_of.pop_back(); }, "group for 2 requests, there are 3");
  refuse([](MultiLevelCascade& c) { c.levels[1].group_of[2] = 3; }, "level 1: request 2 reads group 3");
  refuse([](MultiLevelCascade& c) { c.levels[0].group_of[1] = -1; }, "level 0: request 1 reads group -1");
  CHECK(refused == 16);

  // What is accepted at the edges: an empty group's last_page_len is not
  // read, and a group no request reads is allowed.
  MultiLevelCascade ok = small_cascade();
  ok.levels[1].groups.last_page_len[1] = 99;
  ok.levels[1].group_of = {0, 0, 2};
  CHECK_NOTHROW(ok.validate());
  CHECK(ok.context_len(0) == (4 + 3) + 4);
  CHECK(ok.context_len(2) == (4 + 3) + (4 + 1));
}

TEST_CASE("multi-level cascade: a cascade that does not fit its queries or cache is refused", "[reference][cascade]") {
  const CascadeProblem cp = make_cascade_problem(base_of(DType::f16, 64, 16, 4, 2, 1000),
                                                 {CascadeLevelSpec::uniform(2, 2, 20), CascadeLevelSpec::uniform(2, 1, 3)});
  const LayoutCache pool = cp.cache(KvLayout::nhd);
  int refused = 0;
  auto refused_with = [&](auto&& call, const std::string& what) {
    INFO(what);
    CHECK_THROWS_AS(call(), std::invalid_argument);
    CHECK_THROWS_WITH(call(), ContainsSubstring(what) && ContainsSubstring("accepted"));
    ++refused;
  };
  MultiLevelCascade three = cp.cascade;
  three.num_requests = 3;
  for (CascadeLevel& l : three.levels) l.group_of.push_back(0);
  refused_with([&] { return ref_multilevel_cascade(cp.queries, pool, three); }, "2 query sequences for 3 requests");
  MultiLevelCascade bigger = cp.cascade;
  bigger.num_pages += 1;
  refused_with([&] { return ref_multilevel_cascade(cp.queries, pool, bigger); }, "pages of 16 slots");
  refused_with([&] { return flatten_cascade(bigger, pool); }, "flatten_cascade: the cache has");
  const CascadeProblem other = make_cascade_problem(base_of(DType::f16, 64, 16, 4, 4, 1001),
                                                    {CascadeLevelSpec::uniform(2, 2, 20), CascadeLevelSpec::uniform(2, 1, 3)});
  MultiLevelCascade fits_other = cp.cascade;
  fits_other.num_pages = other.cascade.num_pages;
  refused_with([&] { return ref_multilevel_cascade(cp.queries, other.cache(KvLayout::hnd), fits_other); },
               "the cache has 4 KV heads of size 64");
  MultiLevelCascade broken = cp.cascade;
  broken.levels[0].group_of[0] = 1;
  refused_with([&] { return ref_multilevel_cascade(cp.queries, pool, broken); }, "request 0 reads group 1");
  CHECK(refused == 5);
}

TEST_CASE("multi-level cascade: the builder refuses descriptions it cannot build", "[reference][cascade]") {
  const ProblemSpec base = base_of(DType::f16, 64, 16, 4, 2, 1100);
  int refused = 0;
  auto refused_with = [&](const Levels& lv, const std::string& what) {
    INFO(what);
    CHECK_THROWS_AS(make_cascade_problem(base, lv), std::invalid_argument);
    CHECK_THROWS_WITH(make_cascade_problem(base, lv), ContainsSubstring(what) && ContainsSubstring("accepted"));
    ++refused;
  };
  refused_with({}, "0 levels");
  refused_with({level({2}, {5}), level({1, 1}, {3})}, "level 1: 1 token counts for 2 groups");
  refused_with({level({2, 0}, {5, 5})}, "level 0 group 1: 0 requests");
  refused_with({level({2}, {5}), level({1, 1}, {3, -1})}, "level 1 group 1: -1 tokens");
  refused_with({level({2}, {5}), level({1, 2}, {3, 4})}, "level 1: groups cover 3 requests");
  refused_with({level({2}, {0}), level({1, 1}, {3, 0})}, "request 1 has no token at any level");
  refused_with({level({2}, {2147483647}), level({1, 1}, {0, 1})}, "level 1 group 1: request 1 would read more than");
  CHECK(refused == 7);
  CHECK_THROWS_WITH(CascadeLevelSpec::uniform(6, 4, 10), ContainsSubstring("groups of 4 over 6 requests"));
  // What ProblemSpec::validate refuses (here the head size) comes through as its ProblemError.
  ProblemSpec odd = base;
  odd.head_size = 65;
  CHECK_THROWS_AS(make_cascade_problem(odd, {level({1}, {4})}), ProblemError);
}
