// The timeline the viewer shows: a timeline file's header and spans
// (pa/trace/timeline_file.hpp: when each warp ran each step function,
// measured on a GPU), indexed once at load for the three groupings the
// Timeline panel draws: the SMs of the grid, the thread blocks of one SM, the
// warps of one block. Loaded data only: the view over it (time range, zoom,
// culling, pixel merging, hit testing) is core/timeline_view.hpp, and no
// window is involved, so all of it is unit-tested.
//
// Time 0 of the panel is the first span's %globaltimer: one clock for the
// whole GPU, so spans of different SMs and kernels line up on it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pa/core/timeline.hpp"
#include "pa/trace/timeline_file.hpp"

namespace pa::viewer {

// A thread block of the timeline. A stage may launch several kernels (the
// partition kernel and the reduce, the cascade's four), each numbering its
// blocks from 0: a block is its kernel's role and its index.
struct TimelineBlock {
  trace::KernelRole kernel = trace::KernelRole::main;
  std::uint32_t index = 0;  // linear block index in its kernel's grid
  int sm = 0;               // the SM of its earliest span (a block never leaves its SM)
  int warps = 0;            // the largest warp index with a span, plus one
  std::uint64_t begin_ns = 0, end_ns = 0;  // its first begin and last end, from time 0
  std::uint32_t spans = 0;
};
// "block 37" for the main kernel, "reduce 3", "merge 0", ... for the others.
std::string block_label(const TimelineBlock& b);

// One row of the panel: the spans it draws, by begin time, each on a lane
// (a sub-row). A warp's row has one lane; a block's row one lane per warp;
// an SM's row one lane per warp that can be resident at once (warps that run
// one after the other share a lane), so spans on one lane never overlap.
struct TimelineRow {
  std::string label;
  int target = -1;  // what the row stands for: an SM, a block (index into blocks()) or a warp
  int lanes = 1;
  std::vector<std::uint32_t> spans;  // indices into spans(), by begin (ties: end, then index)
  std::vector<std::uint16_t> lane;   // the lane of spans[i]
  // spans[i]'s begin and end (from time 0) and phase, side by side: a frame
  // reads them in order, instead of 48-byte spans scattered over the file.
  std::vector<std::uint64_t> begin, end;
  std::vector<trace::Phase> phase;
  // The longest span of the row: a span that begins this long before the
  // visible range may still reach into it (the culling's binary search
  // starts there).
  std::uint64_t max_duration_ns = 0;
};
using TimelineRows = std::shared_ptr<const std::vector<TimelineRow>>;

// What the panel groups rows by, from the whole GPU down to one block.
enum class TimelineLevel : std::uint8_t { grid, sm, block };
const char* to_string(TimelineLevel level);

class TimelineModel {
 public:
  // Indexes the spans (any order): O(n log n). path is only remembered.
  explicit TimelineModel(trace::TimelineData data, std::string path = {});

  const trace::TimelineHeader& header() const { return data_.header; }
  const std::vector<trace::Span>& spans() const { return data_.spans; }
  const std::string& path() const { return path_; }

  // The first span's t_begin_ns (time 0), and the last end from there.
  std::uint64_t origin_ns() const { return origin_; }
  std::uint64_t duration_ns() const { return duration_; }
  std::uint64_t begin_of(std::uint32_t span) const { return data_.spans[span].t_begin_ns - origin_; }
  std::uint64_t end_of(std::uint32_t span) const { return data_.spans[span].t_end_ns - origin_; }

  // Rows of the grid: every SM of the GPU (the header's sm_count, or more if
  // a span names a higher one), idle ones included: how much of the GPU a
  // launch leaves idle is part of what the panel shows.
  int num_sms() const { return num_sms_; }
  const std::vector<TimelineBlock>& blocks() const { return blocks_; }  // by begin, kernel, index
  int block_of_span(std::uint32_t span) const { return static_cast<int>(span_block_[span]); }
  int find_block(trace::KernelRole kernel, std::uint32_t index) const;  // -1 if the timeline has none
  // The blocks that ran on an SM, by begin.
  const std::vector<int>& blocks_on_sm(int sm) const;

  // The rows of a level: the grid's SMs (target ignored), the blocks of SM
  // `target`, the warps of block `target`. The grid's are built at load and
  // shared; the others are built on each call (O(spans of the SM or block)),
  // for the caller to keep.
  TimelineRows rows(TimelineLevel level, int target) const;

  // Per phase: bit p of phases_present() is set if a span has Phase p.
  std::uint32_t phases_present() const { return phases_present_; }
  std::uint64_t phase_spans(trace::Phase p) const { return phase_spans_[static_cast<int>(p)]; }
  std::uint64_t phase_time_ns(trace::Phase p) const { return phase_time_[static_cast<int>(p)]; }

 private:
  void index_blocks();
  void build_grid_rows();

  trace::TimelineData data_;
  std::string path_;
  std::uint64_t origin_ = 0, duration_ = 0;
  int num_sms_ = 0;
  std::vector<TimelineBlock> blocks_;
  std::vector<std::uint32_t> span_block_;   // block index of each span
  std::vector<std::uint32_t> block_first_;  // CSR: the spans of block b are block_spans_[block_first_[b] ..
  std::vector<std::uint32_t> block_spans_;  //      block_first_[b + 1]), by begin
  std::vector<std::vector<int>> sm_blocks_;
  TimelineRows grid_rows_;
  std::uint32_t phases_present_ = 0;
  std::vector<std::uint64_t> phase_spans_, phase_time_;
};

}  // namespace pa::viewer
