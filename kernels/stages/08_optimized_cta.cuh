// Stage 8, optimized: the kernel's parameters and what one CTA holds while it
// runs (its work assignment, OptCta, and its running attention state,
// OptAccum), and what the host dispatcher (08_optimized.cu) sees of an
// instance. Every step function of 08_optimized.cuh and
// 08_optimized_epilogue.cuh takes these; the stage's description and thread
// mapping are at the top of 08_optimized.cuh.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "pa/core/timeline.hpp"
#include "pa/index/cascade.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/optimized.hpp"
#include "pa/index/tracer.hpp"
#include "pa/kernels/optimized.hpp"
#include "attention_state.cuh"

namespace pa::opt {

struct OptParams {
  void* out;
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const int* block_tables;      // padded [seqs, max_blocks_per_seq], or CSR's indices
  const int* context_lens;      // padded tables only
  const int* kv_indptr;         // CSR: [seqs + 1]; null: the table is padded
  const int* kv_last_page_len;  // CSR: [seqs]
  const float* alibi_slopes;  // [num_heads] or null (no ALiBi)
  float* ws_out;
  float* ws_stat;
  int* ws_counter;
  KvLayoutGeometry kv;             // the cache's layout and pool
  std::int64_t kv_token_stride;    // kv.token_stride(), once on the host (token-row layouts)
  QueryGeometry qg;
  BlockTableGeometry btg;
  OptWorkspaceGeometry wsg;
  int group;        // query heads per kv head
  int head_chunks;  // units per kv head
  int split_blocks;
  float scale_log2;  // softmax scale * log2(e) (* k_scale for an fp8 cache): the kernel works in base 2
  float v_scale;     // fp8 cache: O = v_scale * P V_codes (1 otherwise, unused)
  // Cascade suffix (OptimizedArgs::first_token / state_out): logical blocks
  // before first_block are skipped (0 otherwise), and when state_out is set the
  // CTA writes the attention state (fp32 normalized out + natural-log lse, in
  // StateGeometry's layout) instead of `out`. Recorded launches (the trace
  // module) always have first_block 0 and no state: the state stores have no
  // trace events.
  int first_block;
  float* state_out;
  float* state_lse;
  StateGeometry stg;
};

// ---------------------------------------------------------------- the host's view
// The kernel's parameters for a plan (08_optimized.cu; launch_optimized and
// the trace module's recording launch use it).
OptParams opt_make_params(const OptimizedArgs& a, const OptimizedPlan& plan, void* workspace);

// What the host needs to know about one instantiated configuration.
struct OptEntry {
  void (*launch)(const OptParams&, dim3 grid, cudaStream_t stream);
  int smem_bytes;
  int stages;
  int blocks_per_step;
  int ctas_per_sm;  // occupancy, 0 if it could not be queried
};

// ROWS: a token-row cache (nhd, hnd; OptConfig's TOKEN_ROWS).
template <DType DT, int HS, int BS, int HT, KvDType KV = KvDType::same, bool ROWS = false>
OptEntry opt_entry();  // defined in 08_optimized.cuh, instantiated in 08_optimized_inst_*hs*.cu
// The same with the lean pipeline (pa/index/optimized.hpp; head 128 only).
template <DType DT, int HS, int BS, int HT>
OptEntry opt_entry_lean();

// ---------------------------------------------------------------- element type
template <DType DT> struct OptElem;
template <> struct OptElem<DType::f16> { using T = __half; };
template <> struct OptElem<DType::bf16> { using T = __nv_bfloat16; };
// The cache's element in global memory: Q's type, or one fp8 byte.
template <class Cfg>
using OptKvElem = std::conditional_t<Cfg::kFp8, std::uint8_t, typename OptElem<Cfg::kDType>::T>;

// ---------------------------------------------------------------- shared by the steps
using trace::Op;
using trace::Step;
using trace::Tensor;
using kernels::LogBase;  // the attention state's merge (attention_state.cuh)
using kernels::rescale;
using kernels::SoftmaxStats;
inline constexpr unsigned kFull = 0xffffffffu;           // every lane of the warp takes part
inline constexpr float kNegInf = -__builtin_huge_valf();
using kernels::kLn2;    // base-2 lse -> natural log (attention_state.cuh)
using kernels::kLog2e;  // natural -> base-2 logits

// What one CTA works on, decided by opt_prologue and read by every step.
template <class Cfg>
struct OptCta {
  int split, unit, seq;    // blockIdx.x, .y, .z
  int warp, lane;
  int blk_begin, blk_end;  // the split's logical blocks [blk_begin, blk_end) of the attended range
  int ctx;                 // tokens of the attended range
  int tok_limit;           // tokens at or past it are masked (past the context or the split)
  int nsteps;              // steps of the split (Cfg::kStepTokens tokens each), over all warps
  int kvh, head0, nh;      // the unit's KV head, first query head and number of query heads
  TraceCtx tc;             // trace identity: head = the unit's first head, partition = the split
};

// ALiBi for the lane's S rows (heads qk_row(lane) + 8 h of the unit): each
// head's slope in log2 units, so the bias joins the logit already scaled to
// base 2. on = false: no ALiBi (the slopes are then unused).
template <class Cfg>
struct OptAlibi {
  bool on;
  float slope_log2[Cfg::kHeadTiles];
};

// The factor that turns the lane's S rows (heads qk_row(lane) + 8 h) into
// base-2 logits: p.scale_log2, divided by the power of two its Q row was
// scaled by when QK runs in fp16 for bf16 queries (Cfg::kQkFp16,
// opt_q_to_fp16).
template <class Cfg>
struct OptRowScale {
  float scale_log2[Cfg::kHeadTiles];
};

// A thread's running attention state: O^T fragments (mma C, per dim tile and
// head tile), the running max (base 2) of its heads and its partial exp sum
// (summed over the row's lanes in the warp merge).
template <class Cfg>
struct OptAccum {
  float o[Cfg::kDimTiles][Cfg::kHeadTiles][4];
  float m_run[Cfg::kHeadTiles], l_run[Cfg::kHeadTiles];
};

}  // namespace pa::opt
