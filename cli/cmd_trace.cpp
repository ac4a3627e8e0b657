// pa-lab trace: the events of one stage for a few thread blocks, written as
// a trace file (trace/FORMAT.md). Recorded on the GPU when one is present and
// the configuration has a recording instance, otherwise produced by the host
// model; the file's header says which ("host model" or the GPU's name).
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cache_form.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "pa/core/parse_number.hpp"
#include "pa/index/cascade.hpp"
#include "pa/index/optimized.hpp"
#include "pa/kernels/api.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/analysis.hpp"
#include "pa/trace/compare.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"
#include "pa/trace/replay.hpp"
#include "pa/trace/trace_file.hpp"

namespace pa::cli {

namespace {
// The one form traces cover, the defaults: vLLM's layout with padded tables.
std::string trace_cache_form_text() {
  const CacheForm traced;
  return std::string("--layout ") + kv_layout_name(traced.layout) + " --page-table " + page_table_name(traced.table);
}
}  // namespace

void help_trace() {
  std::printf(
      "usage: pa-lab trace --stage NAME [problem flags] [--select LIST] [--source auto|gpu|model] -o FILE\n\n"
      "Writes the events of the stage's kernel for the selected thread blocks to FILE\n"
      "(format: trace/FORMAT.md; written to a temporary file beside FILE, then renamed: a failed write keeps the old FILE).\n\n"
      "  --stage NAME        q_to_smem qk softmax lv warp_reduce v2_partition cascade_merge optimized\n"
      "                      (or 1..8; v1 = warp_reduce; v2_partition: the partition blocks + the reduce\n"
      "                      block (partition -1); cascade_merge: partition = a suffix partition, plus the\n"
      "                      reduces (-1, -2) and the merge threads (-3); with --prefix-len, the blocks of\n"
      "                      the prefix kernel (its mma.sync form; fp32: stage 6's partitions) that hold\n"
      "                      the selected rows)\n"
      "  --select LIST       thread blocks as seq,head[,partition], separated by ';', or 'all'\n"
      "                      (optimized: head = any query head of the CTA's unit, partition = the split)\n"
      "                      (default: 0,0 = the first block; recording: at most 64 blocks with the added ones)\n"
      "  --splits N          optimized: force N splits (default 0: the launcher's heuristic; the host model\n"
      "                      plans for an H100/H200, 132 SMs, a recording for the GPU it runs on)\n"
      "  --prefix-len P      cascade_merge: the shared prefix (tokens, a multiple of the block size; default 0)\n"
      "  --source S          auto (default): record on the GPU if present and this configuration\n"
      "                      has a recording instance, else the host model; gpu: record or fail;\n"
      "                      model: the host model\n"
      "  --check             when recording, also build the host model and compare: every field exact,\n"
      "                      values within the dtype's tolerance (exit 1 if different)\n"
      "  --layout L, --page-table T\n"
      "                      the cache's form (default %s): stages warp_reduce and optimized are\n"
      "                      traced over every layout (vllm, nhd, hnd), stages 1-5 and optimized over\n"
      "                      both page tables (padded, csr: the kv_indptr and kv_last_page_len loads are\n"
      "                      events); stages 6-7 over the default only (pa-lab list shows every form and\n"
      "                      the stages that read it)\n"
      "  -o, --output FILE   the trace file to write\n\n%s\n"
      "Recordable on the GPU in this build: %s\n",
      trace_cache_form_text().c_str(), problem_flags_help(), trace::recordable_configs_text().c_str());
}

namespace {

trace::Selection parse_selection(const std::string& text, const ProblemSpec& spec, trace::Stage stage,
                                 const trace::ModelOptions& opt) {
  trace::Selection sel;
  if (text == "all" && stage == trace::Stage::optimized) {  // every CTA of the planned grid
    const trace::OptimizedModelPlan plan = trace::optimized_model_plan(spec, opt.optimized);
    for (int s = 0; s < spec.num_seqs(); ++s)
      for (int u = 0; u < plan.units; ++u)
        for (int p = 0; p < plan.splits; ++p)
          sel.blocks.push_back({s, opt_unit_first_head(u, plan.head_chunks, plan.group), p});
    return sel;
  }
  if (text == "all") {  // every thread block of the grid (partitions of each sequence's context)
    for (int s = 0; s < spec.num_seqs(); ++s) {
      int parts = stage == trace::Stage::v2_partition ? num_partitions(spec.context_lens[s], spec.partition_size) : 1;
      if (stage == trace::Stage::cascade_merge)  // the suffix's partitions (at least one block)
        parts = std::max(1, num_partitions_in(TokenRange{spec.shared_prefix_len, -1}, spec.context_lens[s],
                                              spec.partition_size));
      for (int h = 0; h < spec.num_heads; ++h)
        for (int p = 0; p < parts; ++p) sel.blocks.push_back({s, h, p});
    }
    return sel;
  }
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    std::vector<int> v;
    std::stringstream is(item);
    std::string num;
    while (std::getline(is, num, ',')) {
      const auto n = parse_number<int>(num);
      if (!n) throw UsageError("option --select: '" + num + "' in '" + item + "' is not an integer (expected seq,head[,partition])");
      v.push_back(*n);
    }
    if (v.size() < 2 || v.size() > 3) {
      throw UsageError("option --select: '" + item + "' (expected seq,head or seq,head,partition)");
    }
    if (v[0] < 0 || v[0] >= spec.num_seqs() || v[1] < 0 || v[1] >= spec.num_heads) {
      throw UsageError("option --select: '" + item + "' names no thread block of this problem (accepted: seq 0 .. " +
                       std::to_string(spec.num_seqs() - 1) + ", head 0 .. " + std::to_string(spec.num_heads - 1) +
                       ")");
    }
    sel.blocks.push_back({v[0], v[1], v.size() == 3 ? v[2] : 0});
  }
  if (sel.blocks.empty()) throw UsageError("option --select: no block in '" + text + "'");
  return sel;
}

void print_summary(const trace::TraceData& d) {
  using namespace trace;
  const auto reqs = memory_requests(d.events);
  // "ideal" is the sectors' for global rows, the wavefronts' for shared rows;
  // L2 req / L2 ideal: the global requests' L2 requests and the fewest lines.
  std::printf("%-18s %-13s %-12s %8s %10s %8s %9s %8s %8s %8s %10s\n", "step", "op", "tensor", "events", "bytes",
              "requests", "sectors", "ideal", "L2 req", "L2 ideal", "wavefronts");
  for (const auto& t : traffic_by_step(d.events, reqs)) {
    if (t.op == Op::barrier) continue;
    std::printf("%-18s %-13s %-12s %8lld %10lld %8lld %9lld %8lld %8lld %8lld %10lld\n", to_string(t.step), to_string(t.op),
                to_string(t.tensor), static_cast<long long>(t.events), static_cast<long long>(t.bytes),
                static_cast<long long>(t.requests),
                static_cast<long long>(t.op == Op::global_load || t.op == Op::global_store || t.op == Op::async_copy ? t.sectors : 0),
                static_cast<long long>(t.op == Op::shared_load || t.op == Op::shared_store ? t.ideal_wavefronts
                                                                                           : t.ideal_sectors),
                static_cast<long long>(t.l2_requests), static_cast<long long>(t.ideal_l2_requests),
                static_cast<long long>(t.wavefronts));
  }
  const auto tot = traffic_totals(d.events, reqs);
  auto ll = [](std::int64_t v) { return static_cast<long long>(v); };
  std::printf("totals: global ld %lld requests %lld sectors; global st %lld requests %lld sectors "
              "(all: %lld sectors, ideal %lld)\n"
              "        L2 requests: global ld %lld, st %lld (all: %lld, fewest %lld)\n"
              "        shared ld %lld requests %lld wavefronts; shared st %lld requests %lld wavefronts "
              "(all: %lld wavefronts, ideal %lld)\n"
              "        bytes: global ld %lld st %lld, shared ld %lld st %lld\n",
              ll(tot.global_load_requests), ll(tot.global_load_sectors), ll(tot.global_store_requests),
              ll(tot.global_store_sectors), ll(tot.global_sectors), ll(tot.global_ideal_sectors),
              ll(tot.global_load_l2_requests), ll(tot.global_store_l2_requests), ll(tot.global_l2_requests),
              ll(tot.global_ideal_l2_requests),
              ll(tot.shared_load_requests), ll(tot.shared_load_wavefronts), ll(tot.shared_store_requests),
              ll(tot.shared_store_wavefronts), ll(tot.shared_wavefronts), ll(tot.shared_ideal_wavefronts),
              ll(tot.global_load_bytes), ll(tot.global_store_bytes), ll(tot.shared_load_bytes),
              ll(tot.shared_store_bytes));
}

}  // namespace

