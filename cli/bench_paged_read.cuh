// pa-bench --paged-read: what reading stage 8's bytes costs when nothing else
// is done with them. Every (sequence, KV head, block) K and V tile of the
// shape's pool is read once, through the shape's block tables, in stage 8's
// grid (splits x KV heads x sequences, the split sizes of stage 8's plan) and
// its per-warp pipeline (4 warps; warp w takes steps w, w + 4, ...; a step is
// one block's K and V tiles; kPagedStages deep), with no arithmetic.
// paged_read_kernel moves a tile into shared memory one of two ways:
//  - <false>: stage 8's copy, 16 bytes a lane per cp.async (no L2 prefetch
//    hint, as stage 8), 256 copies per 4 KB tile, a group committed per step
//    and waited for with cp.async.wait_group;
//  - <true>: one cp.async.bulk per 4 KB tile from lane 0 (the TMA engine),
//    completing on the stage's mbarrier.
// pa-bench times beside them read_stream over as many contiguous bytes (the
// read-only ceiling at the shape's size, not at 2 GB) and, with
// --paged-read-step-ns, both paged reads again with each warp held that long
// after every step, where stage 8 does its math. Together they say where
// stage 8's time goes that is not the read itself: what the paging and the
// per-warp pipeline cost against a contiguous stream, whether the TMA engine
// streams the same tiles faster than 16-byte copies, and what holding a warp
// as long as its math costs the stream, with either copy.
//
// Tiles of 4096 bytes only (head 128 x block 16 in 16 bits, vLLM's layout,
// where a (block, KV head) tile of K, and of V, is contiguous).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ptx.cuh"

namespace pa::bench {

constexpr int kPagedTileBytes = 4096;
constexpr int kPagedWarps = 4;
constexpr int kPagedStages = 3;  // stage 8's depth for these tiles: 96 KB a CTA, 2 CTAs per SM
constexpr int kPagedStepBytes = 2 * kPagedTileBytes;
constexpr int kPagedSmemBytes = kPagedWarps * kPagedStages * kPagedStepBytes;

struct PagedReadArgs {
  const unsigned char* k = nullptr;  // the pools, vLLM's layout
  const unsigned char* v = nullptr;
  const int* tables = nullptr;       // this rotation's [seqs][max_blocks] rows
  const int* context_lens = nullptr;
  int max_blocks = 0;
  int block_size = 0;
  int kv_heads = 0;
  int split_blocks = 0;
  unsigned* sink = nullptr;          // written only if the XOR of what was read is a magic value
  // Busy cycles after each step has landed, before the next refill is
  // issued (0: none): a stand-in for stage 8's math of the step, which holds
  // its warp as long, so that the read shows what that costs the stream.
  long long step_cycles = 0;
};

// The window of block-table entries a warp holds: lane l has the physical
// block of the warp's step (first + l); 0 past the split.
__device__ __forceinline__ int paged_table_window(const PagedReadArgs& a, int seq, int b0, int b1, int warp,
                                                  int first, int lane) {
  const int lb = b0 + warp + kPagedWarps * (first + lane);
  return lb < b1 ? __ldg(a.tables + static_cast<std::int64_t>(seq) * a.max_blocks + lb) : 0;
}

template <bool kBulk>
__global__ void __launch_bounds__(kPagedWarps * 32) paged_read_kernel(PagedReadArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) unsigned long long bars[kPagedWarps][kPagedStages];
  const int split = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nblocks = (a.context_lens[seq] + a.block_size - 1) / a.block_size;
  const int b0 = split * a.split_blocks, b1 = min(nblocks, b0 + a.split_blocks);
  const int nsteps = b1 - b0;
  const int mine = warp < nsteps ? (nsteps - warp + kPagedWarps - 1) / kPagedWarps : 0;
  const std::uint32_t base = ptx::smem_u32(smem) + warp * kPagedStages * kPagedStepBytes;
  const std::uint32_t bar0 = ptx::smem_u32(&bars[warp][0]);
  if constexpr (kBulk) {
    if (lane == 0)
      for (int s = 0; s < kPagedStages; ++s) ptx::mbar_init(bar0 + 8 * s, 1);
    ptx::fence_mbarrier_init();
    __syncwarp();
  }
  int tbl = paged_table_window(a, seq, b0, b1, warp, 0, lane);
  auto issue = [&](int j) {
    if (j > 0 && j % 32 == 0) tbl = paged_table_window(a, seq, b0, b1, warp, j, lane);
    const int phys = __shfl_sync(0xffffffffu, tbl, j % 32);
    const std::size_t off = (static_cast<std::size_t>(phys) * a.kv_heads + kvh) * kPagedTileBytes;
    const std::uint32_t dst = base + (j % kPagedStages) * kPagedStepBytes;
    if constexpr (kBulk) {
      if (lane == 0) {
        const std::uint32_t bar = bar0 + 8 * (j % kPagedStages);
        ptx::mbar_arrive_expect_tx(bar, kPagedStepBytes);
        ptx::cp_async_bulk_g2s(dst, a.k + off, kPagedTileBytes, bar);
        ptx::cp_async_bulk_g2s(dst + kPagedTileBytes, a.v + off, kPagedTileBytes, bar);
      }
    } else {
#pragma unroll
      for (int c = lane; c < kPagedTileBytes / 16; c += 32) {
        ptx::cp_async_16(dst + 16 * c, a.k + off + 16 * c, 16);
        ptx::cp_async_16(dst + kPagedTileBytes + 16 * c, a.v + off + 16 * c, 16);
      }
    }
  };
  unsigned acc = 0;
#pragma unroll
  for (int j = 0; j < kPagedStages - 1; ++j) {
    if (j < mine) issue(j);
    if constexpr (!kBulk) ptx::cp_async_commit();
  }
  for (int j = 0; j < mine; ++j) {
    if (j + kPagedStages - 1 < mine) issue(j + kPagedStages - 1);
    if constexpr (kBulk) {
      ptx::mbar_wait(bar0 + 8 * (j % kPagedStages), (j / kPagedStages) & 1);
    } else {
      ptx::cp_async_commit();
      ptx::cp_async_wait<kPagedStages - 1>();
    }
    __syncwarp();
    // One word a lane of what landed, so the stage is read before it is refilled.
    acc ^= ptx::lds_u32(base + (j % kPagedStages) * kPagedStepBytes + 4 * lane);
    if (a.step_cycles > 0) {
      const long long t0 = clock64();
      while (clock64() - t0 < a.step_cycles) {
      }
    }
    __syncwarp();
  }
  if (acc == 0x9E3779B9u) *a.sink = acc;
}

}  // namespace pa::bench
