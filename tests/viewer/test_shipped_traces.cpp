// Every trace shipped in assets/traces opens in pa-viewer (headless, under
// xvfb-run) without a load error, with its events and thread blocks, and its
// last replay step renders. SKIPPED (not passed) without xvfb-run or OpenGL.
#include <catch2/catch_test_macros.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace_files.hpp"
#include "viewer_process.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kExe = PA_VIEWER_EXE;
const std::string kOut = std::string(PA_TEST_OUT_DIR) + "/shipped";

int run(const std::string& args) { return pa::viewer::test::run_viewer(kExe, args, kOut); }
using pa::viewer::test::load_dump;

}  // namespace

TEST_CASE("shipped traces: each opens in the viewer and replays to its last step", "[viewer][screenshot][traces]") {
  pa::viewer::test::require_viewer_display(kExe, kOut);
  const auto files = pa::viewer::list_trace_files(PA_ASSETS_DIR "/traces");
  int opened = 0;
  for (const auto& f : files) {
    std::string name = f.relative;
    for (char& c : name)
      if (c == '/') c = '_';
    const std::string png = kOut + "/" + name + ".png", dump = kOut + "/" + name + ".txt";
    INFO(f.relative);
    // --step past the end is clamped to the last step.
    REQUIRE(run("--trace " + f.path + " --step 1000000 --tab trace --size 1280x800 --screenshot " + png +
                " --dump-layout " + dump) == 0);
    const auto d = load_dump(dump);
    REQUIRE(d.count("load_error"));
    CHECK(d.at("load_error").at(0) == 0);
    CHECK(d.at("events").at(0) > 0);
    CHECK(d.at("blocks").at(0) >= 1);
    const auto& step = d.at("step");  // CURRENT COUNT
    CHECK(step.at(1) > 1);
    CHECK(step.at(0) == step.at(1) - 1);
    CHECK(fs::file_size(png) > 0);
    ++opened;
  }
  // Eight stages, from the host model and from a GPU.
  CHECK(opened == 16);
}
