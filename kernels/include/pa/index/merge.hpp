// Thread mapping of stage 7's merge kernel (merge_states_kernel,
// 07_cascade_merge.cuh): one thread per 4 consecutive float elements of a
// state row, 256 threads per block, at most 65535 blocks, grid-stride beyond.
// Vector i (of rows * head_size / 4) is row i / vecs_per_row, elements
// [4 (i % vecs_per_row), +4); it is handled by global thread i % stride in
// grid-stride iteration i / stride. The launcher and the host model both use
// these functions.
#pragma once
#include <cstdint>

#include "pa/index/hd.hpp"

namespace pa {

struct MergeGrid {
  static constexpr int kThreads = 256;
  static constexpr std::int64_t kMaxBlocks = 65535;
  std::int64_t blocks = 1;
  int vecs_per_row = 0;
  PA_HD std::int64_t stride() const { return blocks * kThreads; }

  // Who handles vector i: the block, the thread in it and the grid-stride iteration.
  struct Slot {
    std::int64_t block;
    int tid;
    int iter;
  };
  PA_HD Slot slot_of(std::int64_t i) const {
    const std::int64_t g = i % stride();
    return Slot{g / kThreads, static_cast<int>(g % kThreads), static_cast<int>(i / stride())};
  }
  PA_HD std::int64_t first_vec_of_row(std::int64_t row) const { return row * vecs_per_row; }
  PA_HD static int elem_of(std::int64_t i, int vecs_per_row) { return static_cast<int>(i % vecs_per_row) * 4; }
};

PA_HD MergeGrid merge_grid(std::int64_t rows, int head_size) {
  MergeGrid g;
  g.vecs_per_row = head_size / 4;
  const std::int64_t vecs = rows * g.vecs_per_row;
  std::int64_t blocks = (vecs + MergeGrid::kThreads - 1) / MergeGrid::kThreads;
  if (blocks > MergeGrid::kMaxBlocks) blocks = MergeGrid::kMaxBlocks;  // grid-stride beyond
  if (blocks < 1) blocks = 1;
  g.blocks = blocks;
  return g;
}

}  // namespace pa
