// An exercise checked in the running viewer: `--answer ID=VALUE` types a
// number into a lesson's exercise and checks it, as a learner would. The
// state the viewer dumps (--dump-layout: "exercise:LESSON:ID verdict ok
// answer") says right, wrong or not a number against the answer it computed
// from the trace it shows, and the picture shows the verdicts in their
// colours in the lesson column (none without answers).
// SKIPPED (not passed) when xvfb-run or an OpenGL 3.3 context is unavailable.
#include <catch2/catch_test_macros.hpp>

#include <stb_image.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "viewer_process.hpp"
#include "core/exercise.hpp"

namespace fs = std::filesystem;
using pa::viewer::Verdict;

namespace {

const std::string kExe = PA_VIEWER_EXE;
const std::string kOut = std::string(PA_TEST_OUT_DIR) + "/exercise";

int run(const std::string& args) { return pa::viewer::test::run_viewer(kExe, args, kOut); }
using pa::viewer::test::load_dump;

// Pixels of the left (lesson) column that are text of colour (r, g, b) drawn
// over the exercise box's background (34, 44, 60), at least half covered:
// each channel the same blend of the two (antialiased glyph edges included).
int count_text(const std::string& png, double left_w, int r, int g, int b) {
  const int bg[3] = {34, 44, 60}, fg[3] = {r, g, b};
  int w = 0, h = 0, n = 0;
  unsigned char* px = stbi_load(png.c_str(), &w, &h, &n, 4);
  REQUIRE(px != nullptr);
  int count = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < std::min(w, static_cast<int>(left_w)); ++x) {
      const unsigned char* p = px + (static_cast<std::size_t>(y) * w + x) * 4;
      double lo = 2, hi = -1;
      for (int c = 0; c < 3; ++c) {
        const double a = (p[c] - bg[c]) / static_cast<double>(fg[c] - bg[c]);
        lo = std::min(lo, a);
        hi = std::max(hi, a);
      }
      count += lo >= 0.5 && hi <= 1.02 && hi - lo <= 0.08;
    }
  stbi_image_free(px);
  return count;
}

}  // namespace

TEST_CASE("pa-viewer --answer checks a lesson's exercises against the trace shown", "[viewer][screenshot][exercise]") {
  pa::viewer::test::require_viewer_display(kExe, kOut);

  // Lesson 2: warp 0's first K load is 8 sectors (right); its first q_vecs
  // load 4 wavefronts, not 2 (wrong); "many" is not a number.
  const std::string png = kOut + "/lesson2_answers.png", dump = kOut + "/lesson2_answers.txt";
  REQUIRE(run("--lesson 2 --answer k_load_sectors=8 --answer q_smem_load_wavefronts=2 --answer warp1_block=many "
              "--screenshot " + png + " --dump-layout " + dump) == 0);
  const auto d = load_dump(dump);
  const auto& right = d.at("exercise:2:k_load_sectors");
  REQUIRE(right.size() == 3);
  CHECK(right[0] == static_cast<int>(Verdict::right));
  CHECK(right[1] == 1);
  CHECK(right[2] == 8);
  const auto& wrong = d.at("exercise:2:q_smem_load_wavefronts");
  REQUIRE(wrong.size() == 3);
  CHECK(wrong[0] == static_cast<int>(Verdict::wrong));
  CHECK(wrong[2] == 4);
  CHECK(d.at("exercise:2:warp1_block").at(0) == static_cast<int>(Verdict::not_a_number));
  int listed = 0;  // nothing of other lessons or unanswered exercises
  for (const auto& [key, v] : d) listed += key.rfind("exercise:", 0) == 0;
  CHECK(listed == 3);

  // The verdicts are drawn: the right one's green and the wrong one's red
  // (exercise_panel.cpp) appear in the lesson column, and not without answers.
  const double left_w = d.at("columns").at(0);
  const int green = count_text(png, left_w, 115, 235, 140), red = count_text(png, left_w, 255, 128, 115);
  const std::string plain_png = kOut + "/lesson2_plain.png", plain_dump = kOut + "/lesson2_plain.txt";
  REQUIRE(run("--lesson 2 --screenshot " + plain_png + " --dump-layout " + plain_dump) == 0);
  INFO("verdict pixels: green " << green << ", red " << red);
  CHECK(green > 20);
  CHECK(red > 20);
  CHECK(count_text(plain_png, left_w, 115, 235, 140) == 0);
  CHECK(count_text(plain_png, left_w, 255, 128, 115) == 0);
  for (const auto& [key, v] : load_dump(plain_dump)) CHECK(key.rfind("exercise:", 0) != 0);
}
