// The timeline's index (timeline_model.hpp): blocks, the spans of each block
// by time, and the grid's rows with their lanes.
#include "core/timeline_model.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

namespace pa::viewer {
namespace {

constexpr int kPhases = static_cast<int>(trace::Phase::count_);

// A warp index from a file is below kTimelineMaxWarps (the reader checks it);
// clamped anyway so that an index built from unchecked data stays in bounds.
int warp_of(const trace::Span& s) { return std::min<int>(s.warp, trace::kTimelineMaxWarps - 1); }

// Sorts span indices by begin, then end, then index: one order for every row,
// so that equal inputs always draw the same picture.
void sort_by_time(std::vector<std::uint32_t>::iterator first, std::vector<std::uint32_t>::iterator last,
                  const std::vector<trace::Span>& spans) {
  std::sort(first, last, [&](std::uint32_t a, std::uint32_t b) {
    const trace::Span& x = spans[a];
    const trace::Span& y = spans[b];
    if (x.t_begin_ns != y.t_begin_ns) return x.t_begin_ns < y.t_begin_ns;
    if (x.t_end_ns != y.t_end_ns) return x.t_end_ns < y.t_end_ns;
    return a < b;
  });
}

// A row's times and phases beside its span indices, and its longest span.
void fill_times(TimelineRow& row, const std::vector<trace::Span>& spans, std::uint64_t origin) {
  row.begin.resize(row.spans.size());
  row.end.resize(row.spans.size());
  row.phase.resize(row.spans.size());
  for (std::size_t k = 0; k < row.spans.size(); ++k) {
    const trace::Span& s = spans[row.spans[k]];
    row.begin[k] = s.t_begin_ns - origin;
    row.end[k] = s.t_end_ns - origin;
    row.phase[k] = s.phase;
    row.max_duration_ns = std::max(row.max_duration_ns, s.t_end_ns - s.t_begin_ns);
  }
}

}  // namespace

std::string block_label(const TimelineBlock& b) {
  const std::string n = std::to_string(b.index);
  return b.kernel == trace::KernelRole::main ? "block " + n : std::string(trace::to_string(b.kernel)) + " " + n;
}

const char* to_string(TimelineLevel level) {
  switch (level) {
    case TimelineLevel::grid: return "grid";
    case TimelineLevel::sm: return "sm";
    case TimelineLevel::block: return "block";
  }
  return "?";
}

TimelineModel::TimelineModel(trace::TimelineData data, std::string path)
    : data_(std::move(data)), path_(std::move(path)), phase_spans_(kPhases, 0), phase_time_(kPhases, 0) {
  const auto& spans = data_.spans;
  num_sms_ = static_cast<int>(data_.header.sm_count);
  if (!spans.empty()) {
    origin_ = spans.front().t_begin_ns;
    std::uint64_t last = 0;
    for (const trace::Span& s : spans) {
      origin_ = std::min(origin_, s.t_begin_ns);
      last = std::max(last, s.t_end_ns);
      num_sms_ = std::max(num_sms_, s.sm + 1);
      const int p = std::min(static_cast<int>(s.phase), kPhases - 1);
      phases_present_ |= 1u << p;
      ++phase_spans_[p];
      phase_time_[p] += s.t_end_ns - s.t_begin_ns;
    }
    duration_ = last - origin_;
  }
  sm_blocks_.resize(static_cast<std::size_t>(num_sms_));
  index_blocks();
  build_grid_rows();
}

void TimelineModel::index_blocks() {
  const auto& spans = data_.spans;
  const std::size_t n = spans.size();
  auto key = [&](std::uint32_t i) {
    return (static_cast<std::uint64_t>(spans[i].kernel) << 32) | spans[i].block;
  };
  // Spans grouped by block (kernel, index), each group by time.
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const std::uint64_t ka = key(a), kb = key(b);
    if (ka != kb) return ka < kb;
    const trace::Span& x = spans[a];
    const trace::Span& y = spans[b];
    if (x.t_begin_ns != y.t_begin_ns) return x.t_begin_ns < y.t_begin_ns;
    if (x.t_end_ns != y.t_end_ns) return x.t_end_ns < y.t_end_ns;
    return a < b;
  });
  std::vector<TimelineBlock> by_key;
  std::vector<std::uint32_t> run_first;  // where each block's run starts in `order`
  for (std::size_t i = 0; i < n; ++i) {
    const trace::Span& s = spans[order[i]];
    if (i == 0 || key(order[i]) != key(order[i - 1])) {
      TimelineBlock b;
      b.kernel = s.kernel;
      b.index = s.block;
      b.sm = s.sm;  // the earliest span comes first in its run
      b.begin_ns = s.t_begin_ns - origin_;
      by_key.push_back(b);
      run_first.push_back(static_cast<std::uint32_t>(i));
    }
    TimelineBlock& b = by_key.back();
    b.warps = std::max(b.warps, warp_of(s) + 1);
    b.end_ns = std::max(b.end_ns, s.t_end_ns - origin_);
    ++b.spans;
  }
  run_first.push_back(static_cast<std::uint32_t>(n));

  // Blocks in the order they began: the SM level lists them so.
  std::vector<std::uint32_t> perm(by_key.size());
  std::iota(perm.begin(), perm.end(), 0u);
  std::sort(perm.begin(), perm.end(), [&](std::uint32_t a, std::uint32_t b) {
    const TimelineBlock& x = by_key[a];
    const TimelineBlock& y = by_key[b];
    if (x.begin_ns != y.begin_ns) return x.begin_ns < y.begin_ns;
    if (x.kernel != y.kernel) return x.kernel < y.kernel;
    return x.index < y.index;
  });
  blocks_.reserve(by_key.size());
  block_first_.reserve(by_key.size() + 1);
  block_spans_.reserve(n);
  span_block_.assign(n, 0);
  for (std::uint32_t old : perm) {
    const auto b = static_cast<std::uint32_t>(blocks_.size());
    blocks_.push_back(by_key[old]);
    block_first_.push_back(static_cast<std::uint32_t>(block_spans_.size()));
    for (std::uint32_t i = run_first[old]; i < run_first[old + 1]; ++i) {
      block_spans_.push_back(order[i]);
      span_block_[order[i]] = b;
    }
    sm_blocks_[static_cast<std::size_t>(blocks_.back().sm)].push_back(static_cast<int>(b));
  }
  block_first_.push_back(static_cast<std::uint32_t>(block_spans_.size()));
}

