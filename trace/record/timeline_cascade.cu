// The cascade's timeline: stage 7's pipeline (07_cascade_pipeline.cuh, the
// same function launch_cascade runs) with the timing instances of its four
// kernels, each kernel's warps in their own slots of one span buffer:
//   prefix         the wgmma prefix kernel (timeline_cascade_wgmma.cu, sm_90a)
//   prefix_reduce  the reduce of its chunks (stage 6's reduce kernel)
//   suffix         stage 8 over each request's own tokens (the lean pipeline
//                  the planner picks beside a prefix, or the full one)
//   merge          the merge of the two states
// on the streams the plan uses, so the timeline shows how the prefix and the
// suffix kernels share the GPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "06_v2_partition.cuh"
#include "07_cascade_merge.cuh"
#include "07_cascade_pipeline.cuh"
#include "08_optimized.cuh"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/timing_tracer.cuh"
#include "timeline_cascade.hpp"

namespace pa::trace::detail {

#if !PA_TIMELINE_WGMMA  // no sm_90 among the CUDA architectures: no wgmma prefix kernel to time
bool timed_prefix_wgmma_built(DType, int, int) { return false; }
PrefixShape timed_prefix_wgmma_shape(DType, int, int, const kernels::PrefixArgs&) { return {}; }
unsigned launch_timed_prefix_wgmma(DType, int, int, const kernels::PrefixArgs&, const kernels::TimingTracer&,
                                   cudaStream_t) {
  return 0;
}
#endif

namespace {

using kernels::TimingTracer;

// Span slots per warp each kernel needs at most. Prefix: a consumer warp ends
// Q, two per tile, the last P V and the store; a producer warp one per tile
// and the drain. Chunk reduce and merge: one. The suffix: opt_spans_per_warp.
unsigned prefix_bound(int chunk_len, unsigned tile_tokens) {
  return 2u * static_cast<unsigned>((chunk_len + static_cast<int>(tile_tokens) - 1) / static_cast<int>(tile_tokens)) +
         4u;
}
constexpr unsigned kReduceBound = 1, kMergeBound = 1;

// The launchers of 07_cascade_pipeline.cuh with timing instances. With
// `dry`, no kernel is launched and the walk only adds up the slots (the
// pipeline still records its stream events and zeroes the suffix's arrival
// counters, which a launch would do anyway).
template <DType DT>
struct TimedCascade {
  using T = typename opt::OptElem<DT>::T;
  TimingTracer base;          // the buffer and counter
  unsigned min_per_warp = 0;  // every kernel's bound raised to at least this
  bool dry = false;
  unsigned long long next_slot = 0;

