// Trace files: a versioned header naming the problem, the configuration, the
// stage, the source ("host model" or the GPU's name) and the source revision,
// then the events. Format documented in trace/FORMAT.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"

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

// A trace file (or buffer) that is not a valid trace: truncated, corrupt,
// foreign, or from an unsupported version. The message says which and where.
class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr char kTraceMagic[8] = {'P', 'A', 'L', 'T', 'R', 'A', 'C', 'E'};
inline constexpr std::uint32_t kTraceVersion = 2;
inline constexpr std::uint32_t kTraceEventBytes = 72;
inline constexpr std::size_t kTraceMaxStringBytes = 256;  // source, revision
// The largest trace file a reader accepts (about 30 million events): the
// reader holds the whole file, and the viewer indexes every event, so a larger
// or endless input (a device, a pipe) is refused before it is read.
inline constexpr std::uint64_t kTraceMaxFileBytes = std::uint64_t{2} << 30;

// The string every host-model trace carries as its source.
inline constexpr const char* kHostModelSource = "host model";

// The git revision the trace library was built from (`git describe --always
// --dirty` at configure time; "unknown" outside a git checkout).
const char* build_revision();

// Writes through pa::core::write_file_atomically (a temporary file beside
// path, then rename), so a failed write never leaves a half-written file or
// loses the previous one. Throws pa::core::FileWriteError (a
// std::runtime_error) with the path and the reason.
// Throws TraceFormatError if the data cannot be written as a valid trace
// (the writer refuses what the reader would reject).
void write_trace(const std::string& path, const TraceData& data);

// Throws pa::trace::TraceFormatError (a std::runtime_error) naming what is
// wrong (truncated, bad magic, unsupported version, corrupt count ...).
TraceData read_trace(const std::string& path);

// What every trace reader checks before reading a byte: `path` is a regular
// file (not a folder, a device or a pipe) of at most kTraceMaxFileBytes.
// Returns its size; throws TraceFormatError naming the path and the limit.
std::uint64_t check_trace_file(const std::string& path);

// The same, in memory (used by the writer, the reader, tests and the fuzzer).
std::vector<std::uint8_t> serialize_trace(const TraceData& data);
TraceData parse_trace(const std::uint8_t* bytes, std::size_t size);
// For fuzzing only: parse_trace without the checksum gate, so that mutated
// inputs reach the field checks behind it. Same errors otherwise.
TraceData parse_trace_unchecked_for_fuzzing(const std::uint8_t* bytes, std::size_t size);

// Checks a header and its events the way the reader does; throws
// TraceFormatError naming the first bad field.
void validate_trace(const TraceData& data);

}  // namespace pa::trace
