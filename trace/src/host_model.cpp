// The host model's entry point: validates the problem and the selection,
// builds the paged problem (block tables, values) and enumerates each selected
// thread block's events with the stage's model.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "host_model_detail.hpp"

namespace pa::trace {

void sort_replay_order(std::vector<Event>& events) {
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.seq, a.head, a.partition, a.epoch, a.warp, a.lane, a.seq_in_thread) <
           std::tie(b.seq, b.head, b.partition, b.epoch, b.warp, b.lane, b.seq_in_thread);
  });
}

bool stage_is_modelled(Stage stage) {
  switch (stage) {
    case Stage::q_to_smem:
    case Stage::qk:
    case Stage::softmax:
    case Stage::lv:
    case Stage::warp_reduce:
    case Stage::v2_partition:
      return true;
    default:
      return false;
  }
}

std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel) {
  std::vector<BlockId> blocks = sel.blocks;
  if (blocks.empty()) blocks.push_back(BlockId{});
  const bool partitioned = stage == Stage::v2_partition;
  for (const BlockId& b : blocks) {
    auto bad = [&](const std::string& what) {
      throw std::invalid_argument("trace selection (seq " + std::to_string(b.seq) + ", head " +
                                  std::to_string(b.head) + ", partition " + std::to_string(b.partition) +
                                  "): " + what);
    };
    if (b.seq < 0 || b.seq >= spec.num_seqs()) {
      bad("seq out of range (accepted: 0 .. " + std::to_string(spec.num_seqs() - 1) + ")");
    }
    if (b.head < 0 || b.head >= spec.num_heads) {
      bad("head out of range (accepted: 0 .. " + std::to_string(spec.num_heads - 1) + ")");
    }
    const int parts = partitioned ? num_partitions(spec.context_lens[b.seq], spec.partition_size) : 1;
    if (b.partition < 0 || b.partition >= parts) {
      bad(partitioned ? "partition out of range (accepted: 0 .. " + std::to_string(parts - 1) +
                            " for this sequence's context)"
                      : "partition must be 0 for stage " + std::string(to_string(stage)) + " (one partition)");
    }
  }
  std::sort(blocks.begin(), blocks.end(), [](const BlockId& a, const BlockId& b) {
    return std::tie(a.seq, a.head, a.partition) < std::tie(b.seq, b.head, b.partition);
  });
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  return blocks;
}

std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel) {
  if (!is_valid(stage)) {
    throw std::invalid_argument("model_events: stage value " + std::to_string(static_cast<int>(stage)) +
                                " is not a stage (accepted: 1 .. 8)");
  }
  if (!stage_is_modelled(stage)) {
    throw std::invalid_argument(std::string("model_events: stage ") + to_string(stage) +
                                " has no host model (modelled: q_to_smem, qk, softmax, lv, warp_reduce, v2_partition; the "
                                "cascade_merge and optimized kernels have no trace hooks)");
  }
  spec.validate();
  const std::vector<BlockId> blocks = resolve_selection(spec, stage, sel);
  const PagedProblem p = make_problem(spec);
  detail::ModelValues vals(p);
  std::vector<Event> out;
  for (const BlockId& b : blocks) detail::model_v1_block(p, stage, b, vals, out);
  sort_replay_order(out);
  return out;
}

}  // namespace pa::trace
