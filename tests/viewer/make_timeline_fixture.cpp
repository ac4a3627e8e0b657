// pa_viewer_timeline_fixture: writes the viewer tests' made-up timeline
// (timeline_fixture.hpp) to a file, for the screenshot tests and for timing
// the Timeline panel with a million spans (viewer/PERFORMANCE.md):
//
//   pa_viewer_timeline_fixture OUT.patl [--sms N] [--blocks N] [--warps N] [--iters N] [--dropped N]
//
// Its source field says it is a test fixture: it is never a measurement.
#include <charconv>
#include <cstdio>
#include <exception>
#include <string>

#include "timeline_fixture.hpp"

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s OUT.patl [--sms N] [--blocks N] [--warps N] [--iters N] [--dropped N]\n", argv[0]);
    return 2;
  }
  pa::viewer::test::FixtureShape f;
  for (int i = 2; i + 1 < argc + 1; i += 2) {
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", argv[i]);
      return 2;
    }
    const std::string flag = argv[i], v = argv[i + 1];
    long long n = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || p != v.data() + v.size() || n < 0 || n > (1 << 24)) {
      std::fprintf(stderr, "%s: '%s' is not a count in [0, 16777216]\n", flag.c_str(), v.c_str());
      return 2;
    }
    if (flag == "--sms") f.sms = static_cast<int>(n);
    else if (flag == "--blocks") f.blocks = static_cast<int>(n);
    else if (flag == "--warps") f.warps = static_cast<int>(n);
    else if (flag == "--iters") f.iters = static_cast<int>(n);
    else if (flag == "--dropped") f.dropped = static_cast<std::uint64_t>(n);
    else {
      std::fprintf(stderr, "unknown flag %s (accepted: --sms --blocks --warps --iters --dropped)\n", flag.c_str());
      return 2;
    }
  }
  if (f.sms < 1 || f.warps < 1 || f.warps > 32) {
    std::fprintf(stderr, "--sms needs at least 1, --warps 1 to 32\n");
    return 2;
  }
  try {
    const pa::trace::TimelineData d = pa::viewer::test::fixture_timeline(f);
    pa::trace::write_timeline(argv[1], d);
    std::printf("%s: %zu spans (a test fixture, not a measurement)\n", argv[1], d.spans.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
