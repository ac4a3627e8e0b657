// StageLaunch (stage_launch.hpp): each of stages 5-8 planned over device
// views and enqueued into the caller's memory on the caller's stream. Host
// C++ against the CUDA runtime; without CUDA the constructor says so.
#include "pa/kernels/stage_launch.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "pa/kernels/optimized_args.hpp"

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#endif

namespace pa::kernels {

namespace {

// Stage 6's tokens per partition: the option, or the inputs' own.
int partition_size_of(const StageArgs& in, const RunOptions& o) {
  return o.partition_size != 0 ? o.partition_size : in.partition_size;
}

constexpr std::size_t kScratchAlign = 256;  // bytes: every workspace region starts aligned
// (Unused in a build without CUDA, which has no launch to lay out.)
[[maybe_unused]] std::size_t aligned(std::size_t bytes) { return (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign; }

}  // namespace

void check_run_options(const StageArgs& in, Stage s, const RunOptions& o) {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(std::string("stage ") + stage_name(s) + ": " + what);
  };
  const int bs = in.block_size;
  if (s == Stage::v2_partition) {
    const int ps = partition_size_of(in, o);
    if (ps <= 0 || ps % bs != 0)
      bad("partition size " + std::to_string(ps) + " (accepted: a positive multiple of the block size " +
          std::to_string(bs) + ")");
    if (o.range.begin < 0 || o.range.begin % bs != 0)
      bad("token range begin " + std::to_string(o.range.begin) + " (accepted: >= 0, a multiple of the block size " +
          std::to_string(bs) + ")");
  }
  if (s == Stage::cascade_merge && o.chunk_len < 0)
    bad("chunk length " + std::to_string(o.chunk_len) + " (accepted: 0 for the planner's, or > 0)");
  if (s == Stage::cascade_merge && (o.shared_prefix_len < 0 || o.shared_prefix_len % bs != 0))
    bad("shared prefix " + std::to_string(o.shared_prefix_len) +
        " tokens (accepted: >= 0, a multiple of the block size " + std::to_string(bs) + ")");
  const bool csr = in.kv_indptr != nullptr || in.page_table == PageTableForm::csr;
  if (const std::string why =
          stage_reads_refusal(s, in.kv_layout, csr ? PageTableForm::csr : PageTableForm::padded);
      !why.empty())
    throw std::invalid_argument(why);
  if (s == Stage::optimized && o.splits < 0)
    bad("splits " + std::to_string(o.splits) + " (accepted: 0 for the heuristic, or > 0)");
  if (static_cast<int>(s) < static_cast<int>(Stage::warp_reduce))
    throw std::invalid_argument(std::string("StageLaunch: stage ") + stage_name(s) +
                                " (accepted: warp_reduce, v2_partition, cascade_merge, optimized; stages 1-4 "
                                "write intermediate outputs that only an uploaded problem has)");
}

const CascadePlan& StageLaunch::cascade_plan() const {
  if (!cascade_)
    throw std::logic_error(std::string("StageLaunch::cascade_plan: the launch is of stage ") + stage_name(stage_));
  return *cascade_;
}
const OptimizedPlan& StageLaunch::optimized_plan() const {
  if (!opt_plan_)
    throw std::logic_error(std::string("StageLaunch::optimized_plan: the launch is of stage ") + stage_name(stage_));
  return *opt_plan_;
}

#if PA_HAVE_CUDA

StageLaunch::StageLaunch(const StageArgs& inputs, Stage stage, const RunOptions& opt)
    : in_(inputs), stage_(stage), opt_(opt) {
  check_run_options(in_, stage_, opt_);
  in_.out = nullptr;
  switch (stage_) {
    case Stage::warp_reduce:
      // v1 keeps every logit of a sequence in shared memory: refuse, by name,
      // a context this GPU's blocks cannot hold (the launch would fail).
      check_v1_smem(stage_, in_.dtype, in_.head_size, in_.num_threads, in_.max_context_len, smem_optin_bytes());
      in_.partition_size = 0;  // one partition
      break;
    case Stage::v2_partition: {
      const int ps = partition_size_of(in_, opt_);
      const int max_partitions = std::max(1, num_partitions_in(opt_.range, in_.max_context_len, ps));
      const std::size_t rows = static_cast<std::size_t>(in_.num_seqs) * in_.num_heads;
      parts_.max_partitions = max_partitions;
      parts_.pg = PartitionGeometry{in_.num_heads, max_partitions, in_.head_size};
      parts_.stat_elems = rows * max_partitions;
      parts_.out_elems = parts_.stat_elems * in_.head_size;
      parts_.max_offset = aligned(parts_.out_elems * sizeof(float)) / sizeof(float);
      parts_.sum_offset = parts_.max_offset + aligned(parts_.stat_elems * sizeof(float)) / sizeof(float);
      workspace_bytes_ = (parts_.sum_offset + parts_.stat_elems) * sizeof(float);
      v2_.base = in_;
      v2_.base.partition_size = ps;
      v2_.range = opt_.range;
      v2_.max_partitions = max_partitions;
      v2_.pg = parts_.pg;
      v2_.stg = StateGeometry{in_.num_heads, in_.head_size};
      v2_.single_partition_direct = opt_.single_partition_direct;
      plan_ = "V2: up to " + std::to_string(max_partitions) + " partitions of " + std::to_string(ps) +
              " tokens per sequence, then the reduce";
      break;
    }
    case Stage::cascade_merge:
      cascade_ = plan_cascade(in_, opt_.shared_prefix_len, opt_.chunk_len, opt_.cascade);
      plan_ = cascade_->describe();
      workspace_bytes_ = cascade_->workspace_bytes;
      break;
    case Stage::optimized:
      opt_args_ = optimized_args(in_);
      opt_plan_ = plan_optimized(opt_args_, opt_.splits, opt_.pipeline);
      plan_ = opt_plan_->describe();
      workspace_bytes_ = opt_plan_->workspace_bytes;
      break;
    default:
      throw std::invalid_argument(std::string("StageLaunch: stage ") + stage_name(stage_) + " (accepted: " +
                                  stage_names_text() + ")");
  }
}

CascadeStates StageLaunch::launch(const StageBuffers& b, void* stream, const void* q,
                                  const int* block_tables) const {
  if (b.out == nullptr) throw std::invalid_argument("StageLaunch::launch: out is null");
  if (workspace_bytes_ > 0 && b.workspace == nullptr)
    throw std::invalid_argument("StageLaunch::launch: the plan needs " + std::to_string(workspace_bytes_) +
                                " bytes of workspace and none was given");
  StageArgs a = in_;
  if (q != nullptr) a.q = q;
  if (block_tables != nullptr) a.block_tables = block_tables;
  a.out = b.out;
  const auto s = static_cast<cudaStream_t>(stream);
  switch (stage_) {
    case Stage::v2_partition:
      launch_v2(v2_args(b, a.q, a.block_tables), stream);
      return {};
    case Stage::cascade_merge:
      return launch_cascade(a, *cascade_, b.workspace, b.lse, stream, opt_.cascade_parts);
    case Stage::optimized: {
      if (b.workspace_fresh && workspace_bytes_ > 0)
        PA_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(b.workspace) + opt_plan_->counter_offset, 0,
                                      workspace_bytes_ - opt_plan_->counter_offset, s));
      OptimizedArgs o = opt_args_;
      o.q = a.q;
      o.block_tables = a.block_tables;
      o.out = b.out;
      launch_optimized(o, *opt_plan_, b.workspace, stream);
      return {};
    }
    default:
      launch_stage(stage_, a, stream);
      return {};
  }
}

