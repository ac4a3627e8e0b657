// The Timeline panel's logic without a window (core/timeline_model.hpp,
// core/timeline_view.hpp): rows at the three levels with their lanes, culling
// to the visible time, merging of sub-pixel spans per pixel column, hit
// testing, zoom and pan, the axis, the anchor-to-phase table, load errors,
// and the Trace tab's list of timeline files. Timelines here are hand-made
// or timeline_fixture.hpp's: test fixtures, not measurements.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <unistd.h>

#include "core/lesson_binding.hpp"
#include "core/timeline_model.hpp"
#include "core/timeline_view.hpp"
#include "core/trace_files.hpp"
#include "pa/lessons/lesson.hpp"
#include "timeline_fixture.hpp"

using namespace pa;
using namespace pa::viewer;
using P = trace::Phase;

namespace {

trace::Span make_span(std::uint64_t b, std::uint64_t e, int sm, std::uint32_t block, int warp, P phase,
                      trace::KernelRole kernel = trace::KernelRole::main, int iter = -1) {
  trace::Span s{};
  s.t_begin_ns = 1'000'000 + b;
  s.t_end_ns = 1'000'000 + e;
  s.clk_begin = b * 2;
  s.clk_end = e * 2;
  s.block = block;
  s.sm = static_cast<std::uint16_t>(sm);
  s.warp = static_cast<std::uint16_t>(warp);
  s.stage = trace::Stage::optimized;
  s.phase = phase;
  s.kernel = kernel;
  s.iter = iter;
  return s;
}

trace::TimelineData with_spans(std::vector<trace::Span> spans, std::uint32_t sm_count = 1) {
  trace::TimelineData d;
  d.header.source = "hand-made test spans";
  d.header.sm_count = sm_count;
  d.spans = std::move(spans);
  return d;
}

// One warp (block 0, warp 0, SM 0) running n spans of `ns` each, back to
// back, phases from `phase_of(k)`.
template <class F>
TimelineModel one_warp(int n, std::uint64_t ns, F phase_of) {
  std::vector<trace::Span> v;
  for (int k = 0; k < n; ++k) v.push_back(make_span(k * ns, (k + 1) * ns, 0, 0, 0, phase_of(k)));
  return TimelineModel(with_spans(std::move(v)));
}

std::vector<TimelineRect> rects_of(const TimelineModel& m, TimeRange view, int width, int capacity = 1,
                                   TimelineRectStats* stats = nullptr) {
  const TimelineRows rows = m.rows(TimelineLevel::grid, -1);
  std::vector<TimelineRect> out;
  TimelineScratch scratch;
  timeline_rects(*rows, 0, static_cast<int>(rows->size()), view, width, capacity, out, scratch, stats);
  return out;
}

}  // namespace

