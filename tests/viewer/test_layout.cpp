// Cell layouts: rectangles and hit testing agree, cells do not overlap,
// clipping ranges are right.
#include <catch2/catch_test_macros.hpp>

#include "core/config_info.hpp"
#include "core/layout.hpp"
#include "pa/index/config.hpp"

using namespace pa;
using namespace pa::viewer;

namespace {
float cx(const Rect& r) { return (r.x0 + r.x1) * 0.5f; }
float cy(const Rect& r) { return (r.y0 + r.y1) * 0.5f; }
}  // namespace

TEST_CASE("Thread grid: every cell's centre hits that (warp, lane)", "[viewer][layout]") {
  ThreadGridLayout g;
  g.warps = 4;
  g.group_size = 2;
  for (int w = 0; w < 4; ++w)
    for (int l = 0; l < 32; ++l) {
      const Rect r = g.cell_rect(w, l);
      auto h = g.hit(cx(r), cy(r));
      REQUIRE(h);
      CHECK(h->first == w);
      CHECK(h->second == l);
    }
  // Labels select the warp; gaps and outside select nothing.
  auto lab = g.hit(5, cy(g.cell_rect(2, 0)));
  REQUIRE(lab);
  CHECK(lab->first == 2);
  CHECK(lab->second == -1);
  CHECK_FALSE(g.hit(cx(g.cell_rect(0, 0)), g.cell_rect(0, 0).y1 + 1));  // row gap
  CHECK_FALSE(g.hit(g.width() + 1, cy(g.cell_rect(0, 0))));
  CHECK_FALSE(g.hit(10, g.height() + 5));
  CHECK_FALSE(g.hit(10, 1));  // header
  const Rect grp = g.group_rect(1, 3);
  CHECK(grp.x0 == g.cell_rect(1, 6).x0);
  CHECK(grp.x1 == g.cell_rect(1, 7).x1);
  CHECK(ThreadGridLayout::fit_cell(56 + 32 * 10.5f, 56, 32) == 10);
  CHECK(ThreadGridLayout::fit_cell(10, 56, 32) == 6);
}

TEST_CASE("KV layout: K tiles follow [head/x][block][x], V tiles [head][block] in bands", "[viewer][layout]") {
  const ConfigInfo c = config_info(DType::f16, 128, 16);
  KvPanelLayout l;
  l.head_size = c.head_size;
  l.block_size = c.block_size;
  l.x = c.x;
  l.band_rows = c.num_rows_per_iter;
  l.slots = 3;
  for (bool k : {true, false})
    for (bool v : {true, false}) {
      if (!k && !v) continue;
      l.show_k = k;
      l.show_v = v;
      for (int slot = 0; slot < 3; ++slot)
        for (int d = 0; d < 128; d += 3)
          for (int t = 0; t < 16; ++t) {
            if (k) {
              const Rect r = l.k_cell(slot, d, t);
              auto h = l.hit(cx(r), cy(r));
              REQUIRE(h);
              CHECK(*h == KvCell{slot, KvPart::k, d, t});
              CHECK(l.slot_rect(slot).contains(cx(r), cy(r)));
            }
            if (v) {
              const Rect r = l.v_cell(slot, d, t);
              auto h = l.hit(cx(r), cy(r));
              REQUIRE(h);
              CHECK(*h == KvCell{slot, KvPart::v, d, t});
            }
          }
    }
  l.show_k = l.show_v = true;
  // Memory order inside a K chunk: consecutive elements (d % x) are adjacent
  // columns; the next token is the next row of the same chunk.
  CHECK(l.k_cell(0, 1, 0).x0 == l.k_cell(0, 0, 0).x1);
  CHECK(l.k_cell(0, 0, 1).y0 == l.k_cell(0, 0, 0).y1);
  CHECK(l.k_cell(0, 8, 0).x0 > l.k_cell(0, 7, 0).x1);  // next chunk after a gap
  CHECK(l.k_chunk_rect(0, 1).x0 == l.k_cell(0, 8, 0).x0);
  // V: consecutive tokens adjacent in a row; next dim is the next row of the band.
  CHECK(l.v_cell(0, 0, 1).x0 == l.v_cell(0, 0, 0).x1);
  CHECK(l.v_cell(0, 1, 0).y0 == l.v_cell(0, 0, 0).y1);
  CHECK(l.v_band_rect(0, 1).x0 == l.v_cell(0, 16, 0).x0);
  // Gaps hit nothing.
  CHECK_FALSE(l.hit(l.k_cell(0, 7, 0).x1 + 1, cy(l.k_cell(0, 7, 0))));
  CHECK_FALSE(l.hit(-1, 5));
  CHECK_FALSE(l.hit(10, l.height() + 1));
  // Clipping: only the slots in view.
  const float sh = l.slot_height();
  CHECK(l.visible_slots(0, sh * 0.5f) == std::make_pair(0, 1));
  CHECK(l.visible_slots(sh * 1.2f, sh * 2.5f) == std::make_pair(1, 3));
  CHECK(l.visible_slots(-100, 1e9f) == std::make_pair(0, 3));
  // Cells never overlap across K chunks.
  for (int d = 0; d + 1 < 128; ++d) CHECK(l.k_cell(0, d + 1, 0).x0 >= l.k_cell(0, d, 0).x1);
  // fit_cell fits.
  const float w = 700;
  l.cell_w = KvPanelLayout::fit_cell(w, l);
  CHECK(l.width() <= w);
}