  TimingTracer take(KernelRole role, unsigned long long warps, unsigned bound) {
    const unsigned per_warp = std::max(bound, min_per_warp);
    const TimingTracer t = base.for_kernel(role, next_slot, per_warp);
    next_slot += t.slots(warps);
    return t;
  }
  void prefix(const kernels::StageArgs& b, const kernels::CascadePlan& p, const kernels::PrefixArgs& pa, cudaStream_t s) {
    if (p.prefix_kernel != PrefixKernel::wgmma)
      throw std::invalid_argument(std::string("timeline of the cascade: the plan's prefix kernel is ") +
                                  kernels::prefix_kernel_name(p.prefix_kernel) +
                                  "; timed: wgmma (the planner's choice on a compute 9.0 GPU)");
    const PrefixShape sh = timed_prefix_wgmma_shape(b.dtype, b.head_size, b.block_size, pa);
    const TimingTracer t = take(KernelRole::prefix, sh.warps, prefix_bound(p.chunk_len, sh.tile_tokens));
    if (!dry) launch_timed_prefix_wgmma(b.dtype, b.head_size, b.block_size, pa, t, s);
  }
  void prefix_reduce(const kernels::V2Args& pre, cudaStream_t s) {
    const unsigned long long warps =
        static_cast<unsigned long long>(pre.base.num_heads) * pre.base.num_seqs * (kernels::kV2ReduceThreads / 32);
    const TimingTracer t = take(KernelRole::prefix_reduce, warps, kReduceBound);
    if (!dry) kernels::launch_v2_reduce<T>(pre, s, t);
  }
  void suffix(const OptimizedArgs& o, const OptimizedPlan& plan, void* ws, cudaStream_t s) {
    if (plan.head_tiles != 1)
      throw std::invalid_argument("timeline of the cascade: the suffix needs 2 head tiles (GQA groups over 8); "
                                  "timed: groups of at most 8");
    const dim3 grid(plan.splits, plan.units, o.num_seqs);
    const TimingTracer t = take(KernelRole::suffix, 4ull * grid.x * grid.y * grid.z, opt_spans_per_warp(plan));
    if (dry) return;
    const opt::OptParams prm = opt::opt_make_params(o, plan, ws);
    if (plan.pipeline == OptPipeline::lean) launch_suffix<OptConfig<DT, 128, 16, 1, 0, kOptLeanPipeKB>>(prm, grid, t, s);
    else launch_suffix<OptConfig<DT, 128, 16, 1>>(prm, grid, t, s);
  }
  template <class Cfg>
  static void launch_suffix(const opt::OptParams& prm, dim3 grid, const TimingTracer& t, cudaStream_t s) {
    static_assert(Cfg::kNumThreads == 128, "4 warps per CTA, as counted above");
    // Once, as launch_optimized's entry does: the overhead's timed launches
    // must not pay host work that the untimed cascade does not.
    static const bool prepared = opt::opt_prepare_traced<Cfg, TimingTracer>() > 0;
    if (!prepared) PA_CUDA_CHECK(cudaGetLastError());
    opt::opt_launch_traced<Cfg, TimingTracer>(prm, grid, t, s);
    PA_CUDA_CHECK(cudaGetLastError());
  }
  void v2(const kernels::V2Args&, cudaStream_t) {
    throw std::invalid_argument("timeline of the cascade: the plan runs V2 (a V2 suffix, or no shared prefix); "
                                "timed: a shared prefix with the stage 8 suffix");
  }
  void merge(const kernels::MergeArgs& m, cudaStream_t s) {
    const std::int64_t rows = static_cast<std::int64_t>(m.num_seqs) * m.num_heads;
    const MergeGrid g = merge_grid(rows, m.head_size);
    const TimingTracer t =
        take(KernelRole::merge, static_cast<unsigned long long>(g.blocks) * (MergeGrid::kThreads / 32), kMergeBound);
    if (!dry) kernels::launch_merge_kernel<T, TimingTracer>(m, s, t);
  }
};

template <DType DT>
TimedLaunch timed_launch_of(kernels::StageRunner& runner) {
  TimedLaunch tl;
  auto walk = [&runner](TimedCascade<DT>& L) {
    kernels::cascade_pipeline::run(runner.stage_args(), runner.cascade_plan(), runner.workspace(), nullptr, nullptr,
                                   kernels::CascadeParts::all, L);
  };
  tl.slots = [walk](unsigned min_per_warp) {
    TimedCascade<DT> L;
    L.min_per_warp = min_per_warp;
    L.dry = true;
    walk(L);
    return L.next_slot;
  };
  tl.launch = [walk](const TimingTracer& t, unsigned min_per_warp) {
    TimedCascade<DT> L;
    L.base = t;
    L.min_per_warp = min_per_warp;
    walk(L);
  };
  return tl;
}

}  // namespace

bool can_time_cascade(const ProblemSpec& s) {
  return s.shared_prefix_len > 0 && timed_prefix_wgmma_built(s.dtype, s.head_size, s.block_size) &&
         s.num_heads / s.num_kv_heads <= 8;
}

TimedLaunch cascade_timed_launch(kernels::StageRunner& runner, const PagedProblem& p, TimelineRecording& r) {
  const kernels::CascadePlan& plan = runner.cascade_plan();
  r.plan = plan.describe();
  r.warps_per_block = 0;  // 12 in the prefix kernel, 4 in the others
  TimedLaunch tl = p.spec.dtype == DType::f16 ? timed_launch_of<DType::f16>(runner) : timed_launch_of<DType::bf16>(runner);
  (void)tl.slots(0);  // walks the plan once: a part without a timing instance throws here, before any launch
  return tl;
}

}  // namespace pa::trace::detail
