// A timeline as Chrome trace-event JSON, the format Perfetto's UI
// (ui.perfetto.dev) and chrome://tracing open: one complete event ("ph":"X")
// per span, the GPU's SMs as processes and each warp of each block as a
// thread, so the UI draws one track per warp, grouped by the SM it ran on.
//
//   {"displayTimeUnit":"ns",
//    "otherData":{"source":"NVIDIA H100 ...","stage":"optimized",...},
//    "traceEvents":[
//      {"name":"process_name","ph":"M","ts":0,"pid":4,"tid":9,"args":{"name":"SM 3"}}, ...
//      {"name":"thread_name","ph":"M","ts":0,"pid":4,"tid":9,"args":{"name":"block 2 warp 1"}}, ...
//      {"name":"opt_qk_mma","cat":"optimized,main","ph":"X","ts":1.250,"dur":0.480,
//       "pid":4,"tid":9,"args":{"block":2,"warp":1,"iter":0,"cycles":912}}, ...]}
//
// - ts and dur are microseconds (the format's unit) from the spans'
//   %globaltimer nanoseconds, relative to the earliest span, written exactly
//   with three decimals (never through a float).
// - pid = SM + 1 and tid = 1, 2, ... (one per (SM, kernel role, block,
//   warp), in that order): Perfetto treats pid 0 and tid 0 as the kernel's
//   idle task, so neither is used. The names carry the real SM, block and warp.
// - name = the span's Phase; cat = "stage,kernel role" (the UI filters by
//   category); args = block, warp, iter and the SM cycles (clk_end - clk_begin).
// - otherData holds the header: source, revision, problem, clocks, overhead,
//   dropped spans (a file whose tracer overflowed is exported, and says so).
//
// The output is streamed in pieces: a million spans are some 200 MB of JSON,
// never held in memory at once.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "pa/trace/timeline_file.hpp"

namespace pa::trace {

struct TimelineExportStats {
  std::uint64_t spans = 0;      // complete events written (one per span)
  std::uint64_t sms = 0;        // processes (process_name metadata events)
  std::uint64_t threads = 0;    // threads (thread_name metadata events)
  std::uint64_t t0_ns = 0;      // the earliest span's begin: ts 0 in the JSON
  std::uint64_t length_ns = 0;  // from t0 to the latest span's end
};

// Receives the JSON in consecutive pieces.
using JsonSink = std::function<void(std::string_view piece)>;

// Validates the timeline (TimelineFormatError, as the reader) and writes it.
TimelineExportStats export_timeline_json(const TimelineData& data, const JsonSink& sink);

// The whole JSON as one string: for tests and small timelines.
std::string timeline_json(const TimelineData& data);

// Streams the JSON to `path` through pa::core::write_file_atomically_streamed
// (a temporary file beside it, then rename): a failed write keeps the old file
// (pa::core::FileWriteError).
TimelineExportStats write_timeline_json(const std::string& path, const TimelineData& data);

// Appends `s` as a JSON string literal: quotes, backslashes and control
// characters escaped; other bytes as they are (`s` must be UTF-8, which the
// timeline's validation guarantees for its texts).
void append_json_string(std::string& out, std::string_view s);

}  // namespace pa::trace
