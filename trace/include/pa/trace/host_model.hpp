// The host model: the events a stage's kernel records on the GPU, produced on
// the CPU from the same index headers (pa/index/*.hpp). A GPU test asserts the
// two are equal, event for event (as multisets per step and thread).
#pragma once
#include <vector>

#include "pa/reference/problem.hpp"
#include "pa/trace/event.hpp"

namespace pa::trace {

// Which thread blocks to trace: (sequence, head, partition) triples; an empty
// selection means "the first block" (seq 0, head 0, partition 0).
struct BlockId {
  int seq = 0, head = 0, partition = 0;
  friend bool operator==(const BlockId&, const BlockId&) = default;
};
struct Selection {
  std::vector<BlockId> blocks;
};

// Events of one stage's kernel on this problem, for the selected blocks, in
// replay order (block, epoch, warp, lane, seq_in_thread). Throws
// std::invalid_argument for an unsupported configuration.
std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel);

// Sort into replay order (used on recorded events too).
void sort_replay_order(std::vector<Event>& events);

// Whether model_events supports a stage in this build.
bool stage_is_modelled(Stage stage);

// The selection checked against the problem (seq, head in range; partition 0
// except for v2_partition, where it must be a partition of the sequence's
// context), with the default (first block) filled in, sorted and deduplicated.
// Throws std::invalid_argument naming the bad value and what is accepted.
std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel);

}  // namespace pa::trace
