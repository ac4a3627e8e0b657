// Host runner and timer of stage 6 (v2_partition_run.hpp): StageRunner's
// result in the V2Run shape the tests and pa-lab read.
#include "pa/kernels/v2_partition_run.hpp"

#include <utility>

#include "pa/kernels/runner.hpp"

namespace pa::kernels {

#if PA_HAVE_CUDA

V2Run run_v2(const PagedProblem& p, int partition_size, bool single_partition_direct, TokenRange range) {
  RunOptions o;
  o.partition_size = partition_size;
  o.single_partition_direct = single_partition_direct;
  o.range = range;
  RunResult got = StageRunner(p, Stage::v2_partition, o).run();
  V2Run r;
  r.partition_size = partition_size;
  r.max_partitions = got.max_partitions;
  r.pg = got.pg;
  r.out = std::move(got.out);
  r.lse = std::move(got.lse);
  r.part_out = std::move(got.part_out);
  r.part_max = std::move(got.part_max);
  r.part_sum = std::move(got.part_sum);
  return r;
}

float time_v2(const PagedProblem& p, int partition_size, int iters, int warmup) {
  RunOptions o;
  o.partition_size = partition_size;
  return StageRunner(p, Stage::v2_partition, o).time(iters, warmup).median_ms;
}

#else  // no CUDA: say so

V2Run run_v2(const PagedProblem&, int, bool, TokenRange) { throw NoGpuError("built without CUDA"); }
float time_v2(const PagedProblem&, int, int, int) { throw NoGpuError("built without CUDA"); }

#endif

}  // namespace pa::kernels
