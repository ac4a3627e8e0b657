// A token-row KV cache (nhd, hnd) in the viewer's data layer: the events of
// the stage 8 host model decoded to the elements they name in each layout,
// the KV panel's picture of a token-row tile (V drawn as token rows, like K;
// hit testing inverts it), a loaded trace marking the same elements in every
// layout, and the problem a lesson opens with (stages 1-7 go back to vLLM's
// layout; lesson 9 opens on HND).
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <vector>

#include "core/address_map.hpp"
#include "core/config_info.hpp"
#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/lesson_problem.hpp"
#include "core/trace_load.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;

namespace {

ProblemSpec opt_spec(pa::KvLayout l) {
  ProblemSpec s = lesson_problem(ProblemSpec{}, trace::Stage::optimized, 0).spec;  // a GQA group, 600 tokens
  s.kv_layout = l;
  return s;
}

}  // namespace

TEST_CASE("kv layout: every K/V copy of stage 8 decodes to the token and dims it names", "[viewer][kv_layout]") {
  int layouts = 0;
  for (const pa::KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    const ProblemSpec sp = opt_spec(l);
    const ConfigInfo c = config_info(sp);
    REQUIRE(c.kv_layout == l);
    const KvLayoutGeometry g = c.cache(sp.num_kv_heads);
    const auto events = trace::model_events(sp, trace::Stage::optimized,
                                            viewer_selection(sp, trace::Stage::optimized, 0, 0, 0));
    int copies = 0;
    for (const trace::Event& e : events) {
      if ((e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) || e.bytes <= 0) continue;
      const bool k = e.tensor == trace::Tensor::k_cache;
      // A copy is 16 bytes: x dims of one token (K; V in token rows), or x
      // tokens of one dim (vLLM's V).
      const bool token_run = !k && l == pa::KvLayout::vllm;
      int n = 0;
      bool in_event = true;
      for_each_kv_element(e, g, c.kv_elem_bytes, [&](const CacheGeometry::Coords& x) {
        const int token = e.logical_block * c.block_size + x.t;
        in_event &= x.physical_block == e.physical_block && x.kv_head == e.kv_head;
        if (token_run) {
          in_event &= x.d == e.dim_begin && token >= e.token && token < e.token + c.x;
        } else {
          in_event &= token == e.token && x.d >= e.dim_begin && x.d < e.dim_begin + e.dim_count;
        }
        ++n;
      });
      CHECK(in_event);
      CHECK(n == e.bytes / c.kv_elem_bytes);
      ++copies;
    }
    CHECK(copies > 0);
    ++layouts;
  }
  CHECK(layouts == 3);
}

TEST_CASE("kv layout: a loaded trace marks the same K and V elements in every layout", "[viewer][kv_layout]") {
  auto cells = [](pa::KvLayout l) {
    LoadRequest r;
    r.kind = LoadRequest::Kind::model;
    r.spec = opt_spec(l);
    r.stage = trace::Stage::optimized;
    LoadControl ctl;
    const LoadedTrace t = load_trace(r, ctl);
    std::vector<char> k, v;
    for (int step : t.block0.k_first_step) k.push_back(step >= 0);
    for (int step : t.block0.v_first_step) v.push_back(step >= 0);
    return std::pair{k, v};
  };
  const auto vllm = cells(pa::KvLayout::vllm);
  REQUIRE_FALSE(vllm.first.empty());
  REQUIRE_FALSE(vllm.second.empty());
  CHECK(std::count(vllm.first.begin(), vllm.first.end(), 1) > 0);
  for (const pa::KvLayout l : {pa::KvLayout::nhd, pa::KvLayout::hnd}) {
    INFO(kv_layout_name(l));
    const auto got = cells(l);
    CHECK(got.first == vllm.first);
    CHECK(got.second == vllm.second);
  }
}

TEST_CASE("kv layout: the panel draws token-row V like K, and hit testing inverts it", "[viewer][kv_layout]") {
  KvPanelLayout l;
  l.head_size = 64;
  l.block_size = 16;
  l.x = 8;
  l.band_rows = 16;
  l.slots = 2;
  l.token_rows = true;
  CHECK(l.v_width() == l.k_width());
  CHECK(l.v_height() == l.k_height());
  int hits = 0;
  for (int slot = 0; slot < l.slots; ++slot)
    for (int d = 0; d < l.head_size; ++d)
      for (int t = 0; t < l.block_size; ++t) {
        const Rect k = l.k_cell(slot, d, t), v = l.v_cell(slot, d, t);
        // The same column and row inside each tile.
        REQUIRE(v.x0 - l.v_tile(slot).x0 == k.x0 - l.k_tile(slot).x0);
        REQUIRE(v.y0 - l.v_tile(slot).y0 == k.y0 - l.k_tile(slot).y0);
        const auto h = l.hit(v.x0 + 0.5f, v.y0 + 0.5f);
        REQUIRE(h);
        REQUIRE((h->slot == slot && h->part == KvPart::v && h->d == d && h->t == t));
        ++hits;
      }
  CHECK(hits == 2 * 64 * 16);
  // A V chunk column is x dims wide, as K's.
  CHECK(l.v_band_rect(0, 1).x0 == l.v_cell(0, 8, 0).x0);
}

