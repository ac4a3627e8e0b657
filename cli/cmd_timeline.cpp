// pa-lab timeline: records a timeline on the GPU (a stage's kernel with the
// timing tracer, pa/trace/timeline_record.hpp) into a timeline file (.patl,
// trace/FORMAT.md), and exports a timeline file as Chrome trace-event JSON for
// Perfetto's UI (pa/trace/timeline_export.hpp).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "options.hpp"
#include "pa/kernels/api.hpp"
#include "pa/trace/timeline_export.hpp"
#include "pa/trace/timeline_file.hpp"
#include "pa/trace/timeline_record.hpp"
#include "pa/trace/trace_file.hpp"

namespace pa::cli {

void help_timeline() {
  std::printf(
      "usage: pa-lab timeline --stage NAME [problem options] [--splits N] -o FILE.patl [--json FILE.json]\n"
      "       pa-lab timeline --from FILE.patl -o FILE.json\n\n"
      "Records when each warp ran each step function of a stage, on the GPU (the kernel built with the\n"
      "timing tracer: one span per warp and step, on %%globaltimer and the SM's clock), into a timeline\n"
      "file (format: trace/FORMAT.md); the same launch is also timed without and with the tracer, and\n"
      "both medians go into the file. Or exports a timeline file as Chrome trace-event JSON: open\n"
      "FILE.json in https://ui.perfetto.dev (or chrome://tracing). Each SM is a process, each warp of a\n"
      "block a thread, each span a slice named by its step, with block, warp, loop iteration and SM\n"
      "cycles as arguments. Files are written to a temporary file beside the target, then renamed:\n"
      "a failed write keeps the old file.\n\n"
      "  --stage NAME        record this stage (timed: %s)\n"
      "  --splits N          stage optimized: the split count (0: the planner's choice, as pa-lab run)\n"
      "stage cascade_merge (the prefix kernel, its chunk reduce, the stage 8 suffix and the merge):\n"
      "%s"
      "  --json FILE         with --stage: also export the recording as JSON\n"
      "  --from FILE         the timeline file to export (.patl)\n"
      "  -o, --output FILE   with --stage the timeline file to write, with --from the JSON file\n\n"
      "%s",
      trace::timeline_instances_text().c_str(), cascade_flags_help(), problem_flags_help());
}

namespace {

// The smallest step between two distinct %globaltimer readings of the
// recording: the timer's resolution as this run saw it (0 with fewer than two
// distinct readings).
std::uint32_t observed_timer_step(const std::vector<trace::Span>& spans) {
  std::vector<std::uint64_t> t;
  t.reserve(spans.size() * 2);
  for (const trace::Span& s : spans) {
    t.push_back(s.t_begin_ns);
    t.push_back(s.t_end_ns);
  }
  std::sort(t.begin(), t.end());
  std::uint64_t step = 0;
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] != t[i - 1] && (step == 0 || t[i] - t[i - 1] < step)) step = t[i] - t[i - 1];
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(step, UINT32_MAX));
}

void print_overhead(const trace::TimelineHeader& h) {
  if (h.untimed_ns > 0 && h.timed_ns > 0) {
    std::printf("timing tracer overhead on this run: %.3f us without, %.3f us with it (%+.1f%%)\n",
                static_cast<double>(h.untimed_ns) / 1000.0, static_cast<double>(h.timed_ns) / 1000.0,
                100.0 * (static_cast<double>(h.timed_ns) / static_cast<double>(h.untimed_ns) - 1.0));
  }
}

void export_json(const std::string& out, const trace::TimelineData& d, const std::string& from) {
  const trace::TimelineHeader& h = d.header;
  const trace::TimelineExportStats st = trace::write_timeline_json(out, d);
  std::printf("wrote %s: %llu spans of %llu warps on %llu SMs, %.3f us, from %s (stage %s, %s, source \"%s\", "
              "revision %s)\n",
              out.c_str(), static_cast<unsigned long long>(st.spans), static_cast<unsigned long long>(st.threads),
              static_cast<unsigned long long>(st.sms), static_cast<double>(st.length_ns) / 1000.0, from.c_str(),
              trace::to_string(h.stage), h.spec.describe().c_str(), h.source.c_str(), h.revision.c_str());
}

