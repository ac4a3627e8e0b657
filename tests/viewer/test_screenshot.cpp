// Screenshot tests: pa-viewer renders headless under xvfb-run (Mesa), and the
// images are checked against the layout code: the K element a thread loads at
// step K is lit in that thread's colour at step K and not at step K-1, exactly
// where KvPanelLayout says the element is; untouched cells do not change. Also:
// bad arguments exit 2; a missing or corrupt trace, a missing lesson and a
// tiny window give a picture with a message, not a crash; every lesson loads
// its trace without error (the state --dump-layout writes); with an fp8 KV
// cache, each load lights the one-byte elements it reads, and a stage that
// cannot take fp8 says so.
// SKIPPED (not passed) when xvfb-run or an OpenGL 3.3 context is unavailable.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "screenshot_image.hpp"
#include "viewer_process.hpp"
#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/lesson_problem.hpp"
#include "core/trace_index.hpp"
#include "core/trace_load.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"

namespace fs = std::filesystem;
using namespace pa;
using namespace pa::viewer;

namespace {

const std::string kExe = PA_VIEWER_EXE;
const std::string kOut = PA_TEST_OUT_DIR;

int run(const std::string& args, bool xvfb = true) { return pa::viewer::test::run_viewer(kExe, args, kOut, xvfb); }

void require_display() {
  pa::viewer::test::require_viewer_display(kExe, kOut);
}

using pa::viewer::test::Image;
using pa::viewer::test::rgb255;
using pa::viewer::test::same;
Image load(const std::string& path) { return pa::viewer::test::load_image(path); }

struct Dump {
  std::map<std::string, std::vector<float>> v;
};

Dump load_dump(const std::string& path) {
  Dump d;
  for (const auto& [key, values] : pa::viewer::test::load_dump(path)) d.v[key].assign(values.begin(), values.end());
  return d;
}

KvPanelLayout kv_from(const Dump& d) {
  const auto& p = d.v.at("kv_layout");
  REQUIRE(p.size() == 15);
  KvPanelLayout l;
  l.head_size = static_cast<int>(p[0]);
  l.block_size = static_cast<int>(p[1]);
  l.x = static_cast<int>(p[2]);
  l.band_rows = static_cast<int>(p[3]);
  l.slots = static_cast<int>(p[4]);
  l.show_k = p[5] != 0;
  l.show_v = p[6] != 0;
  l.cell_w = p[7];
  l.cell_h = p[8];
  l.chunk_gap = p[9];
  l.label_w = p[10];
  l.part_gap = p[11];
  l.slot_gap = p[12];
  l.title_h = p[13];
  l.token_rows = p[14] != 0;
  return l;
}

}  // namespace

TEST_CASE("screenshot: the K element loaded at step K lights up where the layout puts it", "[viewer][screenshot]") {
  require_display();
  // The same problem and stage the viewer shows for lesson 2 (the QK stage, defaults).
  ProblemSpec spec;
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  const ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size);
  const KvLayoutGeometry g = c.cache(spec.num_kv_heads);
  // Step K: the second K-load instruction (so step K-1 is a K load of other elements).
  const int k0 = idx.find_step(0, trace::Step::k_load);
  REQUIRE(k0 >= 0);
  const int K = idx.find_step(0, trace::Step::k_load, k0 + 1);
  REQUIRE(K > 0);
  // Element: the first one loaded by warp 0 lane 0 at step K.
  trace::Event e{};
  for (auto i : idx.events_of(0, K))
    if (events[i].warp == 0 && events[i].lane == 0 && events[i].tensor == trace::Tensor::k_cache) e = events[i];
  REQUIRE(e.tensor == trace::Tensor::k_cache);
  const auto el = g.k_coords(e.byte_offset / c.elem_bytes);
  for (auto i : idx.events_of(0, K - 1))
    REQUIRE_FALSE(touches(events[i], trace::Tensor::k_cache, e.byte_offset, c.elem_bytes));

  const std::string a = kOut + "/qk_step" + std::to_string(K) + ".png", b = kOut + "/qk_step" + std::to_string(K - 1) + ".png";
  REQUIRE(run("--lesson 2 --step " + std::to_string(K) + " --size 1600x1000 --screenshot " + a + " --dump-layout " + a + ".txt") == 0);
  REQUIRE(run("--lesson 2 --step " + std::to_string(K - 1) + " --size 1600x1000 --screenshot " + b + " --dump-layout " + b + ".txt") == 0);
  const Image ia = load(a), ib = load(b);
  REQUIRE(ia.w == 1600);
  REQUIRE(ia.h == 1000);
  REQUIRE(ib.w == ia.w);
  const Dump da = load_dump(a + ".txt"), db = load_dump(b + ".txt");
  REQUIRE(da.v.count("kv_origin"));
  REQUIRE(da.v.at("kv_origin") == db.v.at("kv_origin"));  // same layout in both frames
  const KvPanelLayout l = kv_from(da);
  REQUIRE(l.show_k);
  const auto& slots = da.v.at("slots");
  int slot = -1;
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (static_cast<int>(slots[i]) == el.physical_block) slot = static_cast<int>(i);
  REQUIRE(slot >= 0);
  const float ox = da.v.at("kv_origin")[0], oy = da.v.at("kv_origin")[1];
  const Rect r = l.k_cell(slot, el.d, el.t).offset(ox, oy);
  const int px = static_cast<int>((r.x0 + r.x1) * 0.5f), py = static_cast<int>((r.y0 + r.y1) * 0.5f);
  INFO("element phys " << el.physical_block << " d " << el.d << " t " << el.t << " at pixel " << px << "," << py);
  REQUIRE(px >= 0);
  REQUIRE(py >= 0);
  REQUIRE(px < ia.w);
  REQUIRE(py < ia.h);
  // Lit at step K in warp 0 lane 0's colour...
  const Rgba tc = thread_color(0, 0, c.num_warps);
  const std::array<int, 3> want{static_cast<int>(tc.r * 255 + 0.5f), static_cast<int>(tc.g * 255 + 0.5f),
                                static_cast<int>(tc.b * 255 + 0.5f)};
  CHECK(same(ia.at(px, py), want));
  // ... and not at step K-1.
  CHECK_FALSE(same(ib.at(px, py), ia.at(px, py), 10));
  // A cell nobody touches at either step (the last token of a full block at
  // the last dim of another chunk) is the same in both.
  int other_d = -1;
  for (int d = c.head_size - 1; d >= 0 && other_d < 0; --d) {
    bool touched = false;
    for (int step : {K, K - 1})
      for (auto i : idx.events_of(0, step))
        touched |= touches(events[i], trace::Tensor::k_cache, g.k_offset(el.physical_block, 0, d, el.t) * c.elem_bytes, c.elem_bytes);
    if (!touched) other_d = d;
  }
  REQUIRE(other_d >= 0);

  // Clicking the element (synthetic pointer) selects it: a white outline
  // around exactly that cell, and the touching thread keeps its full colour
  // in the thread grid while the others dim.
  const std::string cpath = kOut + "/qk_click.png";
  REQUIRE(run("--lesson 2 --step " + std::to_string(K) + " --size 1600x1000 --mouse " + std::to_string(px) + "," +
              std::to_string(py) + " --click --screenshot " + cpath + " --dump-layout " + cpath + ".txt") == 0);
  const Image ic = load(cpath);
  CHECK(same(ic.at(static_cast<int>(r.x0) - 2, py), {255, 255, 255}, 30));
  CHECK(same(ia.at(static_cast<int>(r.x0) - 2, py), {255, 255, 255}, 30) == false);
  const Rect q = l.k_cell(slot, other_d, el.t).offset(ox, oy);
  const int qx = static_cast<int>((q.x0 + q.x1) * 0.5f), qy = static_cast<int>((q.y0 + q.y1) * 0.5f);
  CHECK(same(ia.at(qx, qy), ib.at(qx, qy), 0));
}

