// Screenshot tests: pa-viewer renders headless under xvfb-run (Mesa), and the
// images are checked against the layout code: the K element a thread loads at
// step K is lit in that thread's colour at step K and not at step K-1, exactly
// where KvLayout says the element is; untouched cells do not change. Also:
// bad arguments exit 2; a missing or corrupt trace, a missing lesson and a
// tiny window give a picture with a message, not a crash.
// SKIPPED (not passed) when xvfb-run or an OpenGL 3.3 context is unavailable.
#include <catch2/catch_test_macros.hpp>

#include <stb_image.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/trace_index.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"

namespace fs = std::filesystem;
using namespace pa;
using namespace pa::viewer;

namespace {

const std::string kExe = PA_VIEWER_EXE;
const std::string kOut = PA_TEST_OUT_DIR;

int run(const std::string& args, bool xvfb = true) {
  fs::create_directories(kOut);
  // Under the sanitizer build, LeakSanitizer reports allocations that Mesa and
  // libX11 never free at exit (not the viewer's); leak checking is off for the
  // child, every other ASan/UBSan check stays on.
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 " + std::string(xvfb ? "xvfb-run -a -s '-screen 0 1600x1000x24' " : "") +
                          kExe + " " + args + " > " + kOut + "/last.log 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void require_display() {
  if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) SKIP("xvfb-run not installed");
  static int probe = -2;
  if (probe == -2) probe = run("--screenshot " + kOut + "/probe.png --size 320x200 --lesson 1");
  if (probe != 0) SKIP("pa-viewer cannot open an OpenGL 3.3 window under xvfb-run (see " + kOut + "/last.log)");
}

struct Image {
  int w = 0, h = 0;
  std::vector<unsigned char> px;
  std::array<int, 3> at(int x, int y) const {
    const auto* p = &px[(static_cast<std::size_t>(y) * w + x) * 4];
    return {p[0], p[1], p[2]};
  }
};

Image load(const std::string& path) {
  Image im;
  int n = 0;
  unsigned char* d = stbi_load(path.c_str(), &im.w, &im.h, &n, 4);
  REQUIRE(d != nullptr);
  im.px.assign(d, d + static_cast<std::size_t>(im.w) * im.h * 4);
  stbi_image_free(d);
  return im;
}

struct Dump {
  std::map<std::string, std::vector<float>> v;
};

Dump load_dump(const std::string& path) {
  Dump d;
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    float f;
    while (ls >> f) d.v[key].push_back(f);
  }
  return d;
}

KvLayout kv_from(const Dump& d) {
  const auto& p = d.v.at("kv_layout");
  REQUIRE(p.size() == 14);
  KvLayout l;
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
  return l;
}

bool same(std::array<int, 3> a, std::array<int, 3> b, int tol = 2) {
  for (int i = 0; i < 3; ++i)
    if (std::abs(a[i] - b[i]) > tol) return false;
  return true;
}

}  // namespace

TEST_CASE("screenshot: the K element loaded at step K lights up where the layout puts it", "[viewer][screenshot]") {
  require_display();
  // The same problem and stage the viewer shows for lesson 2 (the QK stage, defaults).
  ProblemSpec spec;
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  const ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size);
  const CacheGeometry g = c.cache(spec.num_kv_heads);
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
  const KvLayout l = kv_from(da);
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
  require_display();
  // Missing trace: the window opens (host model) with the message.
  const std::string m = kOut + "/missing_trace.png";
  CHECK(run("--trace /nonexistent/x.patrace --screenshot " + m) == 0);
  CHECK(fs::exists(m));
  // Corrupt trace.
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
  // Tiny windows, and every lesson.
  CHECK(run("--size 200x150 --screenshot " + kOut + "/tiny.png") == 0);
  for (int lesson = 0; lesson <= 8; ++lesson)
    CHECK(run("--lesson " + std::to_string(lesson) + " --step 1000000 --size 800x600 --screenshot " + kOut + "/lesson" +
              std::to_string(lesson) + ".png") == 0);
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
  std::ifstream log(kOut + "/last.log");
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
  const CacheGeometry g = c.cache(spec.num_kv_heads);
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
