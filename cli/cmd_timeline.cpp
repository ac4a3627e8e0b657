// pa-lab timeline: a timeline file (.patl, trace/FORMAT.md) exported as
// Chrome trace-event JSON for Perfetto's UI (pa/trace/timeline_export.hpp).
// Recording a timeline needs a GPU build with the timing tracer; this command
// does not record yet, it exports what a GPU run recorded.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "pa/core/atomic_file.hpp"
#include "pa/trace/timeline_export.hpp"
#include "pa/trace/timeline_file.hpp"

namespace pa::cli {

void help_timeline() {
  std::printf(
      "usage: pa-lab timeline --from FILE.patl -o FILE.json\n\n"
      "Exports a timeline (when each warp ran each step function, measured on a GPU; format:\n"
      "trace/FORMAT.md) as Chrome trace-event JSON: open FILE.json in https://ui.perfetto.dev\n"
      "(or chrome://tracing). Each SM is a process, each warp of a block a thread, each span a\n"
      "slice named by its step, with block, warp, loop iteration and SM cycles as arguments.\n"
      "The JSON is written to a temporary file beside FILE.json, then renamed: a failed write\n"
      "keeps the old file.\n\n"
      "  --from FILE         the timeline file to export (.patl)\n"
      "  -o, --output FILE   the JSON file to write\n\n"
      "Recording a timeline (--stage NAME on a GPU) needs a GPU build with the timing tracer\n"
      "and is not in pa-lab yet.\n");
}

int cmd_timeline(Args args_in) {
  std::vector<std::string> args(args_in.begin(), args_in.end());
  for (auto& a : args) {
    if (a == "-o") a = "--output";
  }
  Flags f{Args(args)};
  if (f.take_switch("help")) {
    help_timeline();
    return kExitOk;
  }
  if (const auto stage = f.take("stage")) {
    throw UsageError("option --stage: recording a timeline ('" + *stage +
                     "') needs a GPU build with the timing tracer and is not in pa-lab yet (accepted: --from "
                     "FILE.patl, a recorded timeline)");
  }
  const auto from = f.take("from");
  const auto out = f.take("output");
  f.finish("timeline");
  if (!from) throw UsageError("--from FILE.patl is required (the timeline to export)");
  if (!out) throw UsageError("-o FILE (or --output FILE) is required");
  // A file that cannot be read or written is the command line's fault, found
  // before anything is read; what is inside the file is checked by the reader.
  try {
    trace::check_timeline_file(*from);
  } catch (const trace::TimelineFormatError& e) {
    throw UsageError(std::string("option --from: ") + e.what());
  }
  try {
    core::check_can_write(*out);
  } catch (const core::FileWriteError& e) {
    throw UsageError(std::string("option -o / --output: ") + e.what());
  }

  const trace::TimelineData d = trace::read_timeline(*from);
  const trace::TimelineHeader& h = d.header;
  if (h.dropped_spans > 0) {
    std::fprintf(stderr,
                 "warning: %s is incomplete: the timing tracer dropped %llu spans (its buffer overflowed); "
                 "exported as it is\n",
                 from->c_str(), static_cast<unsigned long long>(h.dropped_spans));
  }
  const trace::TimelineExportStats st = trace::write_timeline_json(*out, d);
  std::printf("wrote %s: %llu spans of %llu warps on %llu SMs, %.3f us, from %s (stage %s, %s, source \"%s\", "
              "revision %s)\n",
              out->c_str(), static_cast<unsigned long long>(st.spans), static_cast<unsigned long long>(st.threads),
              static_cast<unsigned long long>(st.sms), static_cast<double>(st.length_ns) / 1000.0, from->c_str(),
              trace::to_string(h.stage), h.spec.describe().c_str(), h.source.c_str(), h.revision.c_str());
  if (h.untimed_ns > 0 && h.timed_ns > 0) {
    std::printf("timing tracer overhead on this run: %.3f us without, %.3f us with it (%+.1f%%)\n",
                static_cast<double>(h.untimed_ns) / 1000.0, static_cast<double>(h.timed_ns) / 1000.0,
                100.0 * (static_cast<double>(h.timed_ns) / static_cast<double>(h.untimed_ns) - 1.0));
  }
  std::printf("open it in https://ui.perfetto.dev (or chrome://tracing)\n");
  return kExitOk;
}

}  // namespace pa::cli
