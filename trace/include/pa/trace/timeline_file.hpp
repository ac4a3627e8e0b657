// Timeline files: when each warp ran each step function of a stage, as
// measured on a GPU by the timing tracer (pa/kernels/timing_tracer.cuh). A
// versioned header (the same problem, stage, source and revision as a trace
// file's, then the GPU's clocks, the tracer's overhead and how many spans it
// dropped), then the spans (pa/core/timeline.hpp). Format documented in
// trace/FORMAT.md ("Timeline files"); extension `.patl`.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/problem.hpp"
#include "pa/core/timeline.hpp"

namespace pa::trace {

struct TimelineHeader {
  ProblemSpec spec;
  Stage stage = Stage::optimized;
  std::string source;    // the GPU's name (timelines are only ever measured)
  std::string revision;  // git revision of the sources that produced it
  std::string launch;    // the launch in words (grid, plan), or ""
  // What the GPU reported, 0 where unknown. The SM count bounds every span's
  // sm; the clock rate turns a span's clk_* cycles into time; the resolution
  // is the step of %globaltimer seen on this GPU (spans shorter than it read
  // as 0 or one step long).
  std::uint32_t sm_count = 0;
  std::uint32_t sm_clock_khz = 0;
  std::uint32_t globaltimer_resolution_ns = 0;
  // Median kernel time of the same launch without and with the timing tracer
  // (the tracer's overhead, measured on the run the spans come from); 0 where
  // not measured.
  std::uint64_t untimed_ns = 0;
  std::uint64_t timed_ns = 0;
  // Spans the tracer counted but had no room for. Not 0: the timeline is
  // incomplete (its buffer overflowed); the reader accepts it and says so here.
  std::uint64_t dropped_spans = 0;
};

struct TimelineData {
  TimelineHeader header;
  std::vector<Span> spans;
};

// A timeline file (or buffer) that is not a valid timeline: truncated,
// corrupt, foreign, or from an unsupported version. The message says which
// field is wrong, and where (its byte offset or the span's index).
class TimelineFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char kTimelineMagic[8] = {'P', 'A', 'L', 'T', 'I', 'M', 'E', 'L'};
inline constexpr std::uint32_t kTimelineVersion = 1;
inline constexpr std::uint32_t kTimelineSpanBytes = 48;
static_assert(kTimelineSpanBytes == sizeof(Span));
// The largest timeline file a reader accepts (about 44 million spans), like
// trace files: the reader holds the whole file, so a larger or endless input
// (a device, a pipe) is refused before it is read.
inline constexpr std::uint64_t kTimelineMaxFileBytes = std::uint64_t{2} << 30;
// A warp index is below 32: a block has at most 1024 threads.
inline constexpr int kTimelineMaxWarps = 32;

// Writes through pa::core::write_file_atomically (a temporary file beside
// path, then rename): a failed write never leaves a half-written file or
// loses the previous one (pa::core::FileWriteError). Throws
// TimelineFormatError if the data is not a valid timeline (the writer refuses
// what the reader would reject).
void write_timeline(const std::string& path, const TimelineData& data);

// Throws TimelineFormatError naming what is wrong, prefixed with the path.
TimelineData read_timeline(const std::string& path);

// `path` is a regular file of at most kTimelineMaxFileBytes; returns its size.
std::uint64_t check_timeline_file(const std::string& path);

// The same, in memory.
std::vector<std::uint8_t> serialize_timeline(const TimelineData& data);
TimelineData parse_timeline(const std::uint8_t* bytes, std::size_t size);

// Checks a header and its spans the way the reader does; throws
// TimelineFormatError naming the first bad field.
void validate_timeline(const TimelineData& data);

}  // namespace pa::trace