TEST_CASE("Bank grid and strip hit testing", "[viewer][layout]") {
  BankGridLayout b;
  b.words = 100;
  for (int w = 0; w < 100; ++w) {
    const Rect r = b.word_rect(w);
    auto h = b.hit(cx(r), cy(r));
    REQUIRE(h);
    CHECK(*h == w);
    CHECK(static_cast<int>(r.x0 / b.cell_w) == w % 32);  // column = bank
  }
  CHECK(b.rows() == 4);
  CHECK_FALSE(b.hit(cx(b.word_rect(99)) + b.cell_w, cy(b.word_rect(99))));  // past the last word
  StripLayout s;
  s.n = 10;
  s.per_row = 4;
  for (int i = 0; i < 10; ++i) {
    auto h = s.hit(cx(s.cell_rect(i)), cy(s.cell_rect(i)));
    REQUIRE(h);
    CHECK(*h == i);
  }
  CHECK(s.rows() == 3);
  CHECK_FALSE(s.hit(cx(s.cell_rect(3)) + s.cell_w + s.gap, cy(s.cell_rect(3))));
}

TEST_CASE("ConfigInfo copies KernelConfig's constants", "[viewer][config]") {
  using C = KernelConfig<DType::f16, 128, 16, 128>;
  const ConfigInfo c = config_info(DType::bf16, 128, 16);
  CHECK(c.x == C::kX);
  CHECK(c.thread_group_size == C::kThreadGroupSize);
  CHECK(c.vec_size == C::kVecSize);
  CHECK(c.num_vecs_per_thread == C::kNumVecsPerThread);
  CHECK(c.num_rows_per_iter == C::kNumRowsPerIter);
  CHECK(c.dtype == DType::bf16);
  using F = KernelConfig<DType::f32, 64, 8, 128>;
  const ConfigInfo f = config_info(DType::f32, 64, 8);
  CHECK(f.x == F::kX);
  CHECK(f.thread_group_size == F::kThreadGroupSize);
  CHECK(f.v_vec_size == F::kVVecSize);
  CHECK_THROWS_AS(config_info(DType::f16, 100, 16), std::invalid_argument);
  CHECK_THROWS_AS(config_info(DType::f16, 128, 64), std::invalid_argument);
  CHECK_THROWS_AS(config_info(DType::f16, 128, 16, 256), std::invalid_argument);
}