TEST_CASE("kv layout: a stage's lesson keeps the forms it reads, goes back to vLLM's padded one for the rest; "
          "lesson 9 on HND",
          "[viewer][kv_layout][lesson]") {
  ProblemSpec hnd = opt_spec(pa::KvLayout::hnd);
  hnd.page_table = pa::PageTableForm::csr;
  int moved = 0;
  for (trace::Stage st : {trace::Stage::qk, trace::Stage::lv, trace::Stage::v2_partition,
                          trace::Stage::cascade_merge}) {
    INFO(trace::to_string(st));
    const LessonProblem r = lesson_problem(hnd, st, 0);
    CHECK(r.spec.kv_layout == pa::KvLayout::vllm);
    // Stages 1-5 read CSR tables, stages 6-7 padded ones only.
    CHECK(r.spec.page_table ==
          (static_cast<int>(st) <= 5 ? pa::PageTableForm::csr : pa::PageTableForm::padded));
    CHECK(r.changed);
    CHECK(kv_cache_refusal(r.spec, st).empty());
    ++moved;
  }
  CHECK(moved == 4);
  for (trace::Stage st : {trace::Stage::warp_reduce, trace::Stage::optimized}) {
    INFO(trace::to_string(st));
    const LessonProblem same = lesson_problem(hnd, st, 0);
    CHECK(same.spec.kv_layout == pa::KvLayout::hnd);
    CHECK(same.spec.page_table == pa::PageTableForm::csr);
    CHECK(kv_cache_refusal(same.spec, st).empty());
  }
  CHECK_FALSE(lesson_problem(hnd, trace::Stage::warp_reduce, 0).changed);
  ProblemSpec fp32;
  fp32.dtype = DType::f32;
  const LessonProblem nine = lesson_problem_of(kLayoutsLesson, fp32, trace::Stage::optimized, 0);
  CHECK(nine.changed);
  CHECK(nine.spec.kv_layout == pa::KvLayout::hnd);
  CHECK(nine.spec.dtype == DType::f16);  // token rows hold 16-bit elements
  CHECK(kv_cache_refusal(nine.spec, trace::Stage::optimized).empty());
  const LessonOpening o = lesson_opening(kLayoutsLesson, trace::Stage::optimized);
  CHECK(std::string(o.tab) == "kv");
  CHECK(o.step == trace::Step::k_load);
}

TEST_CASE("kv layout: a page in address order, line by line, in each layout", "[viewer][kv_layout]") {
  // 2 kv heads, head 128, pages of 16, fp16: a half-page is 8 KB, 64 lines.
  const CacheGeometry cache{0, 2, 128, 16, 8};
  const int eb = 2;
  int layouts = 0;
  for (const pa::KvLayout l : kAllKvLayouts) {
    INFO(kv_layout_name(l));
    const KvLayoutGeometry g{l, cache};
    const PageAddressMap m = page_address_map(g, 3, eb);
    REQUIRE(m.k.size() == 64);
    REQUIRE(m.v.size() == 64);
    // Every line of each half decodes back to its bytes (the inverse agrees).
    for (int i = 0; i < 64; ++i) {
      const PageLine& k = m.k[i];
      REQUIRE(g.k_offset(3, k.kv_head, k.d0, k.t0) * eb == m.k_base + i * 128);
      REQUIRE(m.k_line(m.k_base + i * 128 + 127) == i);
    }
    CHECK(m.k_line(m.k_base - 1) == -1);
    CHECK(m.k_line(m.k_base + 64 * 128) == -1);
    // Which lines kv head 0's K takes: one run of 32 (vllm, hnd), or every
    // other pair of lines (nhd: each token's 256-byte row, then kv head 1's).
    std::vector<int> head0;
    for (int i = 0; i < 64; ++i)
      if (m.k[i].kv_head == 0) head0.push_back(i);
    REQUIRE(head0.size() == 32);
    if (l == pa::KvLayout::nhd) {
      CHECK(head0[0] == 0);
      CHECK(head0[1] == 1);
      CHECK(head0[2] == 4);  // lines 2-3: kv head 1's token-0 row
      CHECK(m.k[0].t0 == 0);
      CHECK(m.k[4].t0 == 1);
    } else {
      CHECK(head0.front() == 0);
      CHECK(head0.back() == 31);
    }
    // A vLLM K line is one dim chunk of 8 tokens; a token-row line 64 dims of one token.
    if (l == pa::KvLayout::vllm) {
      CHECK((m.k[0].t0 == 0 && m.k[0].t1 == 7 && m.k[0].d0 == 0 && m.k[0].d1 == 7));
    } else {
      CHECK((m.k[0].t0 == 0 && m.k[0].t1 == 0 && m.k[0].d0 == 0 && m.k[0].d1 == 63));
    }
    ++layouts;
  }
  CHECK(layouts == 3);
}
