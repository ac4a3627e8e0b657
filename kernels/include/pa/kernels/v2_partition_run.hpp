// Running stage 6 (V2) on a PagedProblem through the runner (runner.hpp):
// upload, poison the outputs with NaN, launch, synchronize, copy back; and
// its CUDA-event timing. Used by the tests and `pa-lab run`. Plain C++ (no
// CUDA headers); without CUDA every call throws NoGpuError.
#pragma once
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/v2_partition.hpp"

namespace pa::kernels {

struct V2Run {
  int partition_size = 0;
  int max_partitions = 0;
  PartitionGeometry pg;
  std::vector<float> out;  // [seq][head][head_size], the dtype output decoded
  std::vector<float> lse;  // [seq][head], natural log
  // Partition buffers as the kernel left them (NaN where it wrote nothing:
  // partitions past a context, and single-partition sequences when
  // single_partition_direct).
  std::vector<float> part_out, part_max, part_sum;
};
// range: the tokens to decode ({0, -1} = whole contexts).
V2Run run_v2(const PagedProblem& p, int partition_size, bool single_partition_direct = true,
             TokenRange range = {});

// Median CUDA-event time (ms) over `iters` launches after `warmup`.
float time_v2(const PagedProblem& p, int partition_size, int iters, int warmup = 3);

}  // namespace pa::kernels
