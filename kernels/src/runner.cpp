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

// A runner over device inputs: the stages it launches and the views it reads.
void check_views(Stage s, const DeviceInputViews& v) {
  if (static_cast<int>(s) >= 1 && static_cast<int>(s) <= 4)
    throw std::invalid_argument(std::string("StageRunner over device inputs: stage ") + stage_name(s) +
                                " (accepted: warp_reduce, v2_partition, cascade_merge, optimized; stages 1-4 "
                                "write intermediate outputs that only an uploaded problem has)");
  if (v.rotations < 1)
    throw std::invalid_argument("StageRunner: rotations " + std::to_string(v.rotations) + " (accepted: >= 1)");
  if (!v.q || !v.k_cache || !v.v_cache || !v.block_tables || !v.context_lens)
    throw std::invalid_argument("StageRunner: a null input pointer in DeviceInputViews (accepted: all five set)");
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
  std::unique_ptr<DeviceInputs> in;           // stages 6-8 from a PagedProblem: the uploaded inputs
  int rotations = 1;                          // copies of Q and the tables (DeviceInputViews)
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
    wire_outputs(in->args());
  }

  // Inputs already on the device: stage 5 launches like stages 6-8, with only
  // its output wired in (launch_stage checks its configuration and shared
  // memory at each launch).
  Impl(const PagedProblem& layout, const DeviceInputViews& v, Stage s, const RunOptions& o)
      : p(layout), stage(s), opt(o), rotations(v.rotations) {
    check_options(p, s, o);
    check_views(s, v);
    StageArgs a = problem_stage_args(p);
    a.q = v.q;
    a.k_cache = v.k_cache;
    a.v_cache = v.v_cache;
    a.block_tables = v.block_tables;
    a.context_lens = v.context_lens;
    wire_outputs(a);
  }

  // Stages 5-8: the output, the lse and the stage's plan and workspace.
  void wire_outputs(const StageArgs& inputs) {
    const std::size_t rows = rows_of(p);
    out = DeviceBuffer(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
    lse = DeviceBuffer(rows * sizeof(float));
    base = inputs;
    base.out = out.get();
    switch (stage) {
      case Stage::warp_reduce: base.partition_size = 0; break;  // one partition
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
        throw std::invalid_argument(std::string("StageRunner: stage ") + stage_name(stage) + " (accepted: " +
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

  // The stage's launch on the default stream, on copy `r` of Q and the block
  // tables (stage 7 without lse: run() launches the cascade itself, for its
  // lse and the states it returns).
  void launch(int r = 0) {
    if (r < 0 || r >= rotations)
      throw std::invalid_argument("StageRunner::launch: rotation " + std::to_string(r) + " (accepted: 0 to " +
                                  std::to_string(rotations - 1) + ")");
    if (r == 0) {
      launch_on(base, v2, opt_args);
      return;
    }
    StageArgs a = base;
    a.q = static_cast<const char*>(base.q) +
          static_cast<std::size_t>(r) * p.num_seqs() * p.q_stride * dtype_bytes(p.spec.dtype);
    a.block_tables = base.block_tables + static_cast<std::size_t>(r) * p.num_seqs() * p.max_blocks_per_seq;
    V2Args v = v2;
    v.base.q = a.q;
    v.base.block_tables = a.block_tables;
    OptimizedArgs o = opt_args;
    o.q = a.q;
    o.block_tables = a.block_tables;
    launch_on(a, v, o);
  }
  void launch_on(const StageArgs& a, const V2Args& v, const OptimizedArgs& o) {
    switch (stage) {
      case Stage::v2_partition: launch_v2(v); break;
      case Stage::cascade_merge:
        (void)launch_cascade(a, cascade, ws.get(), nullptr, nullptr, opt.cascade_parts);
        break;
      case Stage::optimized: launch_optimized(o, opt_plan, ws.get()); break;
      default: launch_stage(stage, a, nullptr); break;
    }
  }

  std::vector<float> output() {
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    const std::size_t n = rows_of(p) * p.spec.head_size;
    if (stages_1_5) {
      if (stage != Stage::warp_reduce)
        throw std::invalid_argument(std::string("StageRunner::output: stage ") + stage_name(stage) +
                                    " has no attention output (accepted: warp_reduce and later)");
      return download_decoded(stages_1_5->out, n, p.spec.dtype);
    }
    return download_decoded(out, n, p.spec.dtype);
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
      default:  // stage 8, or stage 5 over device inputs
        launch();
        PA_CUDA_CHECK(cudaDeviceSynchronize());
        if (stage == Stage::optimized) r.optimized = opt_plan;
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
StageRunner::StageRunner(const PagedProblem& layout, const DeviceInputViews& in, Stage stage, const RunOptions& opt)
    : impl_(std::make_unique<Impl>(layout, in, stage, opt)) {}
RunResult StageRunner::run() { return impl_->run(); }
StageTiming StageRunner::time(int iters, int warmup) { return impl_->time(iters, warmup); }
void StageRunner::launch(int rotation) { impl_->launch(rotation); }
std::vector<float> StageRunner::output() { return impl_->output(); }
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
StageRunner::StageRunner(const PagedProblem& layout, const DeviceInputViews& v, Stage s, const RunOptions& o) {
  check_options(layout, s, o);
  check_views(s, v);
  throw NoGpuError("built without CUDA");
}
RunResult StageRunner::run() { throw NoGpuError("built without CUDA"); }
StageTiming StageRunner::time(int, int) { throw NoGpuError("built without CUDA"); }
void StageRunner::launch(int) { throw NoGpuError("built without CUDA"); }
std::vector<float> StageRunner::output() { throw NoGpuError("built without CUDA"); }
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
