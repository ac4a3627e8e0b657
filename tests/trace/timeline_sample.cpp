// Writes a synthetic timeline file (tests/trace/timeline_samples.hpp) for the
// command-line export test that Python's json module checks
// (check_timeline_json.py). Usage: timeline_sample FILE.patl SPANS
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "timeline_samples.hpp"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: timeline_sample FILE.patl SPANS\n");
    return 2;
  }
  try {
    pa::trace::write_timeline(argv[1], pa::trace::testing::sample_timeline(std::atoi(argv[2])));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "timeline_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
