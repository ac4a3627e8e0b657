// The Timeline panel in the running viewer (headless, under xvfb-run), on a
// timeline the test writes first from timeline_fixture.hpp (a TEST FIXTURE,
// not a measurement). Checked against the state --dump-layout writes and the
// picture: the three levels' rows; a span lit in its phase's colour where the
// view puts it; hovering a span names it; a phase picked in the legend, or
// the phase of the replay's step (lesson 8's qk_dot: opt_qk_mma), is
// highlighted and the others dimmed; the wheel zooms around the pointer, a
// drag pans, F fits; dropped spans show a warning;
// a missing or corrupt file is a message with the reader's words, not a
// crash; a bad --timeline-view is a usage error.
// SKIPPED (not passed) when xvfb-run or an OpenGL 3.3 context is unavailable.
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "screenshot_image.hpp"
#include "viewer_process.hpp"
#include "core/highlight.hpp"
#include "core/lesson_problem.hpp"
#include "core/timeline_model.hpp"
#include "core/timeline_view.hpp"
#include "core/trace_index.hpp"
#include "pa/trace/host_model.hpp"
#include "timeline_fixture.hpp"

namespace fs = std::filesystem;
using namespace pa;
using namespace pa::viewer;
using P = trace::Phase;
using Dump = std::map<std::string, std::vector<double>>;