int cmd_trace(Args args_in) {
  std::vector<std::string> args(args_in.begin(), args_in.end());
  for (auto& a : args) {
    if (a == "-o") a = "--output";
  }
  Flags f(Args(args), {"help", "check"});
  if (f.take_switch("help")) {
    help_trace();
    return kExitOk;
  }
  const auto stage_name = f.take("stage");
  if (!stage_name) throw UsageError("--stage NAME is required (accepted: " + kernels::stage_names_text() + ")");
  const auto stage = kernels::parse_stage(*stage_name);
  if (!stage) throw UsageError("option --stage: unknown stage '" + *stage_name + "' (accepted: " + kernels::stage_names_text() + ")");
  ProblemSpec spec = take_problem_flags(f);
  // The cache's form: a stage is traced in the forms its kernels read
  // (kernels::stage_reads); the others are refused by name rather than ignored.
  const CacheForm form = take_cache_form_flags(f);
  spec.kv_layout = form.layout;
  spec.page_table = form.table;
  if (const std::string why = trace::kv_cache_refusal(spec, *stage); !why.empty() && !form.is_default())
    throw UsageError(cache_form_option_text(form) + ": " + why + "; pa-lab trace --stage optimized " +
                     cache_form_flags_text(form) + " traces it");
  // cascade_merge: the tokens every sequence shares (the cascade's prefix).
  spec.shared_prefix_len = f.take_int("prefix-len", 0, 0);
  trace::ModelOptions mopt;
  refuse_splits_unless_optimized(f, *stage == kernels::Stage::optimized, *stage_name);
  mopt.optimized.force_splits = f.take_int("splits", 0, 0);
  const auto sel_text = f.take("select");
  validate_problem_flags(spec);
  const trace::Selection sel = sel_text ? parse_selection(*sel_text, spec, *stage, mopt) : trace::Selection{};
  const std::string source = f.take_str("source", "auto");
  if (source != "auto" && source != "gpu" && source != "model") {
    throw UsageError("option --source: '" + source + "' (accepted: auto, gpu, model)");
  }
  const bool check = f.take_switch("check");
  const auto out = f.take("output");
  f.finish("trace");  // an unknown option first: it may be a misspelt --output
  if (!out) throw UsageError("-o FILE (or --output FILE) is required");
  // A file that cannot be written is found before the recording, not after.
  check_writable(*out, "-o / --output");

  validate_problem_flags(spec);
  if (!trace::stage_is_modelled(*stage) && !trace::can_record(*stage, spec)) {
    throw std::invalid_argument(std::string("stage ") + trace::to_string(*stage) +
                                " cannot be traced (traceable: q_to_smem, qk, softmax, lv, warp_reduce, v2_partition, "
                                "cascade_merge, optimized)");
  }
  trace::TraceData d;
  d.header.spec = spec;
  d.header.stage = *stage;
  d.header.revision = trace::build_revision();

  std::string why;
  const bool gpu = source != "model" && kernels::gpu_available(&why) && trace::can_record(*stage, spec);
  if (source == "gpu" && !gpu) {
    if (!kernels::gpu_available(&why)) throw kernels::NoGpuError(why);
    throw std::invalid_argument(std::string("no recording instance for this configuration; recordable: ") +
                                trace::recordable_configs_text());
  }
  if (gpu) {
    const PagedProblem p = make_problem(spec);
    trace::RecordResult r = *stage == trace::Stage::optimized
                                ? trace::record_optimized(p, sel, mopt.optimized.force_splits)
                                : trace::record_stage(*stage, p, sel);
    mopt = r.model_options;  // stage 8: this GPU's plan and arrival order
    d.events = std::move(r.events);
    d.header.source = r.gpu_name;
    std::printf("recorded on %s: %zu events (%d launch%s)\n", r.gpu_name.c_str(), d.events.size(), r.launches,
                r.launches == 1 ? "" : "es, the first buffer was too small");
    if (check) {  // the GPU tests' comparison (pa/trace/compare.hpp)
      const trace::EventComparison c = trace::compare_events(d.events, trace::model_events(spec, *stage, sel, mopt),
                                                             spec.dtype);
      if (!c.equal()) {
        std::printf("check against the host model: DIFFERENT\n%s", c.report.c_str());
        return kExitFail;
      }
      std::printf("check against the host model: equal (%zu events of %zu threads, every field exact; %zu values "
                  "within the %s tolerance, lse absolutely)\n",
                  c.model_events, c.threads, c.values_compared, dtype_name(spec.dtype));
    }
  } else {
    if (source == "auto") {
      std::printf("host model (%s)\n", kernels::gpu_available(&why)
                                           ? "this configuration has no recording instance in this build"
                                           : ("no GPU: " + why).c_str());
    }
    d.events = trace::model_events(spec, *stage, sel, mopt);
    d.header.source = trace::kHostModelSource;
  }
  if (const std::string note = trace::model_coverage_note(spec, *stage); !note.empty())
    std::printf("not in this trace: %s\n", note.c_str());
  // The viewer replays this file: its order must be one the kernel runs.
  if (const trace::TraceReplayCheck rc = trace::check_trace_replay(d.events); !rc.violations.empty()) {
    std::fprintf(stderr, "error: the replay order of these events is not one the kernel runs (%zu violations, nothing written):\n",
                 rc.violations.size());
    for (std::size_t i = 0; i < rc.violations.size() && i < 4; ++i) std::fprintf(stderr, "  %s\n", rc.violations[i].c_str());
    return kExitFail;
  }
  trace::write_trace(*out, d);
  std::printf("wrote %s: stage %s, %s, source \"%s\", revision %s, %zu events\n", out->c_str(),
              trace::to_string(*stage), spec.describe().c_str(), d.header.source.c_str(), d.header.revision.c_str(),
              d.events.size());
  print_summary(d);
  return kExitOk;
}

}  // namespace pa::cli
