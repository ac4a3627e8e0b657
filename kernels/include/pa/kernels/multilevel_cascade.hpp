// Stage 7 over any number of levels of shared spans: the multi-level cascade
// on the GPU (host API, plain C++; the tables are pa/core/multilevel_cascade.hpp's,
// the CPU reference pa/reference/multilevel_cascade.hpp).
//
// How it runs (07_multilevel_cascade.cu has the launches):
//   - every level but the last is a shared level: each of its groups with
//     tokens is attended ONCE by all its member requests' query heads with the
//     cascade's tensor-core prefix kernel (the group's CSR row is its page
//     list), its chunks reduced into one state per (member, head). The
//     groups of a level run concurrently, on side streams. A level whose
//     members are not in request order first copies Q into its own order.
//   - the last level is each request's own tokens: stage 8 over a CSR page
//     table (one row per request: its group's pages), writing states.
//   - one fold merges every request's states in level order (the merge of
//     shard states, launch_merge_shards, with the levels as shards).
// A request whose group at a level is empty simply has no state there.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "pa/core/multilevel_cascade.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/stage_args.hpp"

namespace pa::kernels {

// The most levels one cascade takes: the fold's shards (kMaxShards).
inline constexpr int kMaxCascadeLevels = 8;

struct MultiLevelOptions {
  // The shared levels' kernel (cascade.hpp): automatic = wgmma where it runs,
  // else mma_8warps, as in the two-level cascade.
  PrefixKernel prefix = PrefixKernel::automatic;
  // Side streams for a shared level's groups (1: one after another, on the
  // caller's stream).
  int streams = 4;
};

// One shared group's prefix-kernel launch.
struct MultiLevelJob {
  int level = 0, group = 0;
  int row_begin = 0;   // its first member's row in the level's order
  int members = 0;     // requests reading it
  int tokens = 0;      // its span
  int page_begin = 0;  // its first page in the level's indices (indptr[group])
  int chunk_len = 0, num_chunks = 0;
  std::size_t part_out = 0, part_max = 0, part_sum = 0;  // its chunk partitions in the workspace
};

struct MultiLevelPlan {
  int num_levels = 0, num_requests = 0;
  PrefixKernel prefix_kernel = PrefixKernel::mma_8warps;  // the one that runs
  int streams = 1;
  std::vector<MultiLevelJob> jobs;   // shared levels' groups, level by level
  std::vector<bool> reordered;       // per level: Q copied into the level's order first
  OptimizedPlan last;                // stage 8 over the last level
  // Workspace (bytes from its base, 256-aligned): the level states
  // [level][request row][head][head_size] and lse, Q per reordered level,
  // stage 8's split workspace.
  std::size_t states_out = 0, states_lse = 0, last_ws = 0, workspace_bytes = 0;
  std::vector<std::size_t> q_reordered;  // per level (0 where not reordered)
  std::string describe() const;
};

// The cascade bound to one set of device inputs: validates, uploads the
// tables, plans and allocates its workspace once; launch() runs it. `base`
// holds the queries and the pool (q, k_cache, v_cache and their geometry
// qg, cg; dtype, head and block size, heads, KV heads, scale), with
// base.num_seqs = c.num_requests; its block tables and context lengths are
// not read. Accepted: fp16 or bf16, vLLM's layout, no fp8 cache, no ALiBi,
// page size = base.block_size, head and block sizes built for the prefix
// kernel and stage 8, 1..kMaxCascadeLevels levels. Anything else throws
// std::invalid_argument naming the value and what is accepted.
class MultiLevelCascadeRun {
 public:
  MultiLevelCascadeRun(const StageArgs& base, const MultiLevelCascade& c, const MultiLevelOptions& opt = {});
  ~MultiLevelCascadeRun();
  MultiLevelCascadeRun(MultiLevelCascadeRun&&) noexcept;
  MultiLevelCascadeRun& operator=(MultiLevelCascadeRun&&) noexcept;

  const MultiLevelPlan& plan() const;
  // out [requests, heads, head_size] in base.dtype; lse [requests, heads]
  // (natural log) when not null. Ordered on `stream` (a cudaStream_t).
  void launch(void* out, float* lse = nullptr, void* stream = nullptr);
  // Runs only the shared levels (prefix kernels and reduces), or only the
  // last level (stage 8): for timing the parts. No merge then.
  void launch_shared_levels(void* stream = nullptr);
  void launch_last_level(void* stream = nullptr);
  // After a launch: level l's state of request r, head h is at row
  // level_row(l, r) * num_heads + h of level l's part of the state buffers
  // (-1: the request's group there is empty).
  const float* states_out() const;
  const float* states_lse() const;
  int level_row(int level, int request) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The cascade over host problems, for pa-lab and the tests: `queries`'s Q
// (sequence r = request r; its own pool is not read) and `pool`'s K/V pages
// (its tables are not read) uploaded, one launch with the outputs poisoned
// (NaN), everything copied back. Throws what MultiLevelCascadeRun throws,
// and NoGpuError without a GPU.
struct MultiLevelResult {
  std::string plan;
  std::vector<float> out;  // [request][head][head_size], decoded
  std::vector<float> lse;  // [request][head], natural log
  // [level][request][head][head_size] and [level][request][head], in
  // request order; NaN where the request's group at that level is empty.
  std::vector<std::vector<float>> level_out, level_lse;
};
MultiLevelResult run_multilevel_cascade(const PagedProblem& queries, const PagedProblem& pool,
                                        const MultiLevelCascade& c, const MultiLevelOptions& opt = {});

// Median times (CUDA events, ms) of the whole cascade and of its parts on the
// same upload: the shared levels alone and the last level alone.
struct MultiLevelTiming {
  std::string plan;
  double all_ms = 0, shared_ms = 0, last_ms = 0;
};
MultiLevelTiming time_multilevel_cascade(const PagedProblem& queries, const PagedProblem& pool,
                                         const MultiLevelCascade& c, int iters, int warmup = 3,
                                         const MultiLevelOptions& opt = {});

}  // namespace pa::kernels