TEST_CASE("timeline rows: the grid's SMs, an SM's blocks, a block's warps", "[viewer][timeline]") {
  // SM 0: block 0 (2 warps), then block 1 after it ended (its warps reuse
  // the lanes); SM 1: block 2 and reduce block 0 at the same time (4 lanes);
  // SM 2 ran nothing; the header says 3 SMs, a span names SM 3 (4 rows).
  std::vector<trace::Span> v = {
      make_span(0, 100, 0, 0, 0, P::opt_prologue),   make_span(100, 250, 0, 0, 0, P::opt_qk_mma, trace::KernelRole::main, 0),
      make_span(10, 120, 0, 0, 1, P::opt_prologue),  make_span(300, 400, 0, 1, 0, P::opt_prologue),
      make_span(310, 420, 0, 1, 1, P::opt_prologue), make_span(50, 500, 1, 2, 0, P::opt_pv_mma),
      make_span(60, 510, 1, 2, 1, P::opt_pv_mma),    make_span(70, 600, 1, 0, 0, P::partition_reduce, trace::KernelRole::reduce),
      make_span(80, 610, 1, 0, 1, P::partition_reduce, trace::KernelRole::reduce),
      make_span(5, 15, 3, 9, 0, P::opt_warp_merge),
  };
  const TimelineModel m(with_spans(v, 3));
  CHECK(m.origin_ns() == 1'000'000);
  CHECK(m.duration_ns() == 610);
  REQUIRE(m.num_sms() == 4);
  REQUIRE(m.blocks().size() == 5);
  // Blocks by begin: block 0 (0), block 9 (5), block 2 (50), reduce 0 (70), block 1 (300).
  const char* order[] = {"block 0", "block 9", "block 2", "reduce 0", "block 1"};
  for (int b = 0; b < 5; ++b) CHECK(block_label(m.blocks()[b]) == order[b]);
  CHECK(m.find_block(trace::KernelRole::reduce, 0) == 3);
  CHECK(m.find_block(trace::KernelRole::merge, 0) == -1);
  CHECK(m.blocks()[3].sm == 1);
  CHECK(m.blocks()[3].warps == 2);
  CHECK(m.phases_present() == (phase_bit(P::opt_prologue) | phase_bit(P::opt_qk_mma) | phase_bit(P::opt_pv_mma) |
                               phase_bit(P::partition_reduce) | phase_bit(P::opt_warp_merge)));
  CHECK(m.phase_spans(P::opt_prologue) == 4);
  CHECK(m.phase_time_ns(P::opt_prologue) == 100 + 110 + 100 + 110);

  const TimelineRows grid = m.rows(TimelineLevel::grid, -1);
  REQUIRE(grid->size() == 4);
  const int lanes[] = {2, 4, 1, 1};
  const std::size_t spans[] = {5, 4, 0, 1};
  int rows_checked = 0;
  for (std::size_t r = 0; r < grid->size(); ++r) {
    const TimelineRow& row = (*grid)[r];
    CHECK(row.label == "SM " + std::to_string(r));
    CHECK(row.target == static_cast<int>(r));
    CHECK(row.lanes == lanes[r]);
    CHECK(row.spans.size() == spans[r]);
    REQUIRE(row.lane.size() == row.spans.size());
    for (std::size_t k = 1; k < row.spans.size(); ++k) CHECK(m.begin_of(row.spans[k - 1]) <= m.begin_of(row.spans[k]));
    // One warp's spans stay on one lane, and no two spans of a lane overlap.
    for (std::size_t a = 0; a < row.spans.size(); ++a)
      for (std::size_t b = a + 1; b < row.spans.size(); ++b) {
        const trace::Span& x = m.spans()[row.spans[a]];
        const trace::Span& y = m.spans()[row.spans[b]];
        if (x.block == y.block && x.kernel == y.kernel && x.warp == y.warp) CHECK(row.lane[a] == row.lane[b]);
        if (row.lane[a] == row.lane[b]) CHECK((x.t_end_ns <= y.t_begin_ns || y.t_end_ns <= x.t_begin_ns));
      }
    ++rows_checked;
  }
  CHECK(rows_checked == 4);
  CHECK((*grid)[0].max_duration_ns == 150);

  // SM 1's blocks: block 2 and reduce 0, one lane per warp.
  const TimelineRows sm1 = m.rows(TimelineLevel::sm, 1);
  REQUIRE(sm1->size() == 2);
  CHECK((*sm1)[0].label == "block 2");
  CHECK((*sm1)[1].label == "reduce 0");
  for (const TimelineRow& row : *sm1) {
    CHECK(row.lanes == 2);
    CHECK(row.spans.size() == 2);
    for (std::size_t k = 0; k < row.spans.size(); ++k) CHECK(row.lane[k] == m.spans()[row.spans[k]].warp);
  }
  CHECK(m.rows(TimelineLevel::sm, 2)->empty());  // idle
  CHECK(m.rows(TimelineLevel::sm, 99)->empty());

  // Block 0's warps.
  const TimelineRows b0 = m.rows(TimelineLevel::block, m.find_block(trace::KernelRole::main, 0));
  REQUIRE(b0->size() == 2);
  CHECK((*b0)[0].label == "warp 0");
  CHECK((*b0)[0].spans.size() == 2);
  CHECK((*b0)[1].spans.size() == 1);
  CHECK(m.rows(TimelineLevel::block, 99)->empty());
}