TEST_CASE("screenshot: the selected thread's cell is outlined and others dimmed", "[viewer][screenshot]") {
  require_display();
  const std::string a = kOut + "/select.png";
  REQUIRE(run("--lesson 2 --step 5 --select warp=2,lane=9 --screenshot " + a + " --dump-layout " + a + ".txt") == 0);
  const Image im = load(a);
  const Dump d = load_dump(a + ".txt");
  REQUIRE(d.v.count("grid_layout"));
  const auto& p = d.v.at("grid_layout");
  ThreadGridLayout g;
  g.warps = static_cast<int>(p[0]);
  g.lanes = static_cast<int>(p[1]);
  g.group_size = static_cast<int>(p[2]);
  g.cell = p[3];
  g.label_w = p[4];
  g.header_h = p[5];
  g.row_gap = p[6];
  const float ox = d.v.at("grid_origin")[0], oy = d.v.at("grid_origin")[1];
  auto centre = [&](int w, int l) {
    const Rect r = g.cell_rect(w, l).offset(ox, oy);
    return im.at(static_cast<int>((r.x0 + r.x1) / 2), static_cast<int>((r.y0 + r.y1) / 2));
  };
  const int num_warps = g.warps;
  auto expect = [&](int w, int l) {
    const Rgba c = thread_color(w, l, num_warps);
    return std::array<int, 3>{static_cast<int>(c.r * 255 + 0.5f), static_cast<int>(c.g * 255 + 0.5f),
                              static_cast<int>(c.b * 255 + 0.5f)};
  };
  CHECK(same(centre(2, 9), expect(2, 9)));        // the selected thread: full colour
  CHECK_FALSE(same(centre(2, 10), expect(2, 10), 12));  // its neighbour: dimmed
  // The outline: white just outside the selected cell.
  const Rect r = g.cell_rect(2, 9).offset(ox, oy);
  CHECK(same(im.at(static_cast<int>((r.x0 + r.x1) / 2), static_cast<int>(r.y0)), {255, 255, 255}, 40));
}

TEST_CASE("screenshot: bad input gives usage or a message, never a crash", "[viewer][screenshot]") {
  // Usage errors need no display.
  CHECK(run("--bogus", false) == 2);
  CHECK(run("--lesson 42", false) == 2);
  CHECK(run("--size 5x5", false) == 2);
  CHECK(run("--help", false) == 0);
  // A trace file that does not exist is a bad --trace value: refused before a
  // window opens, nothing written (tests/cli/test_bad_flags.cpp has the rest).
  const std::string m = kOut + "/missing_trace.png";
  fs::remove(m);
  CHECK(run("--trace /nonexistent/x.patrace --screenshot " + m, false) == 2);
  CHECK_FALSE(fs::exists(m));
  require_display();
  // Corrupt trace: the file exists, so the window opens (host model) with the message.
  const std::string bad = kOut + "/corrupt.patrace";
  { std::ofstream(bad) << "PALTRACE this is not a trace"; }
  const std::string c = kOut + "/corrupt_trace.png";
  CHECK(run("--trace " + bad + " --screenshot " + c) == 0);
  CHECK(fs::exists(c));
  // Missing lessons directory.
  const std::string nl = kOut + "/no_lessons.png";
  CHECK(run("--lessons-dir /nonexistent --screenshot " + nl) == 0);
  CHECK(fs::exists(nl));
  // Shrinking to tiny sizes (down to 1x1) and back, then a full-size picture.
  const std::string rs = kOut + "/resized.png";
  CHECK(run("--lesson 2 --step 6 --exercise-resize --size 1280x800 --screenshot " + rs) == 0);
  if (fs::exists(rs)) {
    const Image im = load(rs);
    CHECK(im.w == 1280);
    CHECK(im.h == 800);
  }
  // The same at --scale 2 (fonts and cells twice as large in a 1x1 window).
  const std::string rs2 = kOut + "/resized_scale2.png";
  CHECK(run("--lesson 8 --step 20 --scale 2 --exercise-resize --size 1280x800 --screenshot " + rs2) == 0);
  if (fs::exists(rs2)) CHECK(load(rs2).w == 1280);
  CHECK(run("--scale 0", false) == 2);
  // Tiny windows.
  CHECK(run("--size 200x150 --screenshot " + kOut + "/tiny.png") == 0);
}

TEST_CASE("screenshot: every lesson loads without error, has events, and its last step is reachable", "[viewer][screenshot]") {
  require_display();
  // Load errors do not change the exit code (the window shows them): the
  // state the viewer dumps (--dump-layout) says whether the lesson and its
  // trace loaded, how many events and steps the trace has, and where --step
  // 1000000 (past the end, clamped) left the replay.
  for (int lesson = 0; lesson <= 8; ++lesson) {
    INFO("lesson " << lesson << " (log: " << pa::viewer::test::viewer_log(kOut) << ")");
    const std::string png = kOut + "/lesson" + std::to_string(lesson) + ".png";
    const std::string txt = png + ".txt";
    fs::remove(txt);
    CHECK(run("--lesson " + std::to_string(lesson) + " --step 1000000 --size 800x600 --screenshot " + png +
              " --dump-layout " + txt) == 0);
    CHECK(fs::exists(png));
    if (!fs::exists(txt)) {
      FAIL_CHECK("no state dump");
      continue;
    }
    const Dump d = load_dump(txt);
    CHECK(d.v.at("lesson")[0] == lesson);
    CHECK(d.v.at("lesson_error")[0] == 0);
    CHECK(d.v.at("load_error")[0] == 0);
    CHECK(d.v.at("loading")[0] == 0);
    // The lesson's stage (lesson 0, the paged KV cache, replays the QK stage).
    CHECK(d.v.at("stage")[0] == (lesson == 0 ? 2 : lesson));
    CHECK(d.v.at("events")[0] > 0);
    const auto& step = d.v.at("step");  // current, count
    CHECK(step[1] > 0);
    CHECK(step[0] == step[1] - 1);  // the last step
    CHECK(d.v.at("blocks")[0] >= 1);
    if (lesson == 6) {
      // Several partitions, so the trace holds a reduce block (label -1) with work to show.
      const float ctx = d.v.at("contexts")[0], part = d.v.at("partition_size")[0];
      CHECK(part > 0);
      CHECK(std::ceil(ctx / part) >= 3);
      const auto& labels = d.v.at("block_labels");
      CHECK(std::find(labels.begin(), labels.end(), -1.0f) != labels.end());
    }
    if (lesson == 8) {
      const auto& h = d.v.at("heads");  // query heads, KV heads
      CHECK(h[0] > h[1]);                // a GQA group
    }
  }
}