// One row per SM. Its lanes come from interval partitioning of its warps
// (a warp: one block's warp, from its first begin to its last end): each
// warp takes the lowest lane free when it begins, so the lanes are as many
// as the most warps resident at once, and a block that starts after another
// ended reuses its lanes.
void TimelineModel::build_grid_rows() {
  const auto& spans = data_.spans;
  // Spans by SM (a counting sort), then by time within each SM.
  std::vector<std::uint32_t> first(static_cast<std::size_t>(num_sms_) + 1, 0);
  for (const trace::Span& s : spans) ++first[s.sm + 1u];
  std::partial_sum(first.begin(), first.end(), first.begin());
  std::vector<std::uint32_t> by_sm(spans.size());
  {
    std::vector<std::uint32_t> fill(first.begin(), first.end() - 1);
    for (std::uint32_t i = 0; i < spans.size(); ++i) by_sm[fill[spans[i].sm]++] = i;
  }
  // Each block's warps are tracks track_base[b] .. + warps.
  std::vector<std::uint32_t> track_base(blocks_.size() + 1, 0);
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    track_base[b + 1] = track_base[b] + static_cast<std::uint32_t>(std::max(1, blocks_[b].warps));
  auto track_of = [&](std::uint32_t i) { return track_base[span_block_[i]] + static_cast<std::uint32_t>(warp_of(spans[i])); };
  std::vector<std::uint64_t> track_end(track_base.back(), 0);
  std::vector<int> track_lane(track_base.back(), -1);

  auto rows = std::make_shared<std::vector<TimelineRow>>(static_cast<std::size_t>(num_sms_));
  for (int sm = 0; sm < num_sms_; ++sm) {
    TimelineRow& row = (*rows)[static_cast<std::size_t>(sm)];
    row.label = "SM " + std::to_string(sm);
    row.target = sm;
    row.spans.assign(by_sm.begin() + first[sm], by_sm.begin() + first[sm + 1]);
    sort_by_time(row.spans.begin(), row.spans.end(), spans);
    fill_times(row, spans, origin_);
    for (std::uint32_t i : row.spans) track_end[track_of(i)] = std::max(track_end[track_of(i)], spans[i].t_end_ns);
    // Lanes: busy ones by the time their warp ends, free ones lowest first.
    using Busy = std::pair<std::uint64_t, int>;
    std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
    std::priority_queue<int, std::vector<int>, std::greater<>> free_lanes;
    int lanes = 0;
    row.lane.resize(row.spans.size());
    for (std::size_t k = 0; k < row.spans.size(); ++k) {
      const std::uint32_t i = row.spans[k];
      const std::uint32_t t = track_of(i);
      if (track_lane[t] < 0) {  // the warp's first span on this SM: it begins now
        while (!busy.empty() && busy.top().first <= spans[i].t_begin_ns) {
          free_lanes.push(busy.top().second);
          busy.pop();
        }
        int lane = lanes;
        if (!free_lanes.empty()) {
          lane = free_lanes.top();
          free_lanes.pop();
        } else {
          ++lanes;
        }
        track_lane[t] = lane;
        busy.push({track_end[t], lane});
      }
      row.lane[k] = static_cast<std::uint16_t>(std::min(track_lane[t], 65535));
    }
    row.lanes = std::max(1, std::min(lanes, 65536));
    // A block's spans all on one SM is what a GPU does; a file may still
    // claim otherwise, so each SM partitions its own share of a warp.
    for (std::uint32_t i : row.spans) {
      track_lane[track_of(i)] = -1;
      track_end[track_of(i)] = 0;
    }
  }
  grid_rows_ = std::move(rows);
}

