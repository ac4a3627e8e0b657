// The host model: the events a stage's kernel records on the GPU, produced on
// the CPU from the same index headers (pa/index/*.hpp). A GPU test asserts the
// two are equal, event for event (as multisets per step and thread).
#pragma once
#include <string>
#include <vector>

#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"
#include "pa/index/optimized_split.hpp"

namespace pa::trace {

// Which thread blocks to trace: (sequence, head, partition) triples; an empty
// selection means "the first block" (seq 0, head 0, partition 0). Stage 8:
// head = any query head of the CTA's unit, partition = the split (see
// optimized_model_plan).
struct BlockId {
  int seq = 0, head = 0, partition = 0;
  friend bool operator==(const BlockId&, const BlockId&) = default;
};
struct Selection {
  std::vector<BlockId> blocks;
};

// Stage 8 (optimized) only. Its grid depends on the device (the split
// heuristic reads the SM count and the kernel's occupancy), and which CTA of a
// (sequence, unit) merges the splits depends on the order they arrive in.
// Defaults: an H100/H200 (132 SMs, occupancy from shared memory) and "the
// last active split arrives last". A recording (record.hpp) reports the
// values it ran with, so the model reproduces it exactly.
struct OptimizedModelOptions {
  // The device the plan is for (defaults: an H100 SXM, pa/index/optimized.hpp);
  // a recording sets the GPU's own.
  int sm_count = kOptModelSmCount;
  double dram_gbps = kOptModelDramGbps;  // DRAM peak (opt_dram_peak_gbps)
  int ctas_per_sm = 0;   // 0: opt_ctas_per_sm_by_smem (pa/index/optimized.hpp)
  int force_splits = 0;  // as plan_optimized's force_splits
  struct LastArrival {
    int seq, unit, split;  // split -1: a CTA outside the selection arrived last
  };
  std::vector<LastArrival> last_arrivals;  // (seq, unit) not listed: the last active split
};
struct ModelOptions {
  OptimizedModelOptions optimized;
};

// Why the host model cannot trace this stage over the problem's KV cache:
// its fp8 dtype (stage 7 refuses fp8, as its kernels do; stage 8 has no fp8
// configuration for some block sizes), its layout (stages 1-7 read vLLM's
// only) or its page table (CSR tables have no trace events yet); empty when
// it can. The message names the stage, what the problem asks for and what is
// accepted. model_events throws it, and so does a recording; a front end can
// ask first (the viewer's Problem tab).
std::string kv_cache_refusal(const ProblemSpec& spec, Stage stage);

// Events of one stage's kernel on this problem, for the selected blocks, in
// replay order (block, epoch, warp, lane, seq_in_thread). Throws
// std::invalid_argument for an unsupported configuration.
std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel);
std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel, const ModelOptions& opt);

// Stage 8's grid as the launcher plans it (plan_optimized's split heuristic,
// opt_choose_split) for the device in `opt`. A stage 8 thread block (CTA) is
// named by BlockId{seq, head, partition}: head = any query head of its unit
// (normalized to the unit's first head), partition = its split.
struct OptimizedModelPlan {
  int group = 1, head_tiles = 1, head_chunks = 1, units = 0;
  int splits = 1, split_blocks = 0, ctas_per_sm = 0, sm_count = 0, smem_bytes = 0, stages = 0;
};
OptimizedModelPlan optimized_model_plan(const ProblemSpec& spec, const OptimizedModelOptions& opt = {});

// Sort into replay order (used on recorded events too).
void sort_replay_order(std::vector<Event>& events);

// Whether model_events supports a stage in this build (cascade_merge: in
// part, see model_coverage_note).
bool stage_is_modelled(Stage stage);

// What a stage's trace on this problem leaves out because those kernels have
// no trace hooks yet; empty when the trace covers every kernel of the stage.
std::string model_coverage_note(const ProblemSpec& spec, Stage stage);

// The thread blocks a selection's trace holds, by label (seq, head,
// Event::partition; labels: pa/index/events.hpp). Stage 6: each selected
// partition block and the reduce block (kReduceBlock) of its (seq, head).
// Stage 7 (the cascade; partition = a suffix partition): with a shared prefix,
// the prefix partition of that index (fp32: kPrefixBlockBase + p, if the
// prefix has it), the prefix reduce (kPrefixReduceBlock), the suffix partition
// block, the suffix reduce (kReduceBlock) and the merge threads of the row
// (kMergeBlock); without one, the plain V2 launch's blocks as in stage 6.
// Other stages: the selection itself. `resolved` comes from resolve_selection.
std::vector<BlockId> traced_blocks(const ProblemSpec& spec, Stage stage, const std::vector<BlockId>& resolved);

// How traces run the cascade (stage 7): launch_cascade's plan with a fixed
// prefix chunk length (the automatic one depends on the GPU's SM count, so
// the model and every GPU would disagree), used by the host model and by
// record_stage alike.
struct CascadeTracePlan {
  int prefix_len = 0;
  bool tensor_cores = false;  // fp16/bf16: cascade_prefix_kernel's chunks; fp32: V2 partitions
  int chunk_len = 0;          // tensor_cores: kCascadeTraceChunkLen
  int prefix_partitions = 0;  // chunks (tensor cores) or V2 partitions of the prefix
  int suffix_partitions = 1;  // grid z of the suffix V2 launch
};
inline constexpr int kCascadeTraceChunkLen = 64;  // a multiple of every block size
CascadeTracePlan cascade_trace_plan(const ProblemSpec& spec);

// The selection checked against the problem (seq, head in range; partition 0
// except for v2_partition, where it must be a partition of the sequence's
// context, and cascade_merge, where it must be a partition of the suffix
// (0 always exists)), with the default (first block) filled in, sorted and
// deduplicated.
// Throws std::invalid_argument naming the bad value and what is accepted.
std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel);
std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel,
                                       const ModelOptions& opt);

}  // namespace pa::trace
