// Stage 7 over several levels: the multi-level cascade (host API and its
// plan: pa/kernels/multilevel_cascade.hpp; the launches: 07_multilevel_cascade.cu).
//
// What it adds to the two-level cascade (07_cascade_merge.cuh). Requests can
// share more than one prefix: a system prompt shared by all, a few-shot block
// shared by a group, then each request's own tokens. Each shared span (a
// level group, one CSR row of its level's page table) is attended once by
// all of its members with the prefix kernel, which needs no change for it:
// it takes any list of pages (the group's row of the level's indices) and any
// run of query rows. Two things are new:
//   - a level's members side by side: the prefix kernel reads its queries as
//     consecutive sequences, so a level whose groups are not runs of
//     consecutive requests first copies Q into the level's order
//     (reorder_q_kernel, below); its states come out in that order too;
//   - the merge of any number of states per request in level order, each
//     level keeping its states in its own order: the fold of shard states
//     (merge_shards_kernel, 07_shard_merge.cuh) with a map from request to
//     row per level (-1 where the request's group is empty).
// A shared span may end inside a page: the prefix kernels copy only the
// span's V tokens (prefix_v_copy_bytes, pa/index/cascade.hpp).
//
// Thread mapping of reorder_q_kernel: one thread per 16-byte vector of a Q
// row (8 fp16/bf16 elements), grid-stride over rows x vectors: row i of the
// level's order is request order[i]'s row. Both sides are read and written
// 16 bytes at a time; the Q of a decode step is a few MB at most.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "pa/index/hd.hpp"

namespace pa::kernels {

// dst row i = src row order[i]; rows of row_vecs 16-byte vectors, src rows
// src_stride_vecs vectors apart, dst rows packed.
// LESSON-BEGIN(cascade_merge.reorder_q)
__global__ void reorder_q_kernel(const uint4* __restrict__ src, const int* __restrict__ order, int rows, int row_vecs,
                                 int src_stride_vecs, uint4* __restrict__ dst) {
  const std::int64_t total = static_cast<std::int64_t>(rows) * row_vecs;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int row = static_cast<int>(i / row_vecs), v = static_cast<int>(i % row_vecs);
    dst[i] = src[static_cast<std::int64_t>(order[row]) * src_stride_vecs + v];
  }
}
// LESSON-END(cascade_merge.reorder_q)

}  // namespace pa::kernels
