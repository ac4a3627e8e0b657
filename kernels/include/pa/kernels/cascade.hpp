// Host API of stage 7 (attention-state merge, cascade decoding). Plain C++
// (no CUDA headers): pointers are device pointers in the layouts of
// pa/index/layout.hpp and pa/index/cascade.hpp; `stream` is a cudaStream_t
// (nullptr = default stream). Every launch is checked; errors are
// std::invalid_argument (bad configuration, naming it and what is accepted)
// or std::runtime_error (CUDA).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "pa/kernels/cascade_args.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/kernels/v2_partition.hpp"

namespace pa::kernels {

// Stage 7 merge: out[row] = merge(a[row], b[row]) for num_seqs * num_heads rows.
void launch_merge_states(const MergeArgs& m, void* stream = nullptr);

// Cascade: every sequence of `base` shares its first prefix_len tokens (the
// same physical blocks: sequence 0's table row is used for the prefix).
//
// How the cascade runs. Every default is the planner's own choice (the
// fastest measured on an H100: kernels/NOTES.md, "cascade changes"); tests and
// pa-bench set the others to check and compare them.
struct CascadeOptions {
  // The prefix kernel (PrefixKernel in pa/index/cascade.hpp). automatic: wgmma
  // where this build and the device run it (sm_90a, head 128), else
  // mma_8warps; wgmma asked for where it cannot run falls back the same way.
  PrefixKernel prefix = PrefixKernel::automatic;
  // -1 automatic; 0 every launch on the caller's stream; 1 the suffix on a
  // side stream; 2 also the prefix on a high-priority stream, launched first.
  int streams = -1;
  int chunks = 0;  // 0 automatic; N > 0: the prefix cut into N chunks (whole tiles)
  // The suffix kernel: automatic = stage 8 with its lean pipeline where stage 8
  // is built for the configuration (fp16/bf16), else V2.
  enum class Suffix { automatic, v2, optimized, optimized_lean };
  Suffix suffix = Suffix::automatic;
};

struct CascadePlan {
  int prefix_len = 0;
  int chunk_len = 0;       // prefix tokens per thread block of the prefix kernel
  int num_chunks = 0;
  int query_tiles = 0;     // query tiles (64 or 128 rows: prefix_rows_per_block) per KV head
  bool tensor_cores = false;  // fp16/bf16: the mma prefix kernel; fp32: stage 6 per sequence
  PrefixKernel prefix_kernel = PrefixKernel::mma_8warps;  // the one that runs (never automatic)
  int streams = 1;            // 0: all on the caller's stream; 1: suffix on a side stream;
                              // 2: prefix on a high-priority stream launched first, suffix on a low-priority one
  int prefix_partitions = 0;  // partitions of the prefix state (chunks, or fp32's V2 partitions)
  // Which kernel computes the suffix state: V2 (stage 6), or stage 8 over the
  // tokens past the prefix (OptimizedArgs::first_token, state output), whose
  // plan says its pipeline (suffix_opt.pipeline lean: a CTA fits beside a
  // wgmma prefix block, so the memory-bound suffix streams while the prefix computes).
  enum class Suffix { v2, optimized };
  Suffix suffix = Suffix::v2;
  OptimizedPlan suffix_opt;   // suffix == optimized: stage 8's plan for the suffix
  int suffix_partitions = 0;  // grid z of the suffix V2 launch
  int partition_size = 0;
  // Workspace layout (bytes from the workspace base, 256-aligned).
  std::size_t prefix_part_out = 0, prefix_part_max = 0, prefix_part_sum = 0;
  std::size_t suffix_part_out = 0, suffix_part_max = 0, suffix_part_sum = 0;
  std::size_t prefix_state_out = 0, prefix_state_lse = 0, suffix_state_out = 0, suffix_state_lse = 0;
  std::size_t suffix_opt_ws = 0;  // stage 8's split workspace (suffix_opt.workspace_bytes)
  std::size_t workspace_bytes = 0;
  std::string describe() const;
};

// chunk_len 0 = the rule in cascade_chunk_len() (pa/index/cascade.hpp) for
// this GPU (or opt.chunks); prefix_len must be a multiple of the block size
// and <= every context length. Bad options throw std::invalid_argument naming
// the value and what is accepted.
CascadePlan plan_cascade(const StageArgs& base, int prefix_len, int chunk_len = 0, const CascadeOptions& opt = {});
// The prefix kernel's name ("mma_4warps", "mma_8warps", "wgmma", "automatic"),
// and the inverse (nullopt for an unknown name).
const char* prefix_kernel_name(PrefixKernel k);
std::optional<PrefixKernel> prefix_kernel_from_name(std::string_view name);

// Runs prefix kernel + chunk reduce, the suffix (V2 or stage 8, plan.suffix), merge. Writes base.out (dtype)
// and, when lse_out is not null, the merged lse [seq, head] (natural log).
// When prefix_state / suffix_state are not null they receive copies of the
// two states' device pointers inside the workspace (for tests).
struct CascadeStates {
  const float* prefix_out = nullptr;
  const float* prefix_lse = nullptr;
  const float* suffix_out = nullptr;
  const float* suffix_lse = nullptr;
};
// The prefix and suffix states are independent: the suffix runs on a
// second (internal, non-blocking) stream (plan.streams), concurrently with the compute-heavy
// prefix kernel, joined by an event before the merge; the whole call is
// ordered on `stream` as usual. `parts` runs only one side (for timing the
// split; no merge then).
enum class CascadeParts { all, prefix_only, suffix_only };
CascadeStates launch_cascade(const StageArgs& base, const CascadePlan& plan, void* workspace, float* lse_out,
                             void* stream = nullptr, CascadeParts parts = CascadeParts::all);

}  // namespace pa::kernels
