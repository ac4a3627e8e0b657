// The replay of a loaded trace: its thread blocks, each block's replay steps
// (pa/trace/replay.hpp groups and orders them: one step = one instruction run
// by the block's threads, in an order the kernel can run), and the replay
// position.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pa/index/events.hpp"
#include "pa/core/event.hpp"
#include "pa/trace/replay.hpp"

namespace pa::viewer { class LoadControl; }

namespace pa::viewer {

using Granularity = trace::Granularity;
using ReplayStep = trace::ReplayStep;

struct BlockKey {
  int seq = 0, head = 0, partition = 0;
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
};

// Thread-block labels in Event::partition (pa/index/events.hpp, trace/FORMAT.md):
// >= 0 a V2 partition (stage 8: a split); -1 the V2 reduce kernel (in a
// cascade: the suffix's reduce), -2 the prefix's reduce, -3 the merge
// kernel, kPrefixBase + c the cascade prefix kernel's chunk c.
struct BlockLabel {
  static constexpr int kReduce = kReduceBlock, kPrefixReduce = kPrefixReduceBlock, kMerge = kMergeBlock;
  static constexpr int kPrefixBase = kPrefixBlockBase;
  static bool is_prefix(int p) { return is_prefix_block(p); }
};
// "seq 0 head 3 partition 2", "seq 0 head 3 reduce", "... merge", "... prefix chunk 1".
std::string describe_block(const BlockKey& k, trace::Stage stage);

class TraceIndex {
 public:
  TraceIndex() = default;
  // O(n log n) once per load; every later query is O(step size) or O(1).
  // With ctl: progress reported through ctl->report (0..1) and cancellation
  // checked every 64 Ki events (throws LoadCancelled). A block whose threads'
  // program orders cannot be merged throws trace::ReplayOrderError.
  TraceIndex(const std::vector<trace::Event>& events, Granularity g, LoadControl* ctl = nullptr);

  Granularity granularity() const { return gran_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  const BlockKey& block(int b) const { return blocks_.at(b); }
  int find_block(const BlockKey& k) const;  // -1 if absent
  const std::vector<ReplayStep>& steps(int b) const { return steps_.at(b); }
  int num_steps(int b) const { return b >= 0 && b < num_blocks() ? static_cast<int>(steps_[b].size()) : 0; }
  // Event indices (into the vector given to the constructor) of one step.
  std::span<const std::uint32_t> events_of(int b, int step) const;
  // The replay step (within its block) and block of an event.
  int step_of_event(std::uint32_t e) const { return step_of_event_[e]; }
  int block_of_event(std::uint32_t e) const { return block_of_event_[e]; }
  // First step >= from of block b whose Step is s; -1 if none.
  int find_step(int b, trace::Step s, int from = 0) const;
  std::size_t num_events() const { return step_of_event_.size(); }

 private:
  Granularity gran_ = Granularity::instruction;
  std::vector<BlockKey> blocks_;
  std::vector<std::vector<ReplayStep>> steps_;
  std::vector<std::uint32_t> order_;  // event indices grouped by (block, step)
  std::vector<std::int32_t> step_of_event_;
  std::vector<std::int32_t> block_of_event_;
};

// Where a lesson marker's step is (lesson panel): the first step whose Step
// is s in block `prefer` (the block shown) if it has one, else in the first
// other block, in index order, that has one. Stages 6 and 7 trace several
// kernels (partition blocks, reduce, prefix reduce, merge): a step such as
// partition_reduce or merge is only in the reduce or merge block.
// {-1, -1} when no block of the trace has that step.
struct StepLocation {
  int block = -1, step = -1;
  bool found() const { return step >= 0; }
};
// With a role (a lesson marker's block=...), only blocks of that kind count:
// stage 6's partition and reduce blocks both have max_reduce steps, say.
StepLocation locate_step(const TraceIndex& index, int prefer, trace::Step s,
                         std::optional<BlockRole> role = std::nullopt);

// Step forward/back, jump, play/pause at a speed (steps per second), scrub.
class ReplayState {
 public:
  void set_count(int n);  // keeps the current step, clamped
  int count() const { return count_; }
  int current() const { return current_; }
  bool playing() const { return playing_; }
  float speed() const { return speed_; }
  void set_speed(float steps_per_second);
  void jump(int step);  // clamped; stops nothing
  void next() { jump(current_ + 1); }
  void prev() { jump(current_ - 1); }
  void home() { jump(0); }
  void end() { jump(count_ - 1); }
  void play();
  void pause() { playing_ = false; }
  void toggle_play() { playing_ ? pause() : play(); }
  // Advance by elapsed seconds while playing; returns true if the step changed.
  // Playing stops at the last step.
  bool tick(double seconds);

 private:
  int count_ = 0, current_ = 0;
  bool playing_ = false;
  float speed_ = 4.0f;
  double acc_ = 0.0;
};

}  // namespace pa::viewer
