// StageRunner (runner.hpp): each stage's device buffers, arguments and launch,
// wired once. Host C++ against the CUDA runtime; without CUDA the constructor
// says so.
#include "pa/kernels/runner.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/kernels/optimized_args.hpp"

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#endif

namespace pa::kernels {

namespace {

// Stage 6's tokens per partition: the option, or the problem's own.
int partition_size_of(const PagedProblem& p, const RunOptions& o) {
  return o.partition_size != 0 ? o.partition_size : p.spec.partition_size;
}

// The options a stage reads, checked before anything touches the device.
void check_options(const PagedProblem& p, Stage s, const RunOptions& o) {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(std::string("stage ") + stage_name(s) + ": " + what);
  };
  const int bs = p.spec.block_size;
  if (s == Stage::v2_partition) {
    const int ps = partition_size_of(p, o);
    if (ps <= 0 || ps % bs != 0)
      bad("partition size " + std::to_string(ps) + " (accepted: a positive multiple of the block size " +
          std::to_string(bs) + ")");
    if (o.range.begin < 0 || o.range.begin % bs != 0)
      bad("token range begin " + std::to_string(o.range.begin) + " (accepted: >= 0, a multiple of the block size " +
          std::to_string(bs) + ")");
  }
  if (s == Stage::cascade_merge && o.chunk_len < 0)
    bad("chunk length " + std::to_string(o.chunk_len) + " (accepted: 0 for the planner's, or > 0)");
  if (s == Stage::optimized && o.splits < 0)
    bad("splits " + std::to_string(o.splits) + " (accepted: 0 for the heuristic, or > 0)");
}

}  // namespace