TEST_CASE("screenshot: the Partitions tab draws a multi-level cascade's levels and merges them",
          "[viewer][screenshot]") {
  require_display();
  // Lesson 7's problem has 2 sequences: both share 53 tokens (a page and a
  // part), then each has 17 of its own. The shown request's level weights
  // e^(lse_l - lse) sum to 1.
  const std::string png = kOut + "/levels.png", txt = png + ".txt";
  fs::remove(txt);
  REQUIRE(run("--lesson 7 --tab partitions --levels 2:53,1:17 --size 1600x2400 --screenshot " + png +
              " --dump-layout " + txt) == 0);
  REQUIRE(fs::exists(txt));
  const Dump d = load_dump(txt);
  REQUIRE(d.v.count("levels") == 1);
  const auto& lv = d.v.at("levels");  // request, then each level's weight
  REQUIRE(lv.size() == 1 + 2);
  CHECK(lv[0] == 0);
  CHECK(lv[1] > 0);
  CHECK(lv[2] > 0);
  CHECK(std::abs(lv[1] + lv[2] - 1.0) < 1e-5);
  // An empty middle level passes the others through with weight 0.
  fs::remove(txt);
  REQUIRE(run("--lesson 7 --tab partitions --levels 2:53,1:0,1:17 --size 1600x2400 --screenshot " + png +
              " --dump-layout " + txt) == 0);
  const Dump de = load_dump(txt);
  const auto& e = de.v.at("levels");
  REQUIRE(e.size() == 1 + 3);
  CHECK(e[2] == 0);
  CHECK(std::abs(e[1] + e[3] - 1.0) < 1e-5);
  // Levels that do not fit the problem (groups of 3 over 2 sequences) draw no
  // states (the tab says why).
  fs::remove(txt);
  REQUIRE(run("--lesson 7 --tab partitions --levels 3:53,1:17 --size 1600x2400 --screenshot " + png +
              " --dump-layout " + txt) == 0);
  CHECK(load_dump(txt).v.count("levels") == 0);
}

TEST_CASE("screenshot: the Partitions tab deals the sequence's pages to GPUs and merges their states",
          "[viewer][screenshot]") {
  require_display();
  // Lesson 7's problem: sequence 0 has 100 tokens in 7 blocks of 16; by
  // default 4 GPUs take contiguous runs (1, 2, 2, 2 blocks), so every GPU
  // holds tokens, and the weights e^(lse_g - lse) of a merge sum to 1.
  const std::string png = kOut + "/shards.png", txt = png + ".txt";
  fs::remove(txt);
  REQUIRE(run("--lesson 7 --tab partitions --size 1600x2100 --screenshot " + png + " --dump-layout " + txt) == 0);
  REQUIRE(fs::exists(txt));
  const Dump d = load_dump(txt);
  REQUIRE(d.v.count("shards") == 1);
  const auto& sh = d.v.at("shards");  // GPUs, policy, blocks, weights
  REQUIRE(sh.size() == 3 + 4);
  CHECK(sh[0] == 4);
  CHECK(sh[1] == 0);  // contiguous
  CHECK(sh[2] == 7);
  double sum = 0;
  int ran = 0;
  for (std::size_t g = 3; g < sh.size(); ++g) {
    CHECK(sh[g] > 0);  // no GPU empty here
    sum += sh[g];
    ++ran;
  }
  CHECK(ran == 4);
  CHECK(std::abs(sum - 1.0) < 1e-5);

  // 8 GPUs, round robin: block b on GPU b % 8, so GPU 7 holds none of the 7
  // blocks: its state is the empty one, weight 0; the other seven sum to 1.
  fs::remove(txt);
  REQUIRE(run("--lesson 7 --tab partitions --shards 8,round_robin --size 1600x2100 --screenshot " + png +
              " --dump-layout " + txt) == 0);
  REQUIRE(fs::exists(txt));
  const Dump d8 = load_dump(txt);
  const auto& rr = d8.v.at("shards");
  REQUIRE(rr.size() == 3 + 8);
  CHECK(rr[0] == 8);
  CHECK(rr[1] == 1);  // round robin
  CHECK(rr[2] == 7);
  CHECK(rr[3 + 7] == 0);
  double rr_sum = 0;
  int held = 0;
  for (int g = 0; g < 7; ++g) {
    CHECK(rr[3 + g] > 0);
    rr_sum += rr[3 + g];
    ++held;
  }
  CHECK(held == 7);
  CHECK(std::abs(rr_sum - 1.0) < 1e-5);
}

TEST_CASE("screenshot: a trace file opens and replays", "[viewer][screenshot]") {
  require_display();
  ProblemSpec spec;
  spec.context_lens = {70};
  trace::TraceData d;
  d.header.spec = spec;
  d.header.stage = trace::Stage::lv;
  d.header.source = "viewer test";
  d.header.revision = "test";
  d.events = trace::model_events(spec, trace::Stage::lv, trace::Selection{});
  const std::string path = kOut + "/lv70.patrace";
  trace::write_trace(path, d);
  const std::string png = kOut + "/trace_file.png";
  REQUIRE(run("--trace " + path + " --step 40 --tab trace --screenshot " + png) == 0);
  std::ifstream log(pa::viewer::test::viewer_log(kOut));
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK(text.find("cannot") == std::string::npos);
  CHECK(fs::exists(png));
}

TEST_CASE("settings are remembered between interactive runs, not by screenshots", "[viewer][screenshot]") {
  require_display();
  const fs::path home = fs::path(kOut) / "home";
  fs::remove_all(home);
  fs::create_directories(home);
  auto interactive = [&](const std::string& args) {
    // A real (visible) window; SIGTERM after 4 s ends the loop cleanly, which saves.
    const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 HOME=" + home.string() + " XDG_CONFIG_HOME= xvfb-run -a -s '-screen 0 1280x800x24' timeout -s TERM 4 " +
                            kExe + " " + args + " > " + kOut + "/interactive.log 2>&1";
    (void)std::system(cmd.c_str());
  };
  interactive("--lesson 3 --step 7");
  const fs::path ini = home / ".config" / "pa-lab" / "pa-viewer.ini";
  REQUIRE(fs::exists(ini));
  CHECK(fs::exists(home / ".config" / "pa-lab" / "imgui.ini"));
  std::ifstream in(ini);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("lesson=3") != std::string::npos);
  CHECK(text.find("step=7") != std::string::npos);
  // The UI scale is deliberately not remembered: it follows the monitor (or --scale) each run.
  CHECK(text.find("scale") == std::string::npos);
  // Screenshot mode neither reads nor writes them.
  const auto before = fs::last_write_time(ini);
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 HOME=" + home.string() + " XDG_CONFIG_HOME= xvfb-run -a " + kExe + " --lesson 5 --screenshot " + kOut +
                          "/settings_shot.png > /dev/null 2>&1";
  CHECK(std::system(cmd.c_str()) == 0);
  CHECK(fs::last_write_time(ini) == before);
}