V2Args StageLaunch::v2_args(const StageBuffers& b, const void* q, const int* block_tables) const {
  if (stage_ != Stage::v2_partition)
    throw std::logic_error(std::string("StageLaunch::v2_args: the launch is of stage ") + stage_name(stage_));
  V2Args v = v2_;
  if (q != nullptr) v.base.q = q;
  if (block_tables != nullptr) v.base.block_tables = block_tables;
  v.base.out = b.out;
  auto* ws = static_cast<float*>(b.workspace);
  v.part_out = ws;
  v.part_max = ws + parts_.max_offset;
  v.part_sum = ws + parts_.sum_offset;
  v.lse = b.lse;
  return v;
}

#else  // no CUDA: say so

StageLaunch::StageLaunch(const StageArgs& inputs, Stage stage, const RunOptions& opt)
    : in_(inputs), stage_(stage), opt_(opt) {
  check_run_options(in_, stage_, opt_);
  throw NoGpuError("built without CUDA");
}
CascadeStates StageLaunch::launch(const StageBuffers&, void*, const void*, const int*) const {
  throw NoGpuError("built without CUDA");
}
V2Args StageLaunch::v2_args(const StageBuffers&, const void*, const int*) const {
  throw NoGpuError("built without CUDA");
}

#endif

}  // namespace pa::kernels