TEST_CASE("timeline culling: a frame visits the spans near the view, not the whole row", "[viewer][timeline]") {
  // 1000 spans of 100 ns; a view of 10 of them, 1000 px wide (1 px per ns).
  const TimelineModel m = one_warp(1000, 100, [](int k) { return k % 2 ? P::opt_qk_mma : P::opt_pv_mma; });
  TimelineRectStats st;
  const std::vector<TimelineRect> r = rects_of(m, {50'000, 51'000}, 1000, 1, &st);
  // Begins in [view - longest span, view end): 49'900 .. 50'900, 11 spans;
  // the one ending exactly where the view begins is not in it.
  CHECK(st.spans_visited == 11);
  CHECK(st.spans_visible == 10);
  REQUIRE(r.size() == 10);
  int checked = 0;
  for (const TimelineRect& x : r) {
    if (x.span == kNoSpan) continue;
    CHECK(x.x1 - x.x0 == Catch::Approx(100));
    CHECK(x.x0 == Catch::Approx(static_cast<double>(m.begin_of(x.span)) - 50'000));
    CHECK(x.fill == 1.0f);
    CHECK(x.spans == 1);
    ++checked;
  }
  CHECK(checked == 10);
  // Nothing in view: nothing visited beyond the bounds.
  TimelineRectStats none;
  CHECK(rects_of(m, {200'000, 300'000}, 1000, 1, &none).empty());
  CHECK(none.spans_visited == 0);
}

TEST_CASE("timeline pixel merging: sub-pixel spans become one rectangle per column and lane", "[viewer][timeline]") {
  SECTION("the phase that covers most of each column wins; equal columns join") {
    // 10'000 spans of 10 ns: three qk_mma, then one wait, over 100 px: 100 spans a column.
    const TimelineModel m = one_warp(10'000, 10, [](int k) { return k % 4 == 3 ? P::opt_pipeline_wait : P::opt_qk_mma; });
    TimelineRectStats st;
    const std::vector<TimelineRect> r = rects_of(m, {0, 100'000}, 100, 1, &st);
    REQUIRE(r.size() == 1);
    CHECK(r[0].phase == P::opt_qk_mma);
    CHECK(r[0].x0 == 0);
    CHECK(r[0].x1 == 100);
    CHECK(r[0].fill == 1.0f);
    CHECK(r[0].spans == 10'000);
    CHECK(r[0].span == kNoSpan);
    CHECK(st.spans_visible == 10'000);
  }
  SECTION("a change of phase halfway makes two rectangles") {
    const TimelineModel m = one_warp(10'000, 10, [](int k) { return k < 5000 ? P::opt_prologue : P::opt_pv_mma; });
    const std::vector<TimelineRect> r = rects_of(m, {0, 100'000}, 100);
    REQUIRE(r.size() == 2);
    CHECK(r[0].phase == P::opt_prologue);
    CHECK(r[0].x1 == 50);
    CHECK(r[1].phase == P::opt_pv_mma);
    CHECK(r[1].x0 == 50);
  }
  SECTION("a lone short span in a column is faint, and a 0 ns span still shows") {
    std::vector<trace::Span> v = {make_span(0, 100, 0, 0, 0, P::opt_qk_mma), make_span(5000, 5000, 0, 0, 0, P::opt_pipeline_wait)};
    const TimelineModel m(with_spans(v));
    const std::vector<TimelineRect> r = rects_of(m, {0, 10'000}, 10);  // 1000 ns a pixel
    REQUIRE(r.size() == 2);
    CHECK(r[0].phase == P::opt_qk_mma);
    CHECK(r[0].fill == Catch::Approx(0.1).margin(1.0 / 16));
    CHECK(r[1].phase == P::opt_pipeline_wait);
    CHECK(r[1].x0 == 5);
    CHECK(r[1].fill > 0);
  }
  SECTION("lanes that do not fit the row's height share a drawn lane") {
    // Eight warps of one block on SM 0, all busy over [0, 1000): eight lanes
    // in a row with room for two; each drawn lane holds four busy warps.
    std::vector<trace::Span> v;
    for (int w = 0; w < 8; ++w) v.push_back(make_span(0, 1000, 0, 0, w, w < 4 ? P::opt_qk_mma : P::opt_pv_mma));
    const TimelineModel m(with_spans(v));
    REQUIRE((*m.rows(TimelineLevel::grid, -1))[0].lanes == 8);
    const std::vector<TimelineRect> r = rects_of(m, {0, 1000}, 100, 2);
    REQUIRE(r.size() == 2);
    CHECK(r[0].lane == 0);
    CHECK(r[0].phase == P::opt_qk_mma);
    CHECK(r[1].lane == 1);
    CHECK(r[1].phase == P::opt_pv_mma);
    for (const TimelineRect& x : r) {
      CHECK(x.fill == 1.0f);
      CHECK(x.x0 == 0);
      CHECK(x.x1 == 100);
      CHECK(x.spans == 4);
    }
  }
}

TEST_CASE("timeline pixel merging bounds the rectangles of a large timeline", "[viewer][timeline]") {
  test::FixtureShape f;
  f.sms = 16;
  f.blocks = 128;
  f.iters = 40;
  const TimelineModel m(test::fixture_timeline(f));
  REQUIRE(m.spans().size() > 100'000);
  const TimelineRows rows = m.rows(TimelineLevel::grid, -1);
  REQUIRE(rows->size() == 16);
  int widths = 0;
  for (int width : {200, 800}) {
    TimelineRectStats st;
    std::vector<TimelineRect> out;
    TimelineScratch scratch;
    timeline_rects(*rows, 0, 16, fit_view(m.duration_ns()), width, 1, out, scratch, &st);
    CHECK(st.spans_visible == m.spans().size());      // the fitted view shows every span
    CHECK(out.size() <= static_cast<std::size_t>(16 * width));  // at most one per column and row
    for (const TimelineRect& r : out) {
      CHECK(r.x0 >= 0);
      CHECK(r.x1 <= width);
      CHECK(r.x0 < r.x1);
    }
    ++widths;
  }
  CHECK(widths == 2);
}

TEST_CASE("timeline hit testing: the span under the pointer, or the nearest within half a pixel", "[viewer][timeline]") {
  std::vector<trace::Span> v = {make_span(0, 100, 0, 0, 0, P::opt_prologue), make_span(100, 200, 0, 0, 0, P::opt_q_frag),
                                make_span(300, 301, 0, 0, 0, P::opt_pipeline_issue),
                                make_span(302, 303, 0, 0, 0, P::opt_pipeline_wait)};
  const TimelineModel m(with_spans(v));
  const TimelineRow& row = (*m.rows(TimelineLevel::grid, -1))[0];
  struct Case {
    double t, tol;
    std::uint32_t span;
    int in_pixel;
  };
  const Case cases[] = {
      {50, 0.5, 0, 1},          // inside the first
      {150, 0.5, 1, 1},         // inside the second
      {100, 0.5, 0, 2},         // on the boundary: both within the pixel; the first (same length) wins
      {250, 10, kNoSpan, 0},    // in the gap, too far from both
      {298, 3, 2, 1},           // before the short span, within tolerance
      {301.5, 1, 2, 2},         // between two short spans: both within the pixel, the nearer (equal: the first)
  };
  int n = 0;
  for (const Case& c : cases) {
    const TimelineHit h = timeline_hit(row, 1, 0, c.t, c.tol);
    INFO("t = " << c.t);
    CHECK(h.span == c.span);
    CHECK(h.in_pixel == c.in_pixel);
    ++n;
  }
  CHECK(n == 6);
  // Another drawn lane of the row has none of them.
  CHECK(timeline_hit(row, 1, 1, 50, 0.5).span == kNoSpan);

  // Lanes merged: the shortest of the spans covering the time.
  std::vector<trace::Span> w = {make_span(0, 1000, 0, 0, 0, P::opt_pv_mma), make_span(400, 600, 0, 0, 1, P::opt_qk_mma)};
  const TimelineModel mm(with_spans(w));
  const TimelineRow& merged = (*mm.rows(TimelineLevel::grid, -1))[0];
  REQUIRE(merged.lanes == 2);
  CHECK(mm.spans()[timeline_hit(merged, 1, 0, 500, 0.5).span].phase == P::opt_qk_mma);
  CHECK(timeline_hit(merged, 2, 0, 500, 0.5).span == 0);  // lanes drawn apart: lane 0 is warp 0
}

TEST_CASE("timeline zoom keeps the time under the pointer; pan and fit stay on the timeline", "[viewer][timeline]") {
  const std::uint64_t d = 100'000;
  const TimeRange fit = fit_view(d);
  CHECK(fit.begin == Catch::Approx(-1000));
  CHECK(fit.end == Catch::Approx(101'000));
  CHECK(fit_view(0).width() > 0);
  int zooms = 0;
  for (double at : {0.0, 25'000.0, 99'000.0})
    for (double factor : {1.25, 4.0, 0.8}) {
      const TimeRange z = zoom_view({0, 100'000}, at, factor, d);
      CHECK(z.width() == Catch::Approx(100'000 / factor));
      CHECK(time_at(z, x_of({0, 100'000}, at, 1000), 1000) == Catch::Approx(at).margin(1e-6));
      ++zooms;
    }
  CHECK(zooms == 9);
  CHECK(zoom_view({0, 100}, 50, 1e9, d).width() == Catch::Approx(kMinViewNs));
  CHECK(zoom_view(fit, 50'000, 1e-9, d).width() == Catch::Approx(4 * fit.width()));
  // Pan: at most 90% of the view leaves the timeline on either side.
  const TimeRange left = pan_view({0, 1000}, -1e9, d);
  CHECK(left.begin == Catch::Approx(-900));
  CHECK(left.width() == Catch::Approx(1000));
  CHECK(pan_view({0, 1000}, 1e9, d).begin == Catch::Approx(d - 100));
  CHECK(pan_view({0, 1000}, 500, d).begin == Catch::Approx(500));
}

TEST_CASE("timeline axis: ticks of 1, 2 or 5 x 10^k ns; durations and tick labels in their unit", "[viewer][timeline]") {
  struct Tick {
    double view, width, min_px, step;
  };
  const Tick ticks[] = {{100'000, 1000, 100, 10'000}, {100'000, 1000, 150, 20'000}, {1000, 1000, 30, 50},
                        {7, 700, 100, 1}};
  int n = 0;
  for (const Tick& t : ticks) {
    CHECK(tick_step_ns(t.view, t.width, t.min_px) == Catch::Approx(t.step));
    ++n;
  }
  CHECK(n == 4);
  const std::pair<double, const char*> durations[] = {{850, "850 ns"},      {12'400, "12.4 us"}, {1'250, "1.25 us"},
                                                      {125'000, "125 us"}, {3'250'000, "3.25 ms"}, {1.2e9, "1.20 s"},
                                                      {0, "0 ns"}};
  int m = 0;
  for (const auto& [ns, text] : durations) {
    CHECK(format_ns(ns) == text);
    ++m;
  }
  CHECK(m == 7);
  CHECK(format_tick(12'340, 20, 13'000) == "12.34 us");
  CHECK(format_tick(0, 10'000, 100'000) == "0 us");
  CHECK(format_tick(-500, 500, 3000) == "-0.5 us");
  CHECK(format_tick(400, 100, 900) == "400 ns");
  CHECK(cycles_to_ns(1980, 1'980'000) == Catch::Approx(1000));
  CHECK(cycles_to_ns(1980, 0) < 0);
}

TEST_CASE("timeline link: every lesson anchor names the phases of its step function, or none on purpose",
          "[viewer][timeline]") {
  std::set<std::string> anchors;
  for (const auto& e : lesson::list_lessons(PA_LESSONS_DIR))
    for (const LessonMarker& m : lesson_markers(lesson::load_lesson(e.path), e.number))
      if (!m.marker.anchor.empty()) anchors.insert(m.marker.anchor);
  // Run before the first timed step: no phase times it on its own.
  const std::set<std::string> untimed = {"v2_partition.range"};
  int n = 0;
  for (const std::string& a : anchors) {
    INFO(a);
    const std::uint32_t mask = phases_of_anchor(a);
    CHECK((mask != 0) == (untimed.count(a) == 0));
    ++n;
  }
  CHECK(n == 40);  // optimized.qk_mma_fp8, pv_mma_fp8, q_to_fp16 and store_item among them
  CHECK(phases_of_anchor("optimized.qk_mma") == phase_bit(P::opt_qk_mma));
  CHECK(phases_of_anchor("qk.k_load") == phase_bit(P::qk));
  CHECK(phases_of_anchor("lv.row_reduce") == phase_bit(P::lv));
  CHECK(phases_of_anchor("v2_partition.reduce_max") == phase_bit(P::partition_reduce));
  CHECK(phases_of_anchor("optimized.split_merge") ==
        (phase_bit(P::opt_split_arrive) | phase_bit(P::opt_merge_states) | phase_bit(P::opt_merge_load_stats) |
         phase_bit(P::opt_merge_weights) | phase_bit(P::opt_merge_sum_store)));
  CHECK(phases_of_anchor("qkx.k_load") == 0);
  CHECK(phases_of_anchor("") == 0);
}

TEST_CASE("timeline loading: a good file indexes; a missing, corrupt or truncated one throws a message naming it",
          "[viewer][timeline]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pa_viewer_timeline_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const trace::TimelineData d = test::fixture_timeline({});
  const std::string good = (dir / "good.patl").string();
  trace::write_timeline(good, d);
  const TimelineModel m(trace::read_timeline(good), good);
  CHECK(m.spans().size() == d.spans.size());
  CHECK(m.header().source == test::kFixtureSource);
  CHECK(m.path() == good);

  const std::vector<std::uint8_t> bytes = trace::serialize_timeline(d);
  const std::string corrupt = (dir / "corrupt.patl").string();
  std::ofstream(corrupt, std::ios::binary) << "PALTIMEL but not a timeline";
  const std::string truncated = (dir / "truncated.patl").string();
  std::ofstream(truncated, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                   static_cast<std::streamsize>(bytes.size() / 2));
  int n = 0;
  for (const std::string& bad : {(dir / "missing.patl").string(), corrupt, truncated}) {
    INFO(bad);
    try {
      (void)TimelineModel(trace::read_timeline(bad), bad);
      FAIL("loaded a bad timeline");
    } catch (const trace::TimelineFormatError& e) {
      CHECK(std::string(e.what()).find(bad) != std::string::npos);
    }
    ++n;
  }
  CHECK(n == 3);
  fs::remove_all(dir);
}

TEST_CASE("the Trace tab's timeline list: *.patl files at any depth, nothing else", "[viewer][timeline]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pa_viewer_timelines_" + std::to_string(::getpid()));
  fs::create_directories(dir / "nvidia-h100");
  for (const char* name : {"nvidia-h100/optimized.patl", "v1.patl", "qk.patrace", "notes.txt"})
    std::ofstream(dir / name) << "x";
  const std::vector<TraceFileEntry> found = list_trace_files(dir, ".patl");
  REQUIRE(found.size() == 2);
  CHECK(found[0].relative == "nvidia-h100/optimized.patl");
  CHECK(found[1].relative == "v1.patl");
  CHECK(list_trace_files(dir).size() == 1);  // the traces: qk.patrace
  fs::remove_all(dir);
}
