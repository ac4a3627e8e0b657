// The pa-viewer command line (parsed without a window so it can be tested).
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/timeline_model.hpp"
#include "pa/index/dtype.hpp"
#include "pa/core/problem.hpp"

namespace pa::viewer {

// Lessons are opened by one digit key (0-9) and by --lesson N in the same range.
inline constexpr int kMaxLesson = 9;

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --timeline-view: what the Timeline panel shows first.
struct TimelineViewArg {
  TimelineLevel level = TimelineLevel::grid;
  int sm = 0;                                          // level sm
  trace::KernelRole kernel = trace::KernelRole::main;  // level block: the block (kernel, index)
  std::uint32_t block = 0;
};

struct Args {
  int lesson = 1;                  // 0..kMaxLesson
  std::optional<int> step;         // replay step (0-based)
  std::string trace_file;          // open this trace instead of the host model
  std::string timeline_file;       // --timeline: a timeline (.patl) to open in the Timeline panel
  std::optional<TimelineViewArg> timeline_view;  // --timeline-view grid | sm:S | block:B | block:ROLE:B
  std::string screenshot;          // render, write PNG, exit
  std::string dump_layout;         // screenshot mode: write panel geometry here
  int width = 1600, height = 1000;
  bool size_given = false;
  // --select warp=W[,lane=L] | k=PB,D,T | v=PB,D,T  (PB = physical block, D = dim, T = token in block)
  std::optional<int> sel_warp, sel_lane;
  char sel_kv = 0;                 // 'k' or 'v' for an element selection
  int sel_pb = -1, sel_d = -1, sel_t = -1;
  // --block SEQ,HEAD[,BLOCK]: the thread block to trace and show; block_label
  // is its label in Event::partition (parse_block_label).
  std::optional<int> block_seq, block_head, block_label;
  bool follow_selection = false;   // --follow-selection: Left/Right step through the selection's steps
  bool coarse = false;             // --granularity step
  bool granularity_given = false;  // --granularity on the command line (it wins over saved settings)
  // Problem overrides for the host model.
  std::optional<DType> dtype;
  std::optional<int> head_size, block_size, num_heads, num_kv_heads, partition_size, prefix;
  bool alibi = false;  // --alibi: the problem gets ALiBi slopes
  std::optional<KvDType> kv_dtype;            // --kv-dtype: the KV cache's element type
  std::optional<pa::KvLayout> kv_layout;      // --layout: how the device holds the cache
  std::optional<pa::PageTableForm> page_table;  // --page-table: padded or CSR
  std::optional<float> k_scale, v_scale;      // --k-scale / --v-scale: fp8 scales (> 0; else from the data)
  std::vector<int> context_lens;
  std::string lessons_dir, source_dir;
  int bench_frames = 0;            // --bench N: time N frames and exit
  bool bench_while_loading = false;  // --bench-while-loading: with --bench, draw during the load and time those frames too
  std::optional<std::pair<int, int>> mouse;  // --mouse X,Y: screenshot with the pointer there (tooltips)
  bool click = false;              // --click: and click there once
  int wheel = 0;                   // --wheel N: and turn the mouse wheel N notches there (negative: towards you)
  std::optional<std::pair<int, int>> drag;  // --drag DX,DY: and drag from there by (DX, DY) pixels
  std::string keys;                // --keys: with --screenshot, keys pressed first (R L H E space 0-8 ?)
  bool exercise_resize = false;    // --exercise-resize: screenshot after shrinking to tiny sizes and back (tests)
  std::optional<float> scale;      // --scale F: UI scale (fonts, sizes); default: the monitor's content scale
  std::string tab;                 // --tab: requests | values | partitions | inspect | kv | shared | problem | trace
  // --shards N[,POLICY]: the Partitions tab's "Across GPUs" picture (N 2, 4 or 8; policy contiguous | round_robin).
  std::optional<int> shard_gpus;
  std::optional<int> shard_policy;
  // --levels G:T,...: the Partitions tab's "Across levels" (checked against the problem when it is drawn).
  std::string levels;
  // --answer ID=VALUE (repeatable): type VALUE into the lesson's exercise ID and check it (screenshots, tests)
  std::vector<std::pair<std::string, std::string>> answers;
  bool help = false;
};

// Throws UsageError naming the bad argument and what is accepted. Each
// option may be given once (--answer may repeat).
Args parse_args(const std::vector<std::string>& argv);

// The problem the command line asks for (the defaults with --dtype,
// --head-size, --context ... applied), checked before any window opens:
// spec.validate()'s ProblemError becomes a UsageError naming the pa-viewer
// flag at fault, the value and what is accepted. --trace FILE must name a
// readable trace file (a regular file within the readers' size limit).
void check_args_problem(const Args& a, const ProblemSpec& spec);

// The BLOCK of --block SEQ,HEAD,BLOCK (and of the Problem tab) as a thread
// block label (Event::partition, pa/index/events.hpp): a partition (stage 6,
// the cascade's suffix) or split (stage 8) N >= 0; reduce (also -1),
// prefix_reduce (-2), merge (-3); prefix:C, the cascade prefix kernel's
// chunk C. Throws UsageError naming the value and what is accepted.
int parse_block_label(const std::string& text);
// The value of --timeline-view: grid, sm:S, block:B (the main kernel's block
// B) or block:ROLE:B (ROLE a kernel role: main, reduce, prefix,
// prefix_reduce, suffix, merge). Throws UsageError naming the value and what
// is accepted.
TimelineViewArg parse_timeline_view(const std::string& text);
// The inverse, for messages: "2", "reduce", "prefix:1".
std::string block_label_text(int label);
// The partition the host model is asked to trace so that the trace holds
// the labelled block: a partition itself; for the reduce, prefix reduce and
// merge of the row, partition 0; for prefix chunk C, suffix partition C (the
// model traces the prefix chunk of the same index with it).
int model_partition_of_label(int label);
std::string usage();

}  // namespace pa::viewer