TEST_CASE("keyboard shortcuts: Right/Left, Home/End, Space, digits, ?", "[viewer][screenshot]") {
  require_display();
  auto after = [&](const std::string& args, const std::string& keys) {
    const std::string png = kOut + "/keys.png";
    REQUIRE(run(args + " --keys \"" + keys + "\" --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
    return load_dump(png + ".txt");
  };
  Dump d = after("--lesson 2 --step 3", "RRL");
  CHECK(d.v.at("step")[0] == 4);
  d = after("--lesson 2 --step 3", "E");
  CHECK(d.v.at("step")[0] == d.v.at("step")[1] - 1);  // "step S N": the last step
  d = after("--lesson 2 --step 9", "H");
  CHECK(d.v.at("step")[0] == 0);
  CHECK(d.v.at("playing")[0] == 0);
  d = after("--lesson 2 --step 3", " ");
  CHECK(d.v.at("playing")[0] == 1);
  d = after("--lesson 2 --step 3", "4?");
  CHECK(d.v.at("lesson")[0] == 4);
  CHECK(d.v.at("step")[0] == 0);
  CHECK(d.v.at("help")[0] == 1);
}

TEST_CASE("follow the selection: Right jumps to the steps that touch the selected K element", "[viewer][screenshot]") {
  require_display();
  ProblemSpec spec;
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  const ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size);
  const KvLayoutGeometry g = c.cache(spec.num_kv_heads);
  // Warp 2 lane 3's 5th K load: an element touched at exactly one step.
  int seen = 0;
  trace::Event e{};
  for (const auto& ev : events)
    if (ev.tensor == trace::Tensor::k_cache && ev.warp == 2 && ev.lane == 3 && seen++ == 4) e = ev;
  REQUIRE(e.tensor == trace::Tensor::k_cache);
  const auto el = g.k_coords(e.byte_offset / c.elem_bytes);
  const auto touches_list = who_touches(events, idx, 0, trace::Tensor::k_cache, e.byte_offset, c.elem_bytes);
  REQUIRE(touches_list.size() == 1);
  const int want = touches_list[0].step;
  const std::string sel = "k=" + std::to_string(el.physical_block) + "," + std::to_string(el.d) + "," + std::to_string(el.t);
  const std::string png = kOut + "/follow.png";
  REQUIRE(run("--lesson 2 --step 0 --select " + sel + " --follow-selection --keys RR --screenshot " + png + " --dump-layout " +
              png + ".txt") == 0);
  CHECK(load_dump(png + ".txt").v.at("step")[0] == want);  // jumped there, and a second Right had nowhere to go
  REQUIRE(run("--lesson 2 --step 0 --select " + sel + " --keys RR --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  CHECK(load_dump(png + ".txt").v.at("step")[0] == 2);  // without following: plain steps
}

namespace {

// Runs pa-viewer under an Xvfb screen of the given size (HiDPI windows are larger than the default).
int run_screen(const std::string& args, const std::string& screen) {
  return pa::viewer::test::run_viewer(kExe, args, kOut, true, screen);
}

// Rows of "ink" (text pixels: much brighter than the dark background) inside a rectangle.
std::pair<int, int> ink_rows(const Image& im, int x0, int y0, int x1, int y1) {
  int first = -1, last = -1;
  for (int y = std::max(0, y0); y < std::min(im.h, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(im.w, x1); ++x) {
      const auto p = im.at(x, y);
      if (p[0] + p[1] + p[2] > 3 * 150) {
        if (first < 0) first = y;
        last = y;
        break;
      }
    }
  return {first, last};
}

}  // namespace

TEST_CASE("HiDPI: --scale 2 draws glyphs twice as tall, and the layout scales with them", "[viewer][screenshot][hidpi]") {
  require_display();
  std::map<int, Image> im;
  std::map<int, Dump> dump;
  for (int sc : {1, 2}) {
    const std::string png = kOut + "/scale" + std::to_string(sc) + ".png";
    const std::string size = sc == 1 ? "1280x800" : "2560x1600";
    REQUIRE(run_screen("--lesson 2 --step 6 --scale " + std::to_string(sc) + " --size " + size + " --screenshot " + png +
                           " --dump-layout " + png + ".txt",
                       "2600x1700") == 0);
    im[sc] = load(png);
    dump[sc] = load_dump(png + ".txt");
  }
  CHECK(im[1].w == 1280);
  CHECK(im[2].w == 2560);
  CHECK(im[2].h == 1600);
  CHECK(dump[1].v.at("scale")[0] == 1);
  CHECK(dump[2].v.at("scale")[0] == 2);
  // The toolbar's "Lesson" label: measure its glyphs' ink in the pixels.
  int h[3] = {0, 0, 0};
  for (int sc : {1, 2}) {
    const auto& r = dump[sc].v.at("lesson_label");
    const auto [a, b] = ink_rows(im[sc], static_cast<int>(r[0]), static_cast<int>(r[1]) - 2, static_cast<int>(r[2]),
                                 static_cast<int>(r[3]) + 2);
    INFO("scale " << sc << ": ink rows " << a << ".." << b);
    REQUIRE(a >= 0);
    h[sc] = b - a + 1;
  }
  INFO("glyph heights: scale 1 " << h[1] << " px, scale 2 " << h[2] << " px");
  CHECK(h[1] >= 8);  // a real glyph, not a stray pixel
  const double ratio = static_cast<double>(h[2]) / h[1];
  CHECK(ratio > 1.8);
  CHECK(ratio < 2.2);
  // Layout: the columns, the thread grid and the KV cells are about twice as
  // large, and everything still fits the window (1280x800 at 1, 2560x1600 at 2).
  for (int k = 0; k < 3; ++k) {
    const float c1 = dump[1].v.at("columns")[k], c2 = dump[2].v.at("columns")[k];
    CHECK(std::abs(c2 - 2 * c1) <= 6);
  }
  const auto& g1 = dump[1].v.at("grid_layout");
  const auto& g2 = dump[2].v.at("grid_layout");
  CHECK(g2[3] >= 1.8f * g1[3]);  // cell size
  for (int sc : {1, 2}) {
    const auto& g = dump[sc].v.at("grid_layout");
    const float grid_w = g[4] + g[1] * g[3];  // label + lanes * cell
    CHECK(grid_w <= dump[sc].v.at("columns")[1]);  // fits the middle column
    CHECK(dump[sc].v.at("kv_origin")[1] < im[sc].h * 0.6f);  // the KV cache starts in the upper part: usable
  }
  const auto& k1 = dump[1].v.at("kv_layout");
  const auto& k2 = dump[2].v.at("kv_layout");
  CHECK(k2[7] >= 1.8f * k1[7]);  // KV cell width
}

TEST_CASE("lesson 8 (stage 8): a K/V tile word is lit in shared memory at the step that stores it", "[viewer][screenshot][stages]") {
  require_display();
  if (!trace::stage_is_modelled(trace::Stage::optimized)) SKIP("no host model of stage 8 in this build");
  // The problem lesson 8 opens with (a GQA group: core/lesson_problem.hpp).
  const ProblemSpec spec = lesson_problem(ProblemSpec{}, trace::Stage::optimized, 0).spec;
  REQUIRE(spec.num_heads > spec.num_kv_heads);
  const auto events = trace::model_events(spec, trace::Stage::optimized, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  // The first step that stores to kv_smem, preceded by a step that does not.
  int K = -1;
  for (int st = 1; st < idx.num_steps(0) && K < 0; ++st) {
    bool here = false, before = false;
    for (auto i : idx.events_of(0, st)) here |= events[i].tensor == trace::Tensor::kv_smem && events[i].op == trace::Op::shared_store;
    for (auto i : idx.events_of(0, st - 1)) before |= events[i].tensor == trace::Tensor::kv_smem;
    if (here && !before) K = st;
  }
  REQUIRE(K > 0);
  // The lowest word it writes, and who writes it.
  trace::Event e{};
  e.byte_offset = -1;
  for (auto i : idx.events_of(0, K))
    if (events[i].tensor == trace::Tensor::kv_smem && (e.byte_offset < 0 || events[i].byte_offset < e.byte_offset)) e = events[i];
  const std::string a = kOut + "/l8_step" + std::to_string(K) + ".png", b = kOut + "/l8_prev.png";
  REQUIRE(run("--lesson 8 --step " + std::to_string(K) + " --tab shared --screenshot " + a + " --dump-layout " + a + ".txt") == 0);
  REQUIRE(run("--lesson 8 --step " + std::to_string(K - 1) + " --tab shared --screenshot " + b + " --dump-layout " + b + ".txt") == 0);
  const Dump da = load_dump(a + ".txt"), db = load_dump(b + ".txt");
  CHECK(da.v.at("stage")[0] == 8);
  CHECK(da.v.at("load_error")[0] == 0);
  CHECK(da.v.at("step")[0] == K);
  REQUIRE(da.v.count("kv_smem"));
  REQUIRE(db.v.count("kv_smem"));
  const auto& k = da.v.at("kv_smem");  // origin x, y, cell w, h, words, base
  BankGridLayout g;
  g.words = static_cast<int>(k[4]);
  g.cell_w = k[2];
  g.cell_h = k[3];
  g.header_h = 0;
  const int word = static_cast<int>((e.byte_offset - static_cast<std::int64_t>(k[5])) / 4);
  const Rect r = g.word_rect(word).offset(k[0], k[1]);
  const int px = static_cast<int>((r.x0 + r.x1) / 2), py = static_cast<int>((r.y0 + r.y1) / 2);
  INFO("word " << word << " (byte " << e.byte_offset << ", bank " << (e.byte_offset / 4) % 32 << ") at " << px << "," << py);
  const Image ia = load(a), ib = load(b);
  REQUIRE(px >= 0);
  REQUIRE(py >= 0);
  REQUIRE(px < ia.w);
  REQUIRE(py < ia.h);
  CHECK(same(ia.at(px, py), rgb255(thread_color(e.warp, e.lane, static_cast<int>(da.v.at("grid_layout")[0])))));
  // The same place one step earlier (same scroll: the dumped origins agree) is not lit.
  if (db.v.at("kv_smem")[1] == k[1]) CHECK_FALSE(same(ib.at(px, py), ia.at(px, py), 10));
  // The bank the picture puts it in is the column: byte / 4 % 32.
  CHECK(static_cast<int>((px - k[0]) / k[2]) == (e.byte_offset / 4) % 32);
}

TEST_CASE("lesson 7 (stage 7): opens, replays, and a K element read at step K is lit", "[viewer][screenshot][stages]") {
  require_display();
  if (!trace::stage_is_modelled(trace::Stage::cascade_merge)) SKIP("no host model of stage 7 in this build");
  // The problem lesson 7 opens with (load_lesson gives it a shared prefix: core/lesson_problem.hpp).
  const ProblemSpec spec = lesson_problem(ProblemSpec{}, trace::Stage::cascade_merge, 0).spec;
  REQUIRE(spec.context_lens == std::vector<int>{100, 140});
  REQUIRE(spec.shared_prefix_len == 4 * spec.block_size);
  const auto events = trace::model_events(spec, trace::Stage::cascade_merge, trace::Selection{{{0, 0, 0}}});
  const TraceIndex idx(events, Granularity::instruction);
  REQUIRE(idx.num_blocks() >= 1);
  // The viewer shows the selected block (seq 0, head 0, suffix partition 0) first.
  const int B = idx.find_block(BlockKey{0, 0, 0});
  REQUIRE(B >= 0);
  const ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size);
  const KvLayoutGeometry g = c.cache(spec.num_kv_heads);
  // The block's first step that reads a K element, which the step before does not touch.
  int K = -1;
  trace::Event e{};
  for (int st = 1; st < idx.num_steps(B) && K < 0; ++st)
    for (auto i : idx.events_of(B, st))
      if (events[i].tensor == trace::Tensor::k_cache && events[i].byte_offset >= 0 && events[i].bytes > 0) {
        bool before = false;
        for (auto j : idx.events_of(B, st - 1)) before |= touches(events[j], trace::Tensor::k_cache, events[i].byte_offset, c.elem_bytes);
        if (!before) {
          K = st;
          e = events[i];
        }
        break;
      }
  REQUIRE(K > 0);
  const auto el = g.k_coords(e.byte_offset / c.elem_bytes);
  const std::string a = kOut + "/l7_step" + std::to_string(K) + ".png", b = kOut + "/l7_prev.png";
  REQUIRE(run("--lesson 7 --step " + std::to_string(K) + " --tab kv --screenshot " + a + " --dump-layout " + a + ".txt") == 0);
  REQUIRE(run("--lesson 7 --step " + std::to_string(K - 1) + " --tab kv --screenshot " + b + " --dump-layout " + b + ".txt") == 0);
  const Dump da = load_dump(a + ".txt"), db = load_dump(b + ".txt");
  CHECK(da.v.at("stage")[0] == 7);
  CHECK(da.v.at("load_error")[0] == 0);
  CHECK(da.v.at("events")[0] == static_cast<float>(events.size()));
  CHECK(da.v.at("step")[0] == K);
  REQUIRE(da.v.count("kv_origin"));
  const KvPanelLayout l = kv_from(da);
  const auto& slots = da.v.at("slots");
  int slot = -1;
  for (std::size_t i = 0; i < slots.size(); ++i)
    if (static_cast<int>(slots[i]) == el.physical_block) slot = static_cast<int>(i);
  REQUIRE(slot >= 0);
  const Rect r = l.k_cell(slot, el.d, el.t).offset(da.v.at("kv_origin")[0], da.v.at("kv_origin")[1]);
  const int px = static_cast<int>((r.x0 + r.x1) / 2), py = static_cast<int>((r.y0 + r.y1) / 2);
  INFO("K element phys " << el.physical_block << " d " << el.d << " t " << el.t << " at " << px << "," << py);
  const Image ia = load(a), ib = load(b);
  REQUIRE(px >= 0);
  REQUIRE(py >= 0);
  REQUIRE(px < ia.w);
  REQUIRE(py < ia.h);
  CHECK(same(ia.at(px, py), rgb255(thread_color(e.warp, e.lane, static_cast<int>(da.v.at("grid_layout")[0])))));
  if (db.v.at("kv_origin") == da.v.at("kv_origin")) CHECK_FALSE(same(ib.at(px, py), ia.at(px, py), 10));
  // Every step of the lesson replays: the last one too.
  CHECK(run("--lesson 7 --step 1000000 --tab partitions --screenshot " + kOut + "/l7_end.png --dump-layout " + kOut + "/l7_end.txt") == 0);
  CHECK(load_dump(kOut + "/l7_end.txt").v.at("step")[0] == idx.num_steps(B) - 1);
  CHECK(da.v.at("blocks")[1] == B);
}

namespace {
// The "code_block" lines of a dump (one per code block of the lesson, in order).
struct CodeBlockLine {
  int line = 0;
  float needed_w = 0, box_w = 0;
  bool scrollbar = false, visible = false;
  float scroll_max_x = 0;
};
std::vector<CodeBlockLine> code_blocks(const std::string& dump_path) {
  std::vector<CodeBlockLine> out;
  std::ifstream in(dump_path);
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key != "code_block") continue;
    CodeBlockLine c;
    int sb = 0, vis = 0;
    ls >> c.line >> c.needed_w >> c.box_w >> sb >> vis >> c.scroll_max_x;
    REQUIRE(ls);
    c.scrollbar = sb != 0;
    c.visible = vis != 0;
    out.push_back(c);
  }
  return out;
}
}  // namespace

TEST_CASE("every lesson's code blocks are readable at 1280x800 and 1600x1000: they fit or scroll", "[viewer][screenshot][lesson]") {
  require_display();
  int lessons = 0, blocks = 0, wide = 0, wide_on_screen = 0;
  for (const char* size : {"1280x800", "1600x1000"}) {
    for (int n = 0; n <= 8; ++n) {
      INFO("lesson " << n << " at " << size);
      const std::string png = kOut + "/code_l" + std::to_string(n) + "_" + size + ".png";
      REQUIRE(run("--lesson " + std::to_string(n) + " --size " + size + " --screenshot " + png + " --dump-layout " + png +
                  ".txt") == 0);
      const std::vector<CodeBlockLine> cs = code_blocks(png + ".txt");
      REQUIRE_FALSE(cs.empty());  // every lesson has code blocks
      ++lessons;
      const auto widest = std::max_element(cs.begin(), cs.end(), [](const auto& a, const auto& b) { return a.needed_w < b.needed_w; });
      INFO("widest block: line " << widest->line << ", " << widest->needed_w << " px needed, box " << widest->box_w);
      CHECK((widest->needed_w <= widest->box_w || widest->scrollbar));
      for (const CodeBlockLine& c : cs) {
        INFO("block at line " << c.line);
        CHECK(c.box_w > 0);
        // Fits, or has a scrollbar; on screen, the scrollbar reaches the end of its longest line.
        CHECK((c.needed_w <= c.box_w + 0.5f || c.scrollbar));
        if (c.needed_w > c.box_w + 0.5f) {
          ++wide;
          if (c.visible) {
            CHECK(c.scroll_max_x + c.box_w >= c.needed_w - 1);
            ++wide_on_screen;
          }
        }
        ++blocks;
      }
    }
  }
  CHECK(lessons == 18);
  CHECK(blocks > 50);
  CHECK(wide > 20);           // the lesson column is narrower than many blocks
  CHECK(wide_on_screen > 0);  // and some of them are on screen at a lesson's first step
}

TEST_CASE("lesson 8: the K/V tile view scrolls to the words the step stores", "[viewer][screenshot][stages]") {
  require_display();
  if (!trace::stage_is_modelled(trace::Stage::optimized)) SKIP("no host model of stage 8 in this build");
  const ProblemSpec spec = lesson_problem(ProblemSpec{}, trace::Stage::optimized, 0).spec;
  const auto events = trace::model_events(spec, trace::Stage::optimized, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  // The first step storing K/V tile words that all lie below the view's
  // first 48 bank rows (the rows shown before any scroll).
  int K = -1;
  trace::Event e{};
  for (int st = 0; st < idx.num_steps(0) && K < 0; ++st) {
    trace::Event lowest{};
    lowest.byte_offset = -1;
    for (auto i : idx.events_of(0, st))
      if (events[i].tensor == trace::Tensor::kv_smem && events[i].op == trace::Op::shared_store &&
          (lowest.byte_offset < 0 || events[i].byte_offset < lowest.byte_offset))
        lowest = events[i];
    if (lowest.byte_offset >= 60 * 128) {
      K = st;
      e = lowest;
    }
  }
  REQUIRE(K > 0);
  const std::string png = kOut + "/l8_follow.png";
  REQUIRE(run("--lesson 8 --step " + std::to_string(K) + " --tab shared --screenshot " + png + " --dump-layout " + png +
              ".txt") == 0);
  const Dump d = load_dump(png + ".txt");
  REQUIRE(d.v.at("step")[0] == K);
  REQUIRE(d.v.count("kv_smem"));
  REQUIRE(d.v.count("kv_smem_view"));
  const auto& k = d.v.at("kv_smem");        // origin x, y (scrolled), cell w, h, words, base
  const auto& view = d.v.at("kv_smem_view");  // scroll y, top y on screen, visible height
  CHECK(view[0] > 0);  // it scrolled
  BankGridLayout g;
  g.words = static_cast<int>(k[4]);
  g.cell_w = k[2];
  g.cell_h = k[3];
  g.header_h = 0;
  const int word = static_cast<int>((e.byte_offset - static_cast<std::int64_t>(k[5])) / 4);
  const Rect r = g.word_rect(word).offset(k[0], k[1]);
  INFO("word " << word << " at y " << r.y0 << ".." << r.y1 << "; view " << view[1] << " + " << view[2]);
  CHECK(r.y0 >= view[1]);
  CHECK(r.y1 <= view[1] + view[2]);
  const Image im = load(png);
  const int px = static_cast<int>((r.x0 + r.x1) / 2), py = static_cast<int>((r.y0 + r.y1) / 2);
  REQUIRE(py < im.h);
  CHECK(same(im.at(px, py), rgb255(thread_color(e.warp, e.lane, static_cast<int>(d.v.at("grid_layout")[0])))));
}

TEST_CASE("pa-viewer --block reaches the reduce, prefix and merge blocks; a block the trace lacks is a message", "[viewer][screenshot][stages]") {
  require_display();
  struct Case {
    int lesson;
    const char* block;
    int label;
  };
  const Case cases[] = {{6, "0,0,reduce", kReduceBlock}, {6, "0,0,-1", kReduceBlock}, {6, "0,0,1", 1},
                        {7, "0,0,merge", kMergeBlock},   {7, "0,0,prefix_reduce", kPrefixReduceBlock},
                        {7, "0,0,prefix:0", kPrefixBlockBase}, {8, "0,0,0", 0}};
  int ran = 0;
  for (const Case& c : cases) {
    INFO("--lesson " << c.lesson << " --block " << c.block);
    if (!trace::stage_is_modelled(static_cast<trace::Stage>(c.lesson))) continue;
    const std::string png = kOut + "/block_l" + std::to_string(c.lesson) + "_" + std::to_string(ran) + ".png";
    REQUIRE(run("--lesson " + std::to_string(c.lesson) + " --block " + c.block + " --screenshot " + png +
                " --dump-layout " + png + ".txt") == 0);
    const Dump d = load_dump(png + ".txt");
    CHECK(d.v.at("load_error")[0] == 0);
    const int shown = static_cast<int>(d.v.at("blocks")[1]);
    REQUIRE(shown < static_cast<int>(d.v.at("block_labels").size()));
    CHECK(static_cast<double>(d.v.at("block_labels")[shown]) == static_cast<double>(c.label));
    ++ran;
  }
  CHECK(ran == 7);
  // Stage 2 has no reduce block: the window says so (and shows its block).
  const std::string png = kOut + "/block_missing.png";
  REQUIRE(run("--lesson 2 --block 0,0,reduce --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  CHECK(load_dump(png + ".txt").v.at("load_error")[0] == 1);
  // A bad BLOCK is a usage error.
  CHECK(run("--block 0,0,bogus", false) == 2);
}

TEST_CASE("lesson 0 opens on its own problem, at a block-table load, on the paged KV cache", "[viewer][screenshot][lesson]") {
  require_display();
  const ProblemSpec spec = lesson_problem_of(0, ProblemSpec{}, trace::Stage::qk, 0).spec;
  REQUIRE(spec.context_lens == kLesson0Contexts);
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  int K = -1;
  for (int st = 0; st < idx.num_steps(0) && K < 0; ++st)
    if (idx.steps(0)[st].step == trace::Step::block_table_load && idx.steps(0)[st].tensor == trace::Tensor::block_table) K = st;
  REQUIRE(K > 0);
  const std::string png = kOut + "/lesson0.png";
  REQUIRE(run("--lesson 0 --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  const Dump d = load_dump(png + ".txt");
  CHECK(d.v.at("lesson")[0] == 0);
  CHECK(d.v.at("lesson_error")[0] == 0);
  CHECK(d.v.at("load_error")[0] == 0);
  CHECK(d.v.at("contexts") == std::vector<float>{100, 37, 130});
  CHECK(d.v.at("step")[0] == K);
  CHECK(d.v.at("memory_tab")[0] == 0);  // the Paged KV cache tab
  // The command line still wins.
  REQUIRE(run("--lesson 0 --step 1 --context 50 --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  const Dump e = load_dump(png + ".txt");
  CHECK(e.v.at("step")[0] == 1);
  CHECK(e.v.at("contexts") == std::vector<float>{50});
}

TEST_CASE("the panels show the section of the code the shown block runs, or the enclosing one", "[viewer][screenshot][lesson]") {
  require_display();
  if (!trace::stage_is_modelled(trace::Stage::v2_partition)) SKIP("no host model of stage 6 in this build");
  // Lesson 6's partition block (seq 0 head 0 part 0, shown first): its first
  // max_reduce is lesson 3's softmax; the barrier before it has no section.
  const ProblemSpec spec = lesson_problem(ProblemSpec{}, trace::Stage::v2_partition, 0).spec;
  const auto events = trace::model_events(spec, trace::Stage::v2_partition, viewer_selection(spec, trace::Stage::v2_partition, 0, 0, 0));
  const TraceIndex idx(events, Granularity::instruction);
  const int part = idx.find_block({0, 0, 0});
  REQUIRE(part >= 0);
  const int K = idx.find_step(part, trace::Step::max_reduce);
  REQUIRE(K > 0);
  int B = K - 1;
  while (B > 0 && idx.steps(part)[B].step != trace::Step::barrier) --B;
  REQUIRE(idx.steps(part)[B].step == trace::Step::barrier);
  const std::string a = kOut + "/l6_max.png", b = kOut + "/l6_barrier.png";
  REQUIRE(run("--lesson 6 --step " + std::to_string(K) + " --screenshot " + a + " --dump-layout " + a + ".txt") == 0);
  REQUIRE(run("--lesson 6 --step " + std::to_string(B) + " --screenshot " + b + " --dump-layout " + b + ".txt") == 0);
  const Dump da = load_dump(a + ".txt"), db = load_dump(b + ".txt");
  REQUIRE(da.v.count("binding"));
  REQUIRE(db.v.count("binding"));
  CHECK(da.v.at("binding")[0] == 3);  // lesson 3's softmax section, not lesson 6's reduce
  CHECK(da.v.at("binding")[2] == 0);
  CHECK(da.v.at("binding")[3] == K);
  CHECK(db.v.at("binding")[2] == 1);  // enclosing
  CHECK(db.v.at("binding")[3] < B);   // the marked step before the barrier
}

TEST_CASE("the step's lesson section is on screen from the first picture, also below the lesson's tables",
          "[viewer][screenshot][lesson]") {
  require_display();
  // Lesson 8 with an fp8 cache at its first dequant step: the fp8 section
  // lies below several tables, whose columns ImGui measures in their first
  // frame; a single scroll in that frame landed sections below.
  ProblemSpec base;
  base.kv_dtype = KvDType::fp8_e4m3;
  const ProblemSpec spec = lesson_problem_of(8, base, trace::Stage::optimized, 0).spec;
  const auto events = trace::model_events(spec, trace::Stage::optimized, viewer_selection(spec, trace::Stage::optimized, 0, 0, 0));
  const TraceIndex idx(events, Granularity::instruction);
  const int K = idx.find_step(0, trace::Step::dequant);
  REQUIRE(K > 0);
  int shots = 0;
  for (const char* size : {"1600x1000", "1280x800"}) {
    INFO("size " << size);
    const std::string png = kOut + "/l8_dequant_" + size + ".png";
    REQUIRE(run(std::string("--lesson 8 --kv-dtype fp8_e4m3 --step ") + std::to_string(K) + " --size " + size +
                " --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
    const Dump d = load_dump(png + ".txt");
    CHECK(d.v.at("load_error")[0] == 0);
    CHECK(d.v.at("step")[0] == K);
    REQUIRE(d.v.count("binding"));
    CHECK(d.v.at("binding")[0] == 8);
    CHECK(d.v.at("binding")[2] == 0);  // the step's own section
    REQUIRE(d.v.count("lesson_section"));
    const float top = d.v.at("lesson_section")[0], view_top = d.v.at("lesson_section")[1],
                view_bottom = d.v.at("lesson_section")[2];
    INFO("section top " << top << ", lesson text " << view_top << ".." << view_bottom);
    // Scrolled to 10% of the view: the heading in the upper part of it.
    CHECK(top >= view_top);
    CHECK(top < view_top + 0.4f * (view_bottom - view_top));
    ++shots;
  }
  CHECK(shots == 2);
}

TEST_CASE("fp8 KV cache: one K vec load lights 8 one-byte elements, one V vec load 16, where the x = 16 layout puts them",
          "[viewer][screenshot][kv_dtype]") {
  require_display();
  // Lessons 2 and 4 with an fp8 cache, at the first K / V load instruction:
  // every element of warp 0 lane 0's load is lit in its colour at the cell
  // KvPanelLayout gives, decoded with 1-byte elements.
  struct Case {
    int lesson;
    trace::Stage stage;
    trace::Step step;
    trace::Tensor tensor;
    int elements;
  };
  const Case cases[] = {{2, trace::Stage::qk, trace::Step::k_load, trace::Tensor::k_cache, 8},
                        {4, trace::Stage::lv, trace::Step::v_load, trace::Tensor::v_cache, 16}};
  for (const Case& cs : cases) {
    INFO("lesson " << cs.lesson);
    ProblemSpec spec;
    spec.kv_dtype = KvDType::fp8_e4m3;
    const auto events = trace::model_events(spec, cs.stage, trace::Selection{});
    const TraceIndex idx(events, Granularity::instruction);
    const ConfigInfo c = config_info(spec);
    const KvLayoutGeometry g = c.cache(spec.num_kv_heads);
    const int K = idx.find_step(0, cs.step);
    REQUIRE(K > 0);
    trace::Event e{};
    for (auto i : idx.events_of(0, K))
      if (events[i].warp == 0 && events[i].lane == 0 && events[i].tensor == cs.tensor) e = events[i];
    REQUIRE(e.tensor == cs.tensor);
    std::vector<CacheGeometry::Coords> lit;
    for_each_kv_element(e, g, c.kv_elem_bytes, [&](const CacheGeometry::Coords& k) { lit.push_back(k); });
    REQUIRE(static_cast<int>(lit.size()) == cs.elements);

    const std::string png = kOut + "/fp8_l" + std::to_string(cs.lesson) + ".png";
    REQUIRE(run("--lesson " + std::to_string(cs.lesson) + " --kv-dtype fp8_e4m3 --step " + std::to_string(K) +
                " --size 1600x1000 --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
    const Image im = load(png);
    const Dump d = load_dump(png + ".txt");
    CHECK(d.v.at("load_error")[0] == 0);
    CHECK(d.v.at("kv_dtype")[0] == static_cast<int>(KvDType::fp8_e4m3));
    CHECK(d.v.at("kv_elem_bytes")[0] == 1);
    CHECK(d.v.at("step")[0] == K);
    const KvPanelLayout l = kv_from(d);
    CHECK(l.x == 16);
    const auto& slots = d.v.at("slots");
    const float ox = d.v.at("kv_origin")[0], oy = d.v.at("kv_origin")[1];
    const Rgba tc = thread_color(0, 0, c.num_warps);
    const std::array<int, 3> want{static_cast<int>(tc.r * 255 + 0.5f), static_cast<int>(tc.g * 255 + 0.5f),
                                  static_cast<int>(tc.b * 255 + 0.5f)};
    int in_colour = 0;
    for (const auto& el : lit) {
      int slot = -1;
      for (std::size_t i = 0; i < slots.size(); ++i)
        if (static_cast<int>(slots[i]) == el.physical_block) slot = static_cast<int>(i);
      REQUIRE(slot >= 0);
      const Rect r = (cs.tensor == trace::Tensor::k_cache ? l.k_cell(slot, el.d, el.t) : l.v_cell(slot, el.d, el.t))
                         .offset(ox, oy);
      const int px = static_cast<int>((r.x0 + r.x1) * 0.5f), py = static_cast<int>((r.y0 + r.y1) * 0.5f);
      REQUIRE(px < im.w);
      REQUIRE(py < im.h);
      INFO("d " << el.d << " t " << el.t << " at " << px << "," << py);
      CHECK(same(im.at(px, py), want));
      in_colour += same(im.at(px, py), want);
    }
    CHECK(in_colour == cs.elements);
  }
}

TEST_CASE("fp8 KV cache: a stage that cannot take it says so, naming the stage and what is accepted",
          "[viewer][screenshot][kv_dtype]") {
  CHECK(run("--kv-dtype fp9", false) == 2);
  CHECK(run("--k-scale 0.5", false) == 2);                     // no fp8 cache to scale
  CHECK(run("--dtype fp32 --kv-dtype fp8", false) == 2);       // fp8 takes 16-bit queries
  require_display();
  const std::string png = kOut + "/fp8_l7.png";
  REQUIRE(run("--lesson 7 --kv-dtype fp8 --screenshot " + png + " --dump-layout " + png + ".txt") == 0);
  CHECK(load_dump(png + ".txt").v.at("load_error")[0] == 1);
  std::ifstream log(pa::viewer::test::viewer_log(kOut));
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK(text.find("cascade_merge") != std::string::npos);
  CHECK(text.find("fp8_e4m3") != std::string::npos);
  CHECK(text.find("accepted") != std::string::npos);
  // Stage 8 takes fp8 with block size 16 or 32, not 8.
  const std::string p8 = kOut + "/fp8_l8_b8.png";
  REQUIRE(run("--lesson 8 --kv-dtype fp8 --block-size 8 --screenshot " + p8 + " --dump-layout " + p8 + ".txt") == 0);
  CHECK(load_dump(p8 + ".txt").v.at("load_error")[0] == 1);
  const std::string p16 = kOut + "/fp8_l8_b16.png";
  REQUIRE(run("--lesson 8 --kv-dtype fp8 --block-size 16 --screenshot " + p16 + " --dump-layout " + p16 + ".txt") == 0);
  const Dump d = load_dump(p16 + ".txt");
  CHECK(d.v.at("load_error")[0] == 0);
  CHECK(d.v.at("stage")[0] == 8);
  CHECK(d.v.at("events")[0] > 0);
}