namespace {

const std::string kExe = PA_VIEWER_EXE;
const std::string kOut = std::string(PA_TEST_OUT_DIR) + "/timeline";

// Each run's output in a folder of its own (kOut/logs/NAME, test::viewer_log): ctest
// runs these cases in parallel.
std::string log_dir(const std::string& name) { return kOut + "/logs/" + name; }
int run(const std::string& name, const std::string& args, bool xvfb = true) {
  return test::run_viewer(kExe, args, log_dir(name), xvfb);
}

// Renders with `args`, returns the dump; the PNG is kOut/name.png.
Dump shot(const std::string& name, const std::string& args) {
  const std::string png = kOut + "/" + name + ".png";
  REQUIRE(run(name, args + " --size 1600x1000 --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  return test::load_dump(png + ".txt");
}

using test::Image;
using test::rgb255;
Image load(const std::string& name) { return test::load_image(kOut + "/" + name + ".png"); }
bool same(std::array<int, 3> a, std::array<int, 3> b, int tol = 3) { return test::same(a, b, tol); }
int brightness(std::array<int, 3> a) { return a[0] + a[1] + a[2]; }

// The fixture on disk, and its index (the test's own reading of it).
struct Fixture {
  std::string path;
  TimelineModel model;
};
const Fixture& fixture() {
  static const Fixture f = [] {
    fs::create_directories(kOut);
    const std::string path = kOut + "/fixture.patl";
    const trace::TimelineData d = test::fixture_timeline({});
    trace::write_timeline(path, d);
    return Fixture{path, TimelineModel(d, path)};
  }();
  return f;
}

// Where span i is drawn at the block level (one warp per row, one lane),
// from the dumped plot geometry and view: the middle of its rectangle.
std::pair<int, int> span_pixel(const Dump& d, const TimelineModel& m, std::uint32_t i) {
  const auto& plot = d.at("timeline_plot");  // x y w h
  const auto& view = d.at("timeline_view");  // begin end
  const auto& rows = d.at("timeline_rows");  // n row_h scroll lane_capacity
  const double mid = (static_cast<double>(m.begin_of(i)) + static_cast<double>(m.end_of(i))) / 2;
  const double x = plot[0] + x_of({view[0], view[1]}, mid, plot[2]);
  const double y = plot[1] + m.spans()[i].warp * rows[1] - rows[2] + rows[1] * 0.4;
  // Inside the plot (and so the picture).
  REQUIRE(x >= plot[0]);
  REQUIRE(x < plot[0] + plot[2]);
  REQUIRE(y >= plot[1]);
  REQUIRE(y < plot[1] + plot[3]);
  return {static_cast<int>(x), static_cast<int>(y)};
}

// The longest span of a phase in warp 0 of the main kernel's block 0.
std::uint32_t longest(const TimelineModel& m, P phase, int warp = 0) {
  std::uint32_t best = kNoSpan;
  for (std::uint32_t i = 0; i < m.spans().size(); ++i) {
    const trace::Span& s = m.spans()[i];
    if (s.block != 0 || s.warp != warp || s.phase != phase) continue;
    if (best == kNoSpan || s.t_end_ns - s.t_begin_ns > m.spans()[best].t_end_ns - m.spans()[best].t_begin_ns) best = i;
  }
  REQUIRE(best != kNoSpan);
  return best;
}

// What most cases show: block 0's warps, beside lesson 1 (whose steps no
// stage 8 phase times, so nothing is highlighted).
std::string block0_args() { return "--lesson 1 --timeline " + fixture().path + " --timeline-view block:0"; }
// The pointer at (x, y).
std::string mouse_at(int x, int y) { return " --mouse " + std::to_string(x) + "," + std::to_string(y); }

// Pixels of the load-error red (the toolbar's and the panel's warnings).
int red_pixels(const Image& im) {
  int n = 0;
  for (int y = 0; y < im.h; ++y)
    for (int x = 0; x < im.w; ++x) n += same(im.at(x, y), {255, 115, 102}, 12);
  return n;
}

}  // namespace

TEST_CASE("timeline: the three levels' rows, and a span lit in its phase's colour where the view puts it",
          "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  const Fixture& f = fixture();
  const TimelineModel& m = f.model;

  // The grid: one row per SM of the header, every span loaded, no highlight
  // (lesson 1's step is q_to_smem, which a stage 8 timeline does not time).
  const Dump grid = shot("grid", "--lesson 1 --timeline " + f.path);
  CHECK(grid.at("timeline")[0] == 1);
  CHECK(grid.at("timeline_error")[0] == 0);
  CHECK(grid.at("timeline_spans")[0] == static_cast<double>(m.spans().size()));
  CHECK(grid.at("timeline_level")[0] == 0);
  CHECK(grid.at("timeline_rows")[0] == m.num_sms());
  CHECK(grid.at("timeline_rects")[0] > 0);
  CHECK(grid.at("timeline_highlight")[0] == 0);
  // The legend: one swatch per phase present (phase, x0, y0, x1, y1 each).
  CHECK(grid.at("timeline_legend").size() == 5 * static_cast<std::size_t>(__builtin_popcount(m.phases_present())));

  // SM 0's blocks: the fixture puts blocks 0 and 8 there, each with its four warps as lanes.
  const Dump sm = shot("sm0", "--lesson 1 --timeline " + f.path + " --timeline-view sm:0");
  CHECK(sm.at("timeline_level")[0] == 1);
  CHECK(sm.at("timeline_level")[1] == 0);
  CHECK(sm.at("timeline_rows")[0] == static_cast<double>(m.blocks_on_sm(0).size()));
  CHECK(m.blocks_on_sm(0).size() == 2);

  // Block 0's warps: each span at least a pixel wide is drawn in its phase's
  // colour (nothing highlighted: full colour) at the place the view puts it.
  const Dump blk = shot("block0", block0_args());
  CHECK(blk.at("timeline_level")[0] == 2);
  CHECK(blk.at("timeline_rows")[0] == 4);
  const Image im = load("block0");
  int lit = 0;
  for (P phase : {P::opt_prologue, P::opt_q_frag, P::opt_pipeline_wait, P::opt_qk_mma, P::opt_pv_mma, P::opt_warp_merge})
    for (int warp : {0, 3}) {
      const std::uint32_t i = longest(m, phase, warp);
      const auto [x, y] = span_pixel(blk, m, i);
      INFO(trace::to_string(phase) << " warp " << warp << " at " << x << "," << y);
      CHECK(same(im.at(x, y), rgb255(phase_color(phase))));
      ++lit;
    }
  CHECK(lit == 12);
}

TEST_CASE("timeline: hovering a span names it; F fits", "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  const TimelineModel& m = fixture().model;
  const std::string args = block0_args();
  const Dump blk = shot("block0_plain", args);
  int hovered = 0;
  for (P phase : {P::opt_pv_mma, P::opt_prologue}) {
    const std::uint32_t i = longest(m, phase, 1);
    const auto [x, y] = span_pixel(blk, m, i);
    const std::string name = std::string("hover_") + trace::to_string(phase);
    const Dump h = shot(name, args + mouse_at(x, y));
    CHECK(h.at("timeline_hover")[0] == static_cast<double>(i));
    ++hovered;
  }
  CHECK(hovered == 2);
  // Off the rows: nothing hovered.
  const auto& plot = blk.at("timeline_plot");
  const Dump off = shot("hover_none", args + mouse_at(5, static_cast<int>(plot[1] - 40)));
  CHECK(off.at("timeline_hover")[0] == -1);
  // F: the fitted view (it opens fitted, so the view stays).
  const Dump fit = shot("fit", args + " --keys F");
  const TimeRange want = fit_view(m.duration_ns());
  CHECK(std::abs(fit.at("timeline_view")[0] - want.begin) < 1e-3 * want.width());
  CHECK(std::abs(fit.at("timeline_view")[1] - want.end) < 1e-3 * want.width());
}

TEST_CASE("timeline: the wheel zooms around the pointer; a drag pans", "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  const TimelineModel& m = fixture().model;
  const std::string args = block0_args();
  const Dump before = shot("zoom_before", args);
  const auto& plot = before.at("timeline_plot");
  const TimeRange fit{before.at("timeline_view")[0], before.at("timeline_view")[1]};
  const std::uint32_t i = longest(m, P::opt_qk_mma, 2);
  const auto [x, y] = span_pixel(before, m, i);
  const double t = time_at(fit, x - plot[0], plot[2]);
  int zooms = 0;
  for (int notches : {2, -1}) {
    const Dump z = shot("zoom_" + std::to_string(notches + 10), args + mouse_at(x, y) + " --wheel " + std::to_string(notches));
    const TimeRange v{z.at("timeline_view")[0], z.at("timeline_view")[1]};
    INFO(notches << " notches");
    CHECK(v.width() == Catch::Approx(fit.width() / std::pow(1.25, notches)).epsilon(1e-4));
    // The time under the pointer stays there.
    CHECK(time_at(v, x - plot[0], plot[2]) == Catch::Approx(t).margin(fit.width() * 1e-4));
    ++zooms;
  }
  CHECK(zooms == 2);
  // Dragging 200 px left shows what was 200 px to the right.
  const Dump d = shot("drag", args + mouse_at(x, y) + " --drag -200,0");
  CHECK(d.at("timeline_view")[0] == Catch::Approx(fit.begin + 200 / plot[2] * fit.width()).margin(fit.width() * 1e-4));
  CHECK(d.at("timeline_view")[1] - d.at("timeline_view")[0] == Catch::Approx(fit.width()).epsilon(1e-4));
}

TEST_CASE("timeline: a phase picked in the legend, or the replay step's phase, is highlighted",
          "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  const Fixture& f = fixture();
  const TimelineModel& m = f.model;
  const std::string args = block0_args();
  const Dump plain = shot("legend_before", args);
  // Click the pipeline_wait swatch.
  const auto& legend = plain.at("timeline_legend");
  int cx = -1, cy = -1;
  for (std::size_t k = 0; k + 4 < legend.size(); k += 5)
    if (static_cast<int>(legend[k]) == static_cast<int>(P::opt_pipeline_wait)) {
      cx = static_cast<int>((legend[k + 1] + legend[k + 3]) / 2);
      cy = static_cast<int>((legend[k + 2] + legend[k + 4]) / 2);
    }
  REQUIRE(cx >= 0);
  const Dump picked = shot("legend_wait", args + mouse_at(cx, cy) + " --click");
  CHECK(picked.at("timeline_highlight")[0] == phase_bit(P::opt_pipeline_wait));
  const Image im = load("legend_wait");
  {
    const auto [x, y] = span_pixel(picked, m, longest(m, P::opt_pipeline_wait));
    CHECK(same(im.at(x, y), rgb255(phase_color(P::opt_pipeline_wait))));
  }
  {
    const auto [x, y] = span_pixel(picked, m, longest(m, P::opt_qk_mma));
    const auto full = rgb255(phase_color(P::opt_qk_mma));
    CHECK(brightness(im.at(x, y)) < brightness(full) * 6 / 10);  // dimmed towards the background
  }

  // Lesson 8 at a qk_dot step (its lesson anchor: optimized.qk_mma).
  if (!trace::stage_is_modelled(trace::Stage::optimized)) SKIP("no host model of stage 8 in this build");
  const ProblemSpec spec = lesson_problem(ProblemSpec{}, trace::Stage::optimized, 0).spec;
  const auto events = trace::model_events(spec, trace::Stage::optimized, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  const int K = idx.find_step(0, trace::Step::qk_dot);
  REQUIRE(K > 0);
  const Dump linked = shot("replay_qk", "--lesson 8 --step " + std::to_string(K) + " --timeline " + f.path +
                                            " --timeline-view block:0");
  CHECK(linked.at("step")[0] == K);
  CHECK(linked.at("timeline_highlight")[0] == phase_bit(P::opt_qk_mma));
  const Image il = load("replay_qk");
  {
    const auto [x, y] = span_pixel(linked, m, longest(m, P::opt_qk_mma));
    CHECK(same(il.at(x, y), rgb255(phase_color(P::opt_qk_mma))));
  }
  {
    const auto [x, y] = span_pixel(linked, m, longest(m, P::opt_pv_mma));
    CHECK(brightness(il.at(x, y)) < brightness(rgb255(phase_color(P::opt_pv_mma))) * 6 / 10);
  }
}

TEST_CASE("timeline: dropped spans are a visible warning", "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  const std::string path = kOut + "/dropped.patl";
  test::FixtureShape shape;
  shape.dropped = 1234;
  trace::write_timeline(path, test::fixture_timeline(shape));
  shot("with_dropped", "--lesson 1 --timeline " + path);
  shot("without_dropped", "--lesson 1 --timeline " + fixture().path);
  // The warning's red text, and none of it without drops.
  CHECK(red_pixels(load("with_dropped")) > red_pixels(load("without_dropped")) + 200);
}

TEST_CASE("timeline: a missing or corrupt file is a message with the reader's words; bad flags are usage errors",
          "[viewer][screenshot][timeline]") {
  test::require_viewer_display(kExe, kOut);
  fs::create_directories(kOut);
  const std::string corrupt = kOut + "/corrupt.patl";
  std::ofstream(corrupt, std::ios::binary) << "PALTIMEL not really a timeline";
  int n = 0;
  for (const std::string& bad : {corrupt, kOut + "/missing.patl"}) {
    std::string reader;
    try {
      trace::read_timeline(bad);
    } catch (const trace::TimelineFormatError& e) {
      reader = e.what();
    }
    REQUIRE(!reader.empty());
    const std::string name = "error_" + std::to_string(n);
    const Dump d = shot(name, "--lesson 1 --timeline " + bad);
    CHECK(d.at("timeline")[0] == 0);
    CHECK(d.at("timeline_error")[0] == 1);
    CHECK(d.at("load_error")[0] == 0);  // the trace is not affected
    std::ifstream log(test::viewer_log(log_dir(name)));
    std::stringstream text;
    text << log.rdbuf();
    CHECK(text.str().find(reader) != std::string::npos);
    // The message is drawn in the panel (red text).
    CHECK(red_pixels(load(name)) > 200);
    ++n;
  }
  CHECK(n == 2);
  CHECK(run("usage", "--timeline-view sm:x --timeline " + fixture().path, false) == 2);
  CHECK(run("usage", "--timeline-view block:warp:0 --timeline " + fixture().path, false) == 2);
  CHECK(run("usage", "--timeline-view grid", false) == 2);  // needs --timeline
  // A block the timeline lacks: a note, and the grid.
  const Dump d = shot("no_such_block", "--lesson 1 --timeline " + fixture().path + " --timeline-view block:reduce:0");
  CHECK(d.at("timeline_level")[0] == 0);
}

TEST_CASE("timeline: a lesson's link to a timeline opens it on a click; a hover only names the link",
          "[viewer][screenshot][timeline]") {
  // A lessons folder of one lesson whose first paragraph links the fixture
  // (relative to the lesson's folder, as the lessons link assets/timelines/),
  // a missing timeline and a cited figure.
  const std::string dir = kOut + "/link_lessons";
  fs::create_directories(dir);
  fs::copy_file(fixture().path, dir + "/fixture.patl", fs::copy_options::overwrite_existing);
  {
    std::ofstream f(dir + "/01_links.md");
    f << "# Lesson 1: links\n\nOpen [fixture.patl](fixture.patl), [gone.patl](gone.patl) or read "
         "[12.8 us](summary.json#timelines:file=x:window_us).\n";
  }
  const std::string args = "--lessons-dir " + dir + " --lesson 1";
  // A dump line per link word: "KEY x0 y0 x1 y1 url"; the middle of the first word of each link.
  const std::string layout_png = kOut + "/links_layout.png";
  REQUIRE(run("links_layout", args + " --size 1600x1000 --screenshot " + layout_png + " --dump-layout " + layout_png +
                                  ".txt") == 0);
  std::map<std::string, std::pair<int, int>> at;  // url -> pixel
  int timeline_links = 0, other_links = 0;
  {
    std::ifstream in(layout_png + ".txt");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string key, url;
      double x0, y0, x1, y1;
      ls >> key;
      if (key != "lesson_timeline_link" && key != "lesson_link") continue;
      REQUIRE(static_cast<bool>(ls >> x0 >> y0 >> x1 >> y1 >> url));
      (key == "lesson_timeline_link" ? timeline_links : other_links) += 1;
      at.try_emplace(url, static_cast<int>((x0 + x1) / 2), static_cast<int>((y0 + y1) / 2));
    }
  }
  CHECK(timeline_links == 2);  // fixture.patl, gone.patl: one word each
  CHECK(other_links == 2);     // "12.8", "us"
  REQUIRE(at.count("fixture.patl") == 1);
  REQUIRE(at.count("gone.patl") == 1);
  REQUIRE(at.count("summary.json#timelines:file=x:window_us") == 1);

  // Hover: the link is named, nothing opens.
  const auto [hx, hy] = at["fixture.patl"];
  const Dump hover = shot("links_hover", args + mouse_at(hx, hy));
  CHECK(hover.at("timeline")[0] == 0);
  // Click: the fixture opens below the replay, every span of it.
  const Dump click = shot("links_click", args + mouse_at(hx, hy) + " --click");
  REQUIRE(click.at("timeline")[0] == 1);
  CHECK(click.at("timeline_error")[0] == 0);
  CHECK(click.at("timeline_spans")[0] == static_cast<double>(fixture().model.spans().size()));
  // A figure's link opens nothing; a missing timeline is the panel's message, not a crash.
  const auto [fx, fy] = at["summary.json#timelines:file=x:window_us"];
  CHECK(shot("links_figure", args + mouse_at(fx, fy) + " --click").at("timeline")[0] == 0);
  const auto [gx, gy] = at["gone.patl"];
  const Dump gone = shot("links_gone", args + mouse_at(gx, gy) + " --click");
  CHECK(gone.at("timeline")[0] == 0);
  CHECK(gone.at("timeline_error")[0] == 1);
}
