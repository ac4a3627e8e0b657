// Loading a trace (host model or file), indexing it and computing the first
// thread block's caches: everything heavy the viewer does at load, as one
// plain function that runs on a background thread (core/background.hpp)
// with progress and cancellation, and that the tests call directly.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/background.hpp"
#include "core/config_info.hpp"
#include "core/trace_index.hpp"
#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"
#include "pa/trace/host_model.hpp"

namespace pa::viewer {

// What the panels draw for one thread block, derived from its events once.
struct BlockCaches {
  std::vector<int> slot_physical;         // logical block -> physical (-1 unknown)
  std::vector<char> slot_from_problem;    // 1: physical block from the problem, not read by this trace
  std::unordered_map<int, int> slot_of_physical;
  int kv_head = 0;
  int token_begin = 0, token_end = 0;     // tokens of this block's partition
  bool reads_k = true, reads_v = false;
  std::vector<int> k_first_step, v_first_step;  // per slot*H*B element: first step that loads it (-1 never)
  std::vector<float> logit_value, prob_value;   // per token of the sequence (NaN if not traced)
  std::vector<int> logit_step, prob_step;
  // dim_begin / dim_count: the head dims the event touched (-1 / 0: none); an
  // event of several dims reports the first one's value (kernels/stages/EVENTS.md).
  struct Stat { int step; trace::Step what; trace::Tensor tensor; int warp, lane; float value; int dim_begin, dim_count; };
  std::vector<Stat> stats;                // events with finite values other than logits/probs (first 4096)
  int traced_warps = 0;                   // 1 + the largest warp in the block's events
  // The bytes of each buffer the block touches: [begin, end) over its events.
  struct Extent {
    trace::Tensor tensor = trace::Tensor::none;
    std::int64_t begin = 0, end = 0;
  };
  std::vector<Extent> extents;            // by tensor value, only those touched
  const Extent* extent(trace::Tensor t) const {
    for (const Extent& e : extents)
      if (e.tensor == t) return &e;
    return nullptr;
  }
};

// tables: every sequence's block table from the problem (may be empty).
BlockCaches compute_block_caches(const ProblemSpec& spec, trace::Stage stage, const ConfigInfo& cfg,
                                 const std::vector<trace::Event>& events, const TraceIndex& index,
                                 const std::vector<std::vector<int>>& tables, int block);

// Every sequence's block table, from the problem; empty when the problem is
// too large to build just for this (or invalid).
std::vector<std::vector<int>> problem_tables(const ProblemSpec& spec);
// Problems up to this many K elements get their tables inside the load
// (make_problem is cheap there); larger ones after the trace is shown.
inline constexpr long long kTablesInLoadElements = 1ll << 18;
long long problem_k_elements(const ProblemSpec& spec);

struct LoadRequest {
  enum class Kind { model, file, reindex };
  Kind kind = Kind::model;
  // model: the problem, stage and traced thread block.
  ProblemSpec spec;
  trace::Stage stage = trace::Stage::q_to_smem;
  int sel_seq = 0, sel_head = 0, sel_partition = 0;
  // file: its path.
  std::string path;
  // reindex: the loaded trace again at another granularity (spec, stage,
  // source... copied from it by the caller).
  std::shared_ptr<const std::vector<trace::Event>> events;
  std::string source, revision;
  std::vector<std::vector<int>> tables;
  Granularity granularity = Granularity::instruction;
  int step_after = 0;  // replay step to show once applied; -1 keeps the current one
  bool fallback_to_model = false;  // file: on failure, show the host model (start-up)
  std::string describe() const;
};

struct LoadedTrace {
  LoadRequest::Kind kind = LoadRequest::Kind::model;
  ProblemSpec spec;
  trace::Stage stage = trace::Stage::q_to_smem;
  ConfigInfo cfg;
  std::string source, revision, path;  // path empty: host model
  int sel_seq = 0, sel_head = 0, sel_partition = 0;
  std::vector<trace::Event> events;
  TraceIndex index;
  std::vector<std::vector<int>> tables;
  int block = 0;        // the block shown first: the selected (seq, head, partition) if the trace has it
  BlockCaches block0;   // its caches
  // The block tables were left out of the load (a large problem: drawing the
  // problem again would double the load); the caller builds them afterwards.
  bool tables_pending = false;
  int step_after = 0;
  // Not a failure: the stage has no host model in this build; the result
  // carries the problem (the panels that draw it from the reference work).
  std::string message;
  double load_ms = 0, index_ms = 0, total_ms = 0;
};

// The thread blocks the host model traces for a selected (seq, head,
// partition): that block, and for stage 8 also the split CTA that arrives last
// and merges the others (lesson 8's split_arrive and merge steps). Stages 6
// and 7 add their reduce / merge blocks in the trace module (traced_blocks).
trace::Selection viewer_selection(const ProblemSpec& spec, trace::Stage stage, int seq, int head, int partition);

// Why the host model cannot trace this stage over the problem's fp8 KV cache:
// the trace module's rule (pa/trace/host_model.hpp).
using trace::kv_cache_refusal;

// Runs the request. Throws LoadCancelled when ctl is cancelled (checked
// between phases and inside the index), std::exception with a message that
// names the file or the bad value otherwise. Progress: 0..1, monotonic.
LoadedTrace load_trace(const LoadRequest& req, LoadControl& ctl);

// Reads a whole file in chunks (progress and cancellation between chunks).
std::vector<std::uint8_t> read_file_chunked(const std::string& path, LoadControl& ctl, float lo, float hi);

}  // namespace pa::viewer
