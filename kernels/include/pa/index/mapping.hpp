// The thread mapping: which (warp, lane, loop iteration) touches which
// (token, head-dimension range, logical block). The kernels loop over exactly
// these functions; the host trace model enumerates them; the reference uses
// the warp-to-block assignment for the per-warp partial outputs (stage 4).
// A configuration with TOKEN_ROWS (nhd, hnd: config.hpp) changes the K vec
// width, the LV lanes (lv_chunk, lv_row_token) and the rows each lane owns;
// everything else is the same.
//
// Grid: blockIdx.x = head, blockIdx.y = sequence, blockIdx.z = partition
// (always 0 for v1). One thread block computes one (sequence, head[, partition]).
#pragma once

#include "pa/index/config.hpp"
#include "pa/index/hd.hpp"
#include "pa/index/kv_layout.hpp"

namespace pa {

template <class Cfg>
struct ThreadMapping {
  // --- identity of a thread inside the block -------------------------------
  PA_HD static int warp_of(int tid) { return tid / kWarpSize; }
  PA_HD static int lane_of(int tid) { return tid % kWarpSize; }
  PA_HD static int thread_group_of(int tid) { return tid / Cfg::kThreadGroupSize; }
  PA_HD static int thread_group_offset_of(int tid) { return tid % Cfg::kThreadGroupSize; }

  // --- stage 1: Q to shared memory ----------------------------------------
  // q_vecs[kThreadGroupSize][kNumVecsPerThread] in shared memory: slot
  // [g_off][i] holds the K-vec-sized piece of Q that thread g_off of every
  // thread group multiplies with its i-th K vec. Thread groups fill the rows
  // round-robin: thread group tg loads i = tg, tg + kNumThreadGroups, ...
  PA_HD static int q_load_first_vec(int tid) { return thread_group_of(tid); }
  static constexpr int kQLoadStride = Cfg::kNumThreadGroups;
  // First head dimension of the Q (and K) vec slot [g_off][i].
  PA_HD static int qk_vec_dim(int g_off, int i) {
    return (g_off + i * Cfg::kThreadGroupSize) * Cfg::kVecSize;
  }
  // Linear slot index of q_vecs[g_off][i] (in vecs).
  PA_HD static int q_smem_slot(int g_off, int i) { return g_off * Cfg::kNumVecsPerThread + i; }

  // --- warp to KV-block assignment (stages 2 and 4) ------------------------
  // Warp w handles logical blocks block_begin + w, + w + kNumWarps, ...
  PA_HD static int warp_block(int block_begin, int warp, int iter) {
    return block_begin + warp + iter * Cfg::kNumWarps;
  }

  // --- stage 2: QK ---------------------------------------------------------
  // Token (within the block) that lane's thread group handles: a warp's
  // thread groups cover the block's tokens one each.
  PA_HD static int qk_token_in_block(int lane) { return lane / Cfg::kThreadGroupSize; }
  // Token index in the sequence of token t of logical block b.
  PA_HD static int token_of(int logical_block, int t) { return logical_block * Cfg::kBlockSize + t; }

  // --- K and V element offsets in the kernel's layout ------------------------
  // vLLM's layout: CacheGeometry's formulas (no layout branch in the loop);
  // token rows: the nhd / hnd formula the launch's layout names.
  // Both on fixed_sizes(g): the cache's head size, block size and x replaced
  // by Cfg's constants (equal by the launch checks), as vLLM's kernel takes
  // them as template parameters, so d / x and every stride are compile-time
  // constants (with the runtime sizes each K vec paid an integer division and
  // three 64-bit multiplies). Only the page count and kv heads stay runtime.
  PA_HD static KvLayoutGeometry fixed_sizes(const KvLayoutGeometry& g) {
    return {g.layout, CacheGeometry{g.cache.num_blocks, g.cache.num_kv_heads, Cfg::kHeadSize, Cfg::kBlockSize, Cfg::kX}};
  }
  PA_HD static std::int64_t k_offset(const KvLayoutGeometry& g, int phys, int kv_head, int d, int t) {
    if constexpr (Cfg::kTokenRows) return fixed_sizes(g).k_offset(phys, kv_head, d, t);
    else return fixed_sizes(g).cache.k_offset(phys, kv_head, d, t);
  }
  // K vec i + 1 of a thread starts kKVecStep elements after its vec i
  // (k_offset at qk_vec_dim(g_off, i + 1) minus at qk_vec_dim(g_off, i)):
  // vLLM's layout, the group's vecs fill one x chunk (kThreadGroupSize *
  // kVecSize = x), so the next vec is the token's next chunk, a block of x
  // chunks on; token rows, the next kThreadGroupSize * kVecSize elements of
  // the row. So a block's K loads are one address plus constant offsets.
  static constexpr int kKVecStep =
      Cfg::kTokenRows ? Cfg::kThreadGroupSize * Cfg::kVecSize : Cfg::kBlockSize * Cfg::kX;
  static_assert(Cfg::kTokenRows || Cfg::kThreadGroupSize * Cfg::kVecSize == Cfg::kX,
                "vLLM's layout: a thread group's vecs fill one x chunk");
  PA_HD static std::int64_t v_offset(const KvLayoutGeometry& g, int phys, int kv_head, int d, int t) {
    if constexpr (Cfg::kTokenRows) return fixed_sizes(g).v_offset(phys, kv_head, d, t);
    else return fixed_sizes(g).cache.v_offset(phys, kv_head, d, t);
  }

