// Running pa-viewer from a screenshot test (headless, under xvfb-run) and
// reading the state file its --dump-layout writes. One copy for every
// screenshot test file.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

namespace pa::viewer::test {

// The file that holds the output of this test process's latest viewer run:
// one per process, because ctest runs a file's test cases as separate
// processes side by side in the same out_dir.
inline std::string viewer_log(const std::string& out_dir) {
  return out_dir + "/last-" + std::to_string(::getpid()) + ".log";
}

// Runs `exe args` (under xvfb-run on a screen of `screen` pixels unless xvfb
// is false) with its output in viewer_log(out_dir); returns its exit status (-1 if it did not exit). Under the
// sanitizer build LeakSanitizer would report what Mesa and libX11 never free
// at exit (not the viewer's), so leak checking is off for the child; every
// other ASan/UBSan check stays on.
inline int run_viewer(const std::string& exe, const std::string& args, const std::string& out_dir, bool xvfb = true,
                      const std::string& screen = "1600x1000") {
  std::filesystem::create_directories(out_dir);
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 " +
                          (xvfb ? "xvfb-run -a -s '-screen 0 " + screen + "x24' " : std::string()) + exe + " " + args +
                          " > " + viewer_log(out_dir) + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// SKIPs the test (never passes it) when the viewer cannot draw here: no
// xvfb-run, or no OpenGL 3.3 context under it. Probes once per process.
inline void require_viewer_display(const std::string& exe, const std::string& out_dir) {
  if (std::system("command -v xvfb-run > /dev/null 2>&1") != 0) SKIP("xvfb-run not installed");
  static int probe = -2;
  if (probe == -2) probe = run_viewer(exe, "--screenshot " + out_dir + "/probe.png --size 320x200 --lesson 1", out_dir);
  if (probe != 0) SKIP("pa-viewer cannot open an OpenGL 3.3 window under xvfb-run (see " + viewer_log(out_dir) + ")");
}

// The --dump-layout file: one `key values...` line each (numbers only).
inline std::map<std::string, std::vector<double>> load_dump(const std::string& path) {
  std::map<std::string, std::vector<double>> d;
  std::ifstream in(path);
  REQUIRE(in.good());
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    double f;
    while (ls >> f) d[key].push_back(f);
  }
  return d;
}

}  // namespace pa::viewer::test
