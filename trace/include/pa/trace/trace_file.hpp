// Trace files: a versioned header naming the problem, the configuration, the
// stage, the source ("host model" or the GPU's name) and the source revision,
// then the events. Format documented in trace/FORMAT.md.
#pragma once
#include <string>
#include <vector>

#include "pa/reference/problem.hpp"
#include "pa/trace/event.hpp"

namespace pa::trace {

struct TraceHeader {
  ProblemSpec spec;
  Stage stage = Stage::q_to_smem;
  std::string source;    // "host model" or e.g. "NVIDIA H100 80GB HBM3"
  std::string revision;  // git revision of the sources that produced it
};

struct TraceData {
  TraceHeader header;
  std::vector<Event> events;
};

// Writes to path + ".tmp" then renames, so a failed write never leaves a
// half-written file. Throws std::runtime_error with the path and the reason.
void write_trace(const std::string& path, const TraceData& data);

// Throws pa::trace::TraceFormatError (a std::runtime_error) naming what is
// wrong (truncated, bad magic, unsupported version, corrupt count ...).
TraceData read_trace(const std::string& path);

}  // namespace pa::trace