  // --- stage 4: LV ---------------------------------------------------------
  // vLLM's layout: first token (within the block) of the V vec that lane loads.
  PA_HD static int lv_token_in_block(int lane) {
    return (lane % Cfg::kNumVVecsPerRow) * Cfg::kVVecSize;
  }
  // Token rows: lane loads chunk lv_chunk(lane) (dims [chunk * x, + x)) of
  // tokens lv_row_token(lane, s), s = 0 .. kLvTokenSteps - 1, of each block.
  PA_HD static int lv_chunk(int lane) { return lane % Cfg::kLvLanesPerToken; }
  PA_HD static int lv_row_token(int lane, int s) {
    return lane / Cfg::kLvLanesPerToken + s * Cfg::kLvTokensPerIter;
  }
  // Head dimension (V row) of lane's i-th accumulator; rows >= head size are
  // idle (token rows: the lanes past a token's chunks).
  PA_HD static int lv_row(int lane, int i) {
    if constexpr (Cfg::kTokenRows) return lv_chunk(lane) * Cfg::kVVecSize + i;
    else return lane / Cfg::kNumVVecsPerRow + i * Cfg::kNumRowsPerIter;
  }
  PA_HD static bool lv_row_valid(int row) { return row < Cfg::kHeadSize; }
  // vLLM's layout: lane's accumulator row i + 1 is kNumRowsPerIter rows below
  // row i, so its V vec starts kLvRowStep elements later (v_offset's rows are
  // block_size apart): a block's V loads are one address plus constants.
  static constexpr int kLvRowStep = Cfg::kNumRowsPerIter * Cfg::kBlockSize;
  // The lanes that accumulated the same rows, reduced by xor shuffles with
  // masks kLvReduceMaskHigh, / 2, ..., kLvReduceMaskLow (none when high <
  // low): vLLM's layout, the kNumVVecsPerRow adjacent lanes of a row; token
  // rows, the lanes with the same chunk, kLvLanesPerToken apart.
  static constexpr int kLvReduceMaskHigh = Cfg::kTokenRows ? kWarpSize / 2 : Cfg::kNumVVecsPerRow / 2;
  static constexpr int kLvReduceMaskLow = Cfg::kTokenRows ? Cfg::kLvLanesPerToken : 1;

  // --- stage 5: cross-warp tree reduction ----------------------------------
  // Round r = 0,1,..: active warps = kNumWarps >> r; warps in the upper half
  // [mid, active) store their rows to out scratch slot (warp - mid), the lower
  // half adds them. out scratch is float[kNumWarps/2][kHeadSize].
  PA_HD static int reduce_scratch_offset(int slot, int row) { return slot * Cfg::kHeadSize + row; }

  // --- added by the kernels module (stages 1-5) -----------------------------
  // Byte offset of q_vecs[g_off][i] from the start of q_vecs.
  PA_HD static int q_smem_byte(int g_off, int i) { return q_smem_slot(g_off, i) * Cfg::kQVecBytes; }
  static constexpr int kNumQSlots = Cfg::kThreadGroupSize * Cfg::kNumVecsPerThread;
  // Stage 1's observable output: slot s read back from q_vecs lands at elements
  // [s * kVecSize, (s + 1) * kVecSize) of the output row (slot order).
  PA_HD static int q_readback_elem(int slot) { return slot * Cfg::kVecSize; }
  // Inverse of q_smem_slot: the (g_off, i) of a linear slot.
  PA_HD static int q_slot_g_off(int slot) { return slot / Cfg::kNumVecsPerThread; }
  PA_HD static int q_slot_vec(int slot) { return slot % Cfg::kNumVecsPerThread; }
  // Block-strided loops over the tokens of a range (softmax, stage outputs):
  // thread tid handles range-relative token tid + k * kNumThreads at iteration k.
  PA_HD static int strided_index(int tid, int k) { return tid + k * Cfg::kNumThreads; }
  // Reduction scratch (float red[2 * kNumWarps]): warp maxima, then warp sums.
  PA_HD static int red_max_slot(int warp) { return warp; }
  PA_HD static int red_sum_slot(int warp) { return Cfg::kNumWarps + warp; }
  // LV: lanes that share a V row (vLLM's layout: the kNumVVecsPerRow lanes
  // covering one block row; token rows: the lanes of one chunk) are reduced
  // into the first of them, which then owns the row.
  PA_HD static bool lv_row_owner(int lane) {
    if constexpr (Cfg::kTokenRows) return lane < Cfg::kLvLanesPerToken;
    else return lane % Cfg::kNumVVecsPerRow == 0;
  }
};

}  // namespace pa