int record(Flags& f, const std::string& stage_name) {
  const auto stage = trace::stage_from_string(stage_name);
  if (!stage) {
    throw UsageError("option --stage: unknown stage '" + stage_name + "' (timed: " +
                     trace::timeline_instances_text() + ")");
  }
  ProblemSpec spec = take_problem_flags(f);
  if (*stage == trace::Stage::cascade_merge) take_cascade_flags(f, spec);
  trace::TimelineOptions opt;
  refuse_splits_unless_optimized(f, *stage == trace::Stage::optimized, stage_name);
  opt.force_splits = f.take_int("splits", 0, 0);
  const auto json = f.take("json");
  const auto out = f.take("output");
  if (f.take("from")) throw UsageError("--from and --stage do not go together (--from exports, --stage records)");
  f.finish("timeline");
  if (!out) throw UsageError("-o FILE.patl (or --output FILE.patl) is required");
  check_writable(*out, "-o / --output");
  if (json) check_writable(*json, "--json");
  validate_problem_flags(spec);
  if (*stage == trace::Stage::cascade_merge && spec.shared_prefix_len == 0) {
    throw UsageError("--stage cascade_merge times a cascade: it needs --prefix-len P > 0 (the tokens every "
                     "sequence shares; with none there is no cascade, time v2_partition or optimized)");
  }
  if (!trace::can_record_timeline(*stage, spec)) {
    throw UsageError("stage " + stage_name + " with " + spec.describe() + " cannot be timed in this build (timed: " +
                     trace::timeline_instances_text() + ")");
  }
  const PagedProblem p = make_problem(spec);
  const trace::TimelineRecording r = trace::record_timeline(*stage, p, opt);  // NoGpuError: exit 2
  trace::TimelineData d;
  d.header.spec = spec;
  d.header.stage = *stage;
  d.header.source = r.gpu_name;
  d.header.revision = trace::build_revision();
  d.header.launch = r.plan;
  d.header.sm_count = static_cast<std::uint32_t>(r.sm_count);
  d.header.sm_clock_khz = static_cast<std::uint32_t>(r.sm_clock_khz);
  d.header.globaltimer_resolution_ns = observed_timer_step(r.spans);
  d.header.untimed_ns = static_cast<std::uint64_t>(static_cast<double>(r.untimed_ms) * 1e6);
  d.header.timed_ns = static_cast<std::uint64_t>(static_cast<double>(r.timed_ms) * 1e6);
  d.header.dropped_spans = 0;  // record_timeline reruns with room for every span
  d.spans = r.spans;
  trace::write_timeline(*out, d);
  std::printf("recorded on %s: %zu spans of %llu warps (%d launch%s), %s\nwrote %s\n", r.gpu_name.c_str(),
              r.spans.size(), static_cast<unsigned long long>(r.warps), r.launches,
              r.launches == 1 ? "" : "es: a warp needed more span slots than planned", r.plan.c_str(), out->c_str());
  print_overhead(d.header);
  if (json) export_json(*json, d, *out);
  return kExitOk;
}

}  // namespace

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
  if (const auto stage = f.take("stage")) return record(f, *stage);
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
  check_writable(*out, "-o / --output");

  const trace::TimelineData d = trace::read_timeline(*from);
  if (d.header.dropped_spans > 0) {
    std::fprintf(stderr,
                 "warning: %s is incomplete: the timing tracer dropped %llu spans (its buffer overflowed); "
                 "exported as it is\n",
                 from->c_str(), static_cast<unsigned long long>(d.header.dropped_spans));
  }
  export_json(*out, d, *from);
  print_overhead(d.header);
  std::printf("open it in https://ui.perfetto.dev (or chrome://tracing)\n");
  return kExitOk;
}

}  // namespace pa::cli
