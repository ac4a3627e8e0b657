// The pa-viewer command line (parsed without a window so it can be tested).
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pa/index/dtype.hpp"

namespace pa::viewer {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Args {
  int lesson = 1;                  // 0..8
  std::optional<int> step;         // replay step (0-based)
  std::string trace_file;          // open this trace instead of the host model
  std::string screenshot;          // render, write PNG, exit
  std::string dump_layout;         // screenshot mode: write panel geometry here
  int width = 1600, height = 1000;
  bool size_given = false;
  // --select warp=W[,lane=L] | k=PB,D,T | v=PB,D,T  (PB = physical block, D = dim, T = token in block)
  std::optional<int> sel_warp, sel_lane;
  char sel_kv = 0;                 // 'k' or 'v' for an element selection
  int sel_pb = -1, sel_d = -1, sel_t = -1;
  std::optional<int> block_seq, block_head, block_partition;  // --block SEQ,HEAD[,PART]
  bool follow_selection = false;   // --follow-selection: Left/Right step through the selection's steps
  bool coarse = false;             // --granularity step
  // Problem overrides for the host model.
  std::optional<DType> dtype;
  std::optional<int> head_size, block_size, num_heads, num_kv_heads, partition_size, prefix;
  std::vector<int> context_lens;
  std::string lessons_dir, source_dir;
  int bench_frames = 0;            // --bench N: time N frames and exit
  bool bench_while_loading = false;  // --bench-while-loading: with --bench, draw during the load and time those frames too
  std::optional<std::pair<int, int>> mouse;  // --mouse X,Y: screenshot with the pointer there (tooltips)
  bool click = false;              // --click: and click there once
  std::string keys;                // --keys: with --screenshot, keys pressed first (R L H E space 0-8 ?)
  bool exercise_resize = false;    // --exercise-resize: screenshot after shrinking to tiny sizes and back (tests)
  std::optional<float> scale;      // --scale F: UI scale (fonts, sizes); default: the monitor's content scale
  std::string tab;                 // --tab: requests | values | partitions | inspect | kv | shared | problem | trace
  bool help = false;
};

// Throws UsageError naming the bad argument and what is accepted.
Args parse_args(const std::vector<std::string>& argv);
std::string usage();

}  // namespace pa::viewer