int TimelineModel::find_block(trace::KernelRole kernel, std::uint32_t index) const {
  for (std::size_t b = 0; b < blocks_.size(); ++b)
    if (blocks_[b].kernel == kernel && blocks_[b].index == index) return static_cast<int>(b);
  return -1;
}

const std::vector<int>& TimelineModel::blocks_on_sm(int sm) const {
  static const std::vector<int> none;
  return sm >= 0 && sm < num_sms_ ? sm_blocks_[static_cast<std::size_t>(sm)] : none;
}

TimelineRows TimelineModel::rows(TimelineLevel level, int target) const {
  if (level == TimelineLevel::grid) return grid_rows_;
  auto rows = std::make_shared<std::vector<TimelineRow>>();
  const auto& spans = data_.spans;
  if (level == TimelineLevel::sm) {
    // One row per block of the SM, one lane per warp.
    for (int b : blocks_on_sm(target)) {
      TimelineRow row;
      row.label = block_label(blocks_[static_cast<std::size_t>(b)]);
      row.target = b;
      row.lanes = std::max(1, blocks_[static_cast<std::size_t>(b)].warps);
      for (std::uint32_t k = block_first_[static_cast<std::size_t>(b)]; k < block_first_[b + 1u]; ++k) {
        const std::uint32_t i = block_spans_[k];
        row.spans.push_back(i);
        row.lane.push_back(static_cast<std::uint16_t>(warp_of(spans[i])));
      }
      fill_times(row, spans, origin_);
      rows->push_back(std::move(row));
    }
  } else if (target >= 0 && target < static_cast<int>(blocks_.size())) {
    // One row per warp of the block.
    const TimelineBlock& blk = blocks_[static_cast<std::size_t>(target)];
    rows->resize(static_cast<std::size_t>(std::max(1, blk.warps)));
    for (std::size_t w = 0; w < rows->size(); ++w) {
      (*rows)[w].label = "warp " + std::to_string(w);
      (*rows)[w].target = static_cast<int>(w);
    }
    for (std::uint32_t k = block_first_[static_cast<std::size_t>(target)]; k < block_first_[target + 1u]; ++k) {
      const std::uint32_t i = block_spans_[k];
      TimelineRow& row = (*rows)[static_cast<std::size_t>(warp_of(spans[i]))];
      row.spans.push_back(i);
      row.lane.push_back(0);
    }
    for (TimelineRow& row : *rows) fill_times(row, spans, origin_);
  }
  return rows;
}

}  // namespace pa::viewer
