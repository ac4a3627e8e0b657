// StageRunner (runner.hpp): each stage's device buffers, wired once, and its
// launch (stages 1-5: DeviceProblem; 5-8: StageLaunch). Host C++ against the
// CUDA runtime; without CUDA the constructor says so.
#include "pa/kernels/runner.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#endif

namespace pa::kernels {

namespace {

// The runner's options: the problem's shared prefix for stage 7.
RunOptions with_problem(const PagedProblem& p, RunOptions o) {
  o.shared_prefix_len = p.spec.shared_prefix_len;
  return o;
}

// Stages 1-5 from a PagedProblem: they read no run option (stage 5's checks
// stand for all), and each reads the cache forms stage_reads says.
void check_v1_run(const PagedProblem& p, Stage s, const RunOptions& o) {
  check_run_options(problem_stage_args(p), Stage::warp_reduce, o);
  if (const std::string why = stage_reads_refusal(s, p.spec.kv_layout, p.spec.page_table); !why.empty())
    throw std::invalid_argument(why);
}

// A runner over device inputs: the views it reads (the stages are StageLaunch's).
void check_views(const DeviceInputViews& v) {
  if (v.rotations < 1)
    throw std::invalid_argument("StageRunner: rotations " + std::to_string(v.rotations) + " (accepted: >= 1)");
  if (!v.q || !v.k_cache || !v.v_cache || !v.block_tables || !v.context_lens)
    throw std::invalid_argument("StageRunner: a null input pointer in DeviceInputViews (accepted: all five set)");
}

}  // namespace

#if PA_HAVE_CUDA
namespace {

std::size_t rows_of(const PagedProblem& p) { return static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads; }

// `shape` (problem_layout's: no data) with the caller's resolved fp8 scales:
// a layout's scales may differ from its spec's (0 there means "from the data").
PagedProblem with_scales_of(const PagedProblem& from, PagedProblem shape) {
  shape.k_scale = from.k_scale;
  shape.v_scale = from.v_scale;
  return shape;
}

// A state the cascade left in its workspace (CascadeStates: device pointers).
std::vector<float> download_f32(const float* dev, std::size_t n) {
  std::vector<float> v(n);
  if (n) PA_CUDA_CHECK(cudaMemcpy(v.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

struct StageRunner::Impl {
  PagedProblem own_layout;  // over device inputs: the problem's shape, kept here
  const PagedProblem& p;    // the uploaded problem, or own_layout
  Stage stage;
  RunOptions opt;
  std::unique_ptr<DeviceProblem> stages_1_5;  // stages 1-5 from a PagedProblem: inputs and every stage output
  std::unique_ptr<DeviceInputs> in;           // stages 6-8 from a PagedProblem: the uploaded inputs
  std::optional<StageLaunch> launcher;        // stages 6-8 (and 5 over device inputs)
  int rotations = 1;                          // copies of Q and the tables (DeviceInputViews)
  DeviceBuffer out, lse, ws;                  // the output (dtype), the lse and the workspace
  StageArgs base;  // stages 1-5: DeviceProblem's views; 6-8: the inputs and `out`
  V2Args v2;       // stage 6: the launch's arguments with every buffer wired in
  std::string no_plan;

  Impl(const PagedProblem& problem, Stage s, const RunOptions& o) : p(problem), stage(s), opt(with_problem(p, o)) {
    if (static_cast<int>(s) >= 1 && static_cast<int>(s) <= 5) {
      check_v1_run(p, s, opt);
      stages_1_5 = std::make_unique<DeviceProblem>(p);  // validates for this GPU's shared memory
      validate_problem(s, p, gpu_info().smem_optin_bytes);
      base = stages_1_5->args();  // every stage 1-5 output wired in
      return;
    }
    check_run_options(problem_stage_args(p), s, opt);
    in = std::make_unique<DeviceInputs>(p);  // in the problem's layout and table form
    wire(in->args());
  }

  // Inputs already on the device: stage 5 launches like stages 6-8, with only
  // its output wired in (launch_stage checks its configuration and shared
  // memory at each launch).
  Impl(const PagedProblem& layout, const DeviceInputViews& v, Stage s, const RunOptions& o)
      : own_layout(with_scales_of(layout, problem_layout(layout.spec, layout.num_blocks))),
        p(own_layout),
        stage(s),
        opt(with_problem(layout, o)),
        rotations(v.rotations) {
    check_views(v);
    // The views say the layout; their tables are padded.
    const ProblemSpec& ls = layout.spec;
    if (ls.page_table != PageTableForm::padded || (ls.kv_layout != KvLayout::vllm && ls.kv_layout != v.kv_layout))
      throw std::invalid_argument(std::string("StageRunner: over device inputs the views say the layout (") +
                                  kv_layout_name(v.kv_layout) + ") and the tables are padded (accepted: a problem "
                                  "with kv_layout vllm or the views' own, page_table padded)");
    StageArgs a = problem_stage_args(p);
    a.kv_layout = v.kv_layout;
    check_run_options(a, s, opt);
    a.q = v.q;
    a.k_cache = v.k_cache;
    a.v_cache = v.v_cache;
    a.block_tables = v.block_tables;
    a.context_lens = v.context_lens;
    if ((v.alibi_slopes != nullptr) != p.has_alibi())
      throw std::invalid_argument(std::string("StageRunner: the problem ") +
                                  (p.has_alibi() ? "has ALiBi and no alibi_slopes view was given"
                                                 : "has no ALiBi and an alibi_slopes view was given") +
                                  " (accepted: alibi_slopes set exactly when the layout has slopes)");
    a.alibi_slopes = v.alibi_slopes;
    wire(a);
  }

  // Plan the launch, allocate the output, the lse and the workspace. Stage
  // 8's arrival counters are zeroed here once; every launch leaves them at zero.
  void wire(const StageArgs& inputs) {
    launcher.emplace(inputs, stage, opt);
    const std::size_t rows = rows_of(p);
    out = DeviceBuffer(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
    lse = DeviceBuffer(rows * sizeof(float));
    ws = DeviceBuffer(std::max<std::size_t>(launcher->workspace_bytes(), 1));
    ws.fill_bytes(0);
    base = inputs;
    base.out = out.get();
    if (stage == Stage::v2_partition) v2 = launcher->v2_args(buffers());
  }

  StageBuffers buffers() const {
    return StageBuffers{out.get(), static_cast<float*>(lse.get()), ws.get(), /*workspace_fresh=*/false};
  }

  // The stage's launch on the default stream, on copy `r` of Q and the block tables.
  void launch(int r = 0) {
    if (r < 0 || r >= rotations)
      throw std::invalid_argument("StageRunner::launch: rotation " + std::to_string(r) + " (accepted: 0 to " +
                                  std::to_string(rotations - 1) + ")");
    if (stages_1_5) {
      launch_stage(stage, base, nullptr);
      return;
    }
    const void* q = static_cast<const char*>(base.q) +
                    static_cast<std::size_t>(r) * p.num_seqs() * p.q_stride * dtype_bytes(p.spec.dtype);
    const int* tables = base.block_tables + static_cast<std::size_t>(r) * p.num_seqs() * p.max_blocks_per_seq;
    (void)launcher->launch(buffers(), nullptr, q, tables);
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
    // Stage 6's partitions and stage 7's states: NaN where nothing is written.
    // (Stage 8's workspace keeps its zeroed counters.)
    if (stage == Stage::v2_partition || stage == Stage::cascade_merge) ws.fill_bytes(0xFF);
  }

  RunResult run() {
    RunResult r;
    r.stage = stage;
    r.plan = launcher ? launcher->plan() : no_plan;
    if (stages_1_5) {
      r.stage_output = run_stage(stage, *stages_1_5);
      if (stage == Stage::warp_reduce) r.out = r.stage_output.values;
      return r;
    }
    const std::size_t rows = rows_of(p), n = rows * p.spec.head_size;
    poison();
    const CascadeStates st = launcher->launch(buffers());
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    r.lse = download_floats(lse, rows);
    if (stage == Stage::v2_partition) {
      const StageLaunch::PartitionScratch& ps = launcher->partitions();
      r.max_partitions = ps.max_partitions;
      r.pg = ps.pg;
      r.part_out = download_f32(v2.part_out, ps.out_elems);
      r.part_max = download_f32(v2.part_max, ps.stat_elems);
      r.part_sum = download_f32(v2.part_sum, ps.stat_elems);
    } else if (stage == Stage::cascade_merge) {
      r.cascade = launcher->cascade_plan();
      if (st.prefix_out != nullptr) {
        r.prefix_out = download_f32(st.prefix_out, n);
        r.prefix_lse = download_f32(st.prefix_lse, rows);
        r.suffix_out = download_f32(st.suffix_out, n);
        r.suffix_lse = download_f32(st.suffix_lse, rows);
      }
    } else {
      r.lse.clear();  // stages 5 and 8 write none
      if (stage == Stage::optimized) r.optimized = launcher->optimized_plan();
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
  return impl_->launcher->cascade_plan();
}
const OptimizedPlan& StageRunner::optimized_plan() const {
  if (impl_->stage != Stage::optimized)
    throw std::logic_error(std::string("StageRunner::optimized_plan: the runner is for stage ") +
                           stage_name(impl_->stage));
  return impl_->launcher->optimized_plan();
}
void* StageRunner::workspace() const { return impl_->ws.get(); }
void StageRunner::poison_outputs() { impl_->poison(); }
Stage StageRunner::stage() const { return impl_->stage; }
const std::string& StageRunner::plan() const { return impl_->launcher ? impl_->launcher->plan() : impl_->no_plan; }

#else  // no CUDA: say so

struct StageRunner::Impl {
  Stage stage;
  std::string plan;
};
StageRunner::StageRunner(const PagedProblem& p, Stage s, const RunOptions& o) {
  if (static_cast<int>(s) <= 5) check_v1_run(p, s, with_problem(p, o));
  else check_run_options(problem_stage_args(p), s, with_problem(p, o));
  throw NoGpuError("built without CUDA");
}
StageRunner::StageRunner(const PagedProblem& layout, const DeviceInputViews& v, Stage s, const RunOptions& o) {
  check_run_options(problem_stage_args(layout), s, with_problem(layout, o));
  check_views(v);
  throw NoGpuError("built without CUDA");
}
RunResult StageRunner::run() { throw NoGpuError("built without CUDA"); }
StageTiming StageRunner::time(int, int) { throw NoGpuError("built without CUDA"); }
void StageRunner::launch(int) { throw NoGpuError("built without CUDA"); }
std::vector<float> StageRunner::output() { throw NoGpuError("built without CUDA"); }
const StageArgs& StageRunner::stage_args() const { throw NoGpuError("built without CUDA"); }
const V2Args& StageRunner::v2_args() const { throw NoGpuError("built without CUDA"); }
const CascadePlan& StageRunner::cascade_plan() const { throw NoGpuError("built without CUDA"); }
const OptimizedPlan& StageRunner::optimized_plan() const { throw NoGpuError("built without CUDA"); }
void* StageRunner::workspace() const { throw NoGpuError("built without CUDA"); }
void StageRunner::poison_outputs() { throw NoGpuError("built without CUDA"); }
Stage StageRunner::stage() const { return impl_->stage; }
const std::string& StageRunner::plan() const { return impl_->plan; }

#endif

StageRunner::~StageRunner() = default;
StageRunner::StageRunner(StageRunner&&) noexcept = default;
StageRunner& StageRunner::operator=(StageRunner&&) noexcept = default;

}  // namespace pa::kernels
