// libFuzzer target for the trace reader (trace/FUZZING.md). Build with clang:
//   CXX=clang++ cmake -S . -B build-fuzz -DPA_FUZZ=ON -DPA_WITH_CUDA=OFF \
//       -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF && ninja -C build-fuzz pa_fuzz_trace_reader
// Contract checked: every input is either rejected with TraceFormatError or
// accepted as a trace that validates and re-serializes to the same bytes.
// Anything else (another exception, a crash, a sanitizer report, an
// allocation beyond -rss_limit_mb / -malloc_limit_mb) is a finding.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>

#include "pa/trace/trace_file.hpp"

using namespace pa::trace;

namespace {
void check_accepted(const TraceData& d, const std::uint8_t* in, std::size_t n, bool exact) {
  validate_trace(d);  // a TraceFormatError here escapes: the reader accepted something invalid
  const auto again = serialize_trace(d);
  if (exact && (again.size() != n || !std::equal(again.begin(), again.end(), in))) {
    std::fprintf(stderr, "accepted input does not re-serialize to itself\n");
    std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  TraceData d;
  bool ok = true;
  try {
    d = parse_trace_unchecked_for_fuzzing(data, size);
  } catch (const TraceFormatError&) {
    ok = false;
  }
  try {
    if (ok) check_accepted(d, data, size, false);
  } catch (const TraceFormatError& e) {
    std::fprintf(stderr, "reader accepted an invalid trace: %s\n", e.what());
    std::abort();
  }
  try {
    d = parse_trace(data, size);
    check_accepted(d, data, size, true);
  } catch (const TraceFormatError&) {
  }
  return 0;
}
