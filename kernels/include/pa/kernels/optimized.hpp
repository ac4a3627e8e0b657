// Stage 8, the optimized decode kernel: host API (plain C++, no CUDA headers).
//
// Pointers are device pointers in the layouts of pa/index/layout.hpp. The
// caller owns a workspace of plan.workspace_bytes, 16-byte aligned (as
// cudaMalloc's are), zeroed ONCE after allocation (cudaMemset): the kernel
// leaves its arrival counters at zero, so the same workspace serves any
// number of launches of plans that fit in it.
#pragma once
#include <cstddef>
#include <string>

#include "pa/index/dtype.hpp"
#include "pa/index/kv_layout.hpp"

namespace pa {

struct OptimizedArgs {
  void* out = nullptr;                 // [num_seqs, num_heads, head_size]
  const void* q = nullptr;             // [num_seqs, q_stride]
  // The cache in kv_layout (pa/index/kv_layout.hpp). vllm: k_cache
  // [num_blocks, num_kv_heads, head_size/x, block_size, x] and v_cache
  // [num_blocks, num_kv_heads, head_size, block_size]. nhd / hnd: k_cache is
  // the one K/V tensor ([num_blocks, 2, block_size, num_kv_heads, head_size] /
  // [num_blocks, 2, num_kv_heads, block_size, head_size]) and v_cache is null
  // or the same pointer; 2-byte caches only.
  KvLayout kv_layout = KvLayout::vllm;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  // The page table. Padded (kv_indptr null): block_tables [num_seqs,
  // max_blocks_per_seq] and context_lens [num_seqs], each >= 1. CSR
  // (kv_indptr set): block_tables is the indices array, kv_indptr [num_seqs
  // + 1] and kv_last_page_len [num_seqs] (pa/index/kv_layout.hpp,
  // CsrPageTable); context_lens is unused; a sequence with no pages gets a
  // zero output. max_blocks_per_seq is unused.
  const int* block_tables = nullptr;
  const int* context_lens = nullptr;
  const int* kv_indptr = nullptr;
  const int* kv_last_page_len = nullptr;
  const float* alibi_slopes = nullptr; // [num_heads] ALiBi slopes; null: no ALiBi
  DType dtype = DType::f16;            // Q and the output (and the cache unless kv_dtype says fp8)
  KvDType kv_dtype = KvDType::same;    // fp8: K and V one byte per element (x = 16), block size 16 or 32
  float k_scale = 1.0f, v_scale = 1.0f;  // fp8: element = float(code) * scale
  int head_size = 128;
  int block_size = 16;
  int num_seqs = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int q_stride = 0;                    // elements between sequences' Q rows
  int max_blocks_per_seq = 0;
  int num_blocks = 0;                  // physical blocks in the pool
  float scale = 0.f;                   // softmax scale (usually 1/sqrt(head_size))
  int max_context_len = 0;             // host copy, for the split planner
  // Host copy of context_lens [num_seqs] (CSR: each sequence's tokens),
  // optional: the split planner then replays each sequence's own length
  // (pa/index/optimized_split.hpp); null: every sequence planned at
  // max_context_len. Read by plan_optimized only.
  const int* host_context_lens = nullptr;
  // Cascade suffix (stage 7 runs its unique tokens through this kernel): only
  // tokens [first_token, context_len) of each sequence are attended
  // (first_token a multiple of block_size; a sequence may then have none), and
  // when state_out / state_lse are set (both or neither) the kernel writes the
  // attention STATE instead of `out` (which may then be null): state_out
  // [num_seqs, num_heads, head_size] fp32 normalized, state_lse [num_seqs,
  // num_heads] natural log; an empty range gives out 0 and lse -inf.
  int first_token = 0;
  float* state_out = nullptr;
  float* state_lse = nullptr;
};

// automatic: the pipeline depth that streams fastest (about 96 KB in flight
// per CTA, 2 CTAs per SM). lean: 64 KB, so a CTA fits on an SM beside a
// cascade prefix block (pa/index/optimized.hpp gives the numbers); built for
// head 128 with up to 8 query heads per KV head. plan_optimized takes the one
// asked for; where lean is not built the plan keeps the automatic depth
// (plan.pipeline says which runs).
enum class OptPipeline { automatic, lean };

struct OptimizedPlan {
  int head_tiles = 1;      // 8 query heads per tile (1: group <= 8, 2: <= 16)
  int head_chunks = 1;     // CTAs per kv head along the query heads (group > 16)
  int units = 0;           // num_kv_heads * head_chunks
  int splits = 1;          // CTAs along the context of a sequence
  int split_blocks = 0;    // logical blocks per split (a multiple of the step)
  int ctas_per_sm = 0;     // occupancy of the chosen kernel
  int sm_count = 0;
  double dram_gbps = 0;    // the device's DRAM peak the split model assumed (opt_dram_peak_gbps)
  int blocks_per_step = 0; // cache blocks one warp step reads (the split's granule)
  int smem_bytes = 0;
  int stages = 0;
  OptPipeline pipeline = OptPipeline::automatic;  // which instance runs
  std::size_t workspace_bytes = 0;  // 0 when splits == 1
  std::size_t counter_offset = 0;   // the arrival counters' byte offset in the workspace
  std::string describe() const;
};

// Chooses head tiling and the split: the split count whose grid, replayed on
// a model of the device (its SM count, DRAM peak and the kernel's occupancy;
// each sequence's own length when host_context_lens is set), takes the least
// time (opt_choose_split). force_splits > 0 overrides the planner (tests,
// experiments). Throws std::invalid_argument for unsupported
// configurations (the message lists what is supported) and std::runtime_error
// for CUDA errors.
OptimizedPlan plan_optimized(const OptimizedArgs& a, int force_splits = 0,
                             OptPipeline pipeline = OptPipeline::automatic);

// Launches on `stream` (a cudaStream_t, 0 = default). Checks the launch.
void launch_optimized(const OptimizedArgs& a, const OptimizedPlan& plan, void* workspace,
                      void* stream = nullptr);

// True when this build holds the kernel for (dtype, head size, block size,
// cache dtype, layout).
bool optimized_supported(DType dtype, int head_size, int block_size, KvDType kv = KvDType::same,
                         KvLayout layout = KvLayout::vllm);
std::string optimized_supported_list();

}  // namespace pa