#if PA_HAVE_CUDA
namespace {

std::size_t rows_of(const PagedProblem& p) { return static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads; }

// A state the cascade left in its workspace (CascadeStates: device pointers).
std::vector<float> download_f32(const float* dev, std::size_t n) {
  std::vector<float> v(n);
  if (n) PA_CUDA_CHECK(cudaMemcpy(v.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

struct StageRunner::Impl {
  const PagedProblem& p;
  Stage stage;
  RunOptions opt;
  std::string plan;
  std::unique_ptr<DeviceProblem> stages_1_5;  // stages 1-5: inputs and every stage output
  std::unique_ptr<DeviceInputs> in;           // stages 6-8: inputs
  DeviceBuffer out, lse, ws;                  // stages 6-8: output (dtype), lse, workspace
  DeviceBuffer part_out, part_max, part_sum;  // stage 6
  StageArgs base;  // stages 1-5: DeviceProblem's views; 6-8: the inputs and `out`
  V2Args v2;
  CascadePlan cascade;
  OptimizedArgs opt_args;
  OptimizedPlan opt_plan;

  Impl(const PagedProblem& problem, Stage s, const RunOptions& o) : p(problem), stage(s), opt(o) {
    check_options(p, s, o);
    if (static_cast<int>(s) >= 1 && static_cast<int>(s) <= 5) {
      stages_1_5 = std::make_unique<DeviceProblem>(p);  // validates for this GPU's shared memory
      validate_problem(s, p, gpu_info().smem_optin_bytes);
      base = stages_1_5->args();  // every stage 1-5 output wired in
      return;
    }
    in = std::make_unique<DeviceInputs>(p);
    const std::size_t rows = rows_of(p);
    out = DeviceBuffer(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
    lse = DeviceBuffer(rows * sizeof(float));
    base = in->args();
    base.out = out.get();
    switch (s) {
      case Stage::v2_partition: plan_v2(); break;
      case Stage::cascade_merge:
        cascade = plan_cascade(base, p.spec.shared_prefix_len, opt.chunk_len, opt.cascade);
        plan = cascade.describe();
        ws = DeviceBuffer(cascade.workspace_bytes);
        break;
      case Stage::optimized:
        opt_args = optimized_args(base);
        opt_plan = plan_optimized(opt_args, opt.splits, opt.pipeline);
        plan = opt_plan.describe();
        // Arrival counters start at zero once; every launch leaves them there.
        ws = DeviceBuffer(std::max<std::size_t>(opt_plan.workspace_bytes, 1));
        ws.fill_bytes(0);
        break;
      default:
        throw std::invalid_argument(std::string("StageRunner: stage ") + stage_name(s) + " (accepted: " +
                                    stage_names_text() + ")");
    }
  }

  void plan_v2() {
    const int ps = partition_size_of(p, opt);  // check_options refused anything but a positive multiple
    const int max_ctx = *std::max_element(p.context_lens.begin(), p.context_lens.end());
    const int max_partitions = std::max(1, num_partitions_in(opt.range, max_ctx, ps));
    const std::size_t rows = rows_of(p);
    part_out = DeviceBuffer(rows * max_partitions * p.spec.head_size * sizeof(float));
    part_max = DeviceBuffer(rows * max_partitions * sizeof(float));
    part_sum = DeviceBuffer(rows * max_partitions * sizeof(float));
    v2.base = base;
    v2.base.partition_size = ps;
    v2.range = opt.range;
    v2.max_partitions = max_partitions;
    v2.part_out = static_cast<float*>(part_out.get());
    v2.part_max = static_cast<float*>(part_max.get());
    v2.part_sum = static_cast<float*>(part_sum.get());
    v2.pg = PartitionGeometry{base.num_heads, max_partitions, base.head_size};
    v2.stg = StateGeometry{base.num_heads, base.head_size};
    v2.lse = static_cast<float*>(lse.get());
    v2.single_partition_direct = opt.single_partition_direct;
    plan = "V2: up to " + std::to_string(max_partitions) + " partitions of " + std::to_string(ps) +
           " tokens per sequence, then the reduce";
  }

  // The stage's launch on the default stream (stage 7 without lse: run()
  // launches the cascade itself, for its lse and the states it returns).
  void launch() {
    switch (stage) {
      case Stage::v2_partition: launch_v2(v2); break;
      case Stage::cascade_merge: (void)launch_cascade(base, cascade, ws.get(), nullptr); break;
      case Stage::optimized: launch_optimized(opt_args, opt_plan, ws.get()); break;
      default: launch_stage(stage, base, nullptr); break;
    }
  }

  void poison() {
    if (stages_1_5) {
      stages_1_5->poison_outputs();
      return;
    }
    out.fill_bytes(0xFF);  // NaN in every dtype: an element the kernel skips fails the check
    lse.fill_bytes(0xFF);
    if (stage == Stage::v2_partition) {
      part_out.fill_bytes(0xFF);
      part_max.fill_bytes(0xFF);
      part_sum.fill_bytes(0xFF);
    }
    if (stage == Stage::cascade_merge) ws.fill_bytes(0xFF);
  }

  RunResult run() {
    RunResult r;
    r.stage = stage;
    r.plan = plan;
    if (stages_1_5) {
      r.stage_output = run_stage(stage, *stages_1_5);
      if (stage == Stage::warp_reduce) r.out = r.stage_output.values;
      return r;
    }
    const std::size_t rows = rows_of(p), n = rows * p.spec.head_size;
    poison();
    switch (stage) {
      case Stage::v2_partition: {
        launch();
        PA_CUDA_CHECK(cudaDeviceSynchronize());
        r.max_partitions = v2.max_partitions;
        r.pg = v2.pg;
        const std::size_t parts = rows * v2.max_partitions;
        r.part_out = download_floats(part_out, parts * p.spec.head_size);
        r.part_max = download_floats(part_max, parts);
        r.part_sum = download_floats(part_sum, parts);
        r.lse = download_floats(lse, rows);
        break;
      }
      case Stage::cascade_merge: {
        const CascadeStates st = launch_cascade(base, cascade, ws.get(), static_cast<float*>(lse.get()));
        PA_CUDA_CHECK(cudaDeviceSynchronize());
        r.cascade = cascade;
        r.lse = download_floats(lse, rows);
        if (st.prefix_out != nullptr) {
          r.prefix_out = download_f32(st.prefix_out, n);
          r.prefix_lse = download_f32(st.prefix_lse, rows);
          r.suffix_out = download_f32(st.suffix_out, n);
          r.suffix_lse = download_f32(st.suffix_lse, rows);
        }
        break;
      }
      default:  // stage 8
        launch();
        PA_CUDA_CHECK(cudaDeviceSynchronize());
        r.optimized = opt_plan;
        break;
    }
    r.out = download_decoded(out, n, p.spec.dtype);
    return r;
  }

  StageTiming time(int iters, int warmup) {
    if (iters < 1) throw std::invalid_argument("StageRunner::time: iters " + std::to_string(iters) + " (accepted: >= 1)");
    if (warmup < 0)
      throw std::invalid_argument("StageRunner::time: warmup " + std::to_string(warmup) + " (accepted: >= 0)");
    if (stages_1_5) return time_stage(stage, *stages_1_5, iters, warmup);
    StageTiming t;
    t.ms = time_launches_ms([&] { launch(); }, iters, warmup);
    t.median_ms = median_of(t.ms);
    return t;
  }
};

StageRunner::StageRunner(const PagedProblem& p, Stage stage, const RunOptions& opt)
    : impl_(std::make_unique<Impl>(p, stage, opt)) {}
RunResult StageRunner::run() { return impl_->run(); }
StageTiming StageRunner::time(int iters, int warmup) { return impl_->time(iters, warmup); }
const StageArgs& StageRunner::stage_args() const { return impl_->base; }
const V2Args& StageRunner::v2_args() const {
  if (impl_->stage != Stage::v2_partition)
    throw std::logic_error(std::string("StageRunner::v2_args: the runner is for stage ") + stage_name(impl_->stage));
  return impl_->v2;
}
const CascadePlan& StageRunner::cascade_plan() const {
  if (impl_->stage != Stage::cascade_merge)
    throw std::logic_error(std::string("StageRunner::cascade_plan: the runner is for stage ") +
                           stage_name(impl_->stage));
  return impl_->cascade;
}
void* StageRunner::workspace() const { return impl_->ws.get(); }
void StageRunner::poison_outputs() { impl_->poison(); }

#else  // no CUDA: say so

struct StageRunner::Impl {
  Stage stage;
  std::string plan;
};
StageRunner::StageRunner(const PagedProblem& p, Stage s, const RunOptions& o) {
  check_options(p, s, o);
  throw NoGpuError("built without CUDA");
}
RunResult StageRunner::run() { throw NoGpuError("built without CUDA"); }
StageTiming StageRunner::time(int, int) { throw NoGpuError("built without CUDA"); }
const StageArgs& StageRunner::stage_args() const { throw NoGpuError("built without CUDA"); }
const V2Args& StageRunner::v2_args() const { throw NoGpuError("built without CUDA"); }
const CascadePlan& StageRunner::cascade_plan() const { throw NoGpuError("built without CUDA"); }
void* StageRunner::workspace() const { throw NoGpuError("built without CUDA"); }
void StageRunner::poison_outputs() { throw NoGpuError("built without CUDA"); }

#endif

StageRunner::~StageRunner() = default;
StageRunner::StageRunner(StageRunner&&) noexcept = default;
StageRunner& StageRunner::operator=(StageRunner&&) noexcept = default;
Stage StageRunner::stage() const { return impl_->stage; }
const std::string& StageRunner::plan() const { return impl_->plan; }

}  // namespace pa::kernels
