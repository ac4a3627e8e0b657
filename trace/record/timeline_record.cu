// record_timeline: a stage's kernel instantiated with the timing tracer for a
// few configurations, launched as pa-lab run launches it (stage 5: one block
// per (head, sequence); stage 8: the grid plan_optimized chooses on this GPU),
// its spans copied back; and the same launch timed with the normal
// (NullTracer) kernel and with the timing one, on the same device buffers, for
// the tracer's overhead.
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>

#include "08_optimized.cuh"
#include "06_v2_partition.cuh"
#include "launch.cuh"
#include "pa/core/dtype_convert.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/timing_tracer.cuh"
#include "pa/trace/timeline_record.hpp"
#include "timeline_cascade.hpp"

namespace pa::trace {
namespace {

// The timed instances: the README's benchmark shapes (head 128, block 16; for
// stage 8 GQA groups of at most 8 heads: head tiles 1). Each is a whole kernel
// instance to compile, so the lists stay short. X(dtype, head, block[, tiles]);
// stage 6 (V2) uses the v1 list.
#define PA_TIMELINE_V1_CONFIGS(X) X(f16, 128, 16) X(bf16, 128, 16)
#define PA_TIMELINE_OPT_CONFIGS(X) X(f16, 128, 16, 1) X(bf16, 128, 16, 1)

using V1Launch = void (*)(const kernels::StageArgs&, kernels::TimingTracer, cudaStream_t);
using V2Launch = void (*)(const kernels::V2Args&, kernels::TimingTracer, cudaStream_t);
bool timed_v1(DType dt, int head_size, int block_size, V1Launch& f) {
#define PA_X(DT, HS, BS)                                                                          \
  if (dt == DType::DT && head_size == HS && block_size == BS) {                                   \
    f = &kernels::launch_stage_kernel<Stage::warp_reduce, KernelConfig<DType::DT, HS, BS, 128>,   \
                                      kernels::TimingTracer>;                                     \
    return true;                                                                                  \
  }
  PA_TIMELINE_V1_CONFIGS(PA_X)
#undef PA_X
  return false;
}

bool timed_v2(DType dt, int head_size, int block_size, V2Launch& f) {
#define PA_X(DT, HS, BS)                                                                          \
  if (dt == DType::DT && head_size == HS && block_size == BS) {                                   \
    f = &kernels::launch_v2_kernels<KernelConfig<DType::DT, HS, BS, 128>, kernels::TimingTracer>; \
    return true;                                                                                  \
  }
  PA_TIMELINE_V1_CONFIGS(PA_X)
#undef PA_X
  return false;
}

struct TimedOptFns {
  int (*prepare)();
  void (*launch)(const opt::OptParams&, dim3, const kernels::TimingTracer&, cudaStream_t);
};
bool timed_opt(DType dt, int head_size, int block_size, int head_tiles, TimedOptFns& f) {
#define PA_X(DT, HS, BS, HT)                                                                     \
  if (dt == DType::DT && head_size == HS && block_size == BS && head_tiles == HT) {             \
    using Cfg = OptConfig<DType::DT, HS, BS, HT>;                                                \
    f = {&opt::opt_prepare_traced<Cfg, kernels::TimingTracer>,                                   \
         &opt::opt_launch_traced<Cfg, kernels::TimingTracer>};                                   \
    return true;                                                                                 \
  }
  PA_TIMELINE_OPT_CONFIGS(PA_X)
#undef PA_X
  return false;
}

kernels::TimingTracer tracer_for(Stage stage, Span* spans, unsigned long long* count) {
  kernels::TimingTracer t;
  t.spans = spans;
  t.count = count;
  t.stage = stage;
  t.kernel = KernelRole::main;
  return t;
}

// Span slots per warp (TimelineOptions::spans_per_warp may raise them): what
// each stage's hooks end at most (a warp that needs more makes
// record_timeline run once more with room for it, and the tests check that it
// did not have to). v1: its five steps. V2: the same and partition_store; a
// reduce warp ends one. Stage 8: opt_spans_per_warp (timeline_cascade.hpp).
constexpr unsigned kV1SpansPerWarp = 5, kV2SpansPerWarp = 6;
// 4 GiB of spans at most, a limit on device memory, not on the format.
constexpr unsigned long long kMaxSpanSlots = (4ull << 30) / sizeof(Span);

}  // namespace

std::string timeline_instances_text() {
  std::string s = "stages warp_reduce and v2_partition (dtype head block):";
#define PA_X(DT, HS, BS) s += std::string(" ") + dtype_name(DType::DT) + "/" #HS "/" #BS;
  PA_TIMELINE_V1_CONFIGS(PA_X)
#undef PA_X
  s += "; stage optimized (dtype head block head-tiles):";
#define PA_X(DT, HS, BS, HT) s += std::string(" ") + dtype_name(DType::DT) + "/" #HS "/" #BS "/" #HT;
  PA_TIMELINE_OPT_CONFIGS(PA_X)
#undef PA_X
  s += " (head tiles 1: GQA groups of at most 8 heads); stage cascade_merge: fp16/128/16 and bf16/128/16 with a "
       "shared prefix, GQA groups of at most 8, the wgmma prefix kernel and the stage 8 suffix (sm_90); "
       "all with a KV cache in the query's dtype (no timed fp8 instances)";
  return s;
}

bool can_record_timeline(Stage stage, const ProblemSpec& s) {
  if (s.num_threads != 128 || s.num_kv_heads < 1 || s.num_heads % s.num_kv_heads != 0) return false;
  if (is_fp8(s.kv_dtype)) return false;  // the timed instances read caches in the query's dtype only
  if (stage == Stage::warp_reduce) {
    V1Launch f = nullptr;
    return timed_v1(s.dtype, s.head_size, s.block_size, f);
  }
  if (stage == Stage::v2_partition) {
    V2Launch f = nullptr;
    return timed_v2(s.dtype, s.head_size, s.block_size, f);
  }
  if (stage == Stage::optimized) {
    TimedOptFns f{};
    return timed_opt(s.dtype, s.head_size, s.block_size, opt_head_tiles(s.num_heads / s.num_kv_heads), f);
  }
  if (stage == Stage::cascade_merge) return detail::can_time_cascade(s);
  return false;
}

TimelineRecording record_timeline(Stage stage, const PagedProblem& p, const TimelineOptions& o) {
  const ProblemSpec& s = p.spec;
  s.validate();
  if (!can_record_timeline(stage, s)) {
    throw std::invalid_argument(std::string("record_timeline: no timing instance for stage ") + to_string(stage) +
                                ", " + dtype_name(s.dtype) + " head " + std::to_string(s.head_size) + " block " +
                                std::to_string(s.block_size) + " with " + std::to_string(s.num_heads) + "/" +
                                std::to_string(s.num_kv_heads) + " heads (timed: " + timeline_instances_text() + ")");
  }
  if (o.spans_per_warp < 0 || o.timing_iters < 1 || o.timing_warmup < 0) {
    throw std::invalid_argument("record_timeline: spans_per_warp=" + std::to_string(o.spans_per_warp) +
                                ", timing_iters=" + std::to_string(o.timing_iters) + ", timing_warmup=" +
                                std::to_string(o.timing_warmup) + ": need >= 0 (0: each kernel's bound), >= 1 and >= 0");
  }
  const kernels::GpuInfo gi = kernels::gpu_info();  // throws NoGpuError without a GPU
  TimelineRecording r;
  r.gpu_name = gi.name;
  r.sm_count = gi.sm_count;
  r.stage = stage;
  int dev = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&r.sm_clock_khz, cudaDevAttrClockRate, dev));
  r.warps_per_block = s.num_threads / 32;

  // The arguments pa-lab run launches with (StageRunner: stage 6 over the
  // whole context, out and lse written, single-partition sequences direct;
  // stage 8 with the same split count), and the untimed median from the runner
  // itself. Stage 8's timed instance takes OptParams: its plan is made again
  // from the same arguments, so it is the runner's.
  const std::size_t out_elems = static_cast<std::size_t>(p.num_seqs()) * s.num_heads * s.head_size;
  kernels::RunOptions ro;
  ro.splits = o.force_splits;
  kernels::StageRunner runner(p, stage, ro);
  const kernels::StageArgs& base = runner.stage_args();

  // The launch with a given tracer: each stage's slot layout and kernels.
  detail::TimedLaunch tl;
  kernels::DeviceBuffer ws;
  opt::OptParams prm{};
  // One kernel of `warps` warps (stage 6: and its reduce, the same bound per
  // warp, its slots after the partition kernel's).
  auto single = [](unsigned long long warps, unsigned bound, auto&& launch) {
    detail::TimedLaunch one;
    one.slots = [warps, bound](unsigned min_per_warp) { return warps * std::max(bound, min_per_warp); };
    one.launch = [bound, launch](const kernels::TimingTracer& t, unsigned min_per_warp) {
      launch(t.for_kernel(KernelRole::main, 0, std::max(bound, min_per_warp)));
    };
    return one;
  };
  if (stage == Stage::warp_reduce) {
    V1Launch f = nullptr;
    timed_v1(s.dtype, s.head_size, s.block_size, f);
    r.plan = "v1: one block per (head, sequence), " + std::to_string(s.num_threads) + " threads";
    r.grid_blocks = s.num_heads * p.num_seqs();
    tl = single(static_cast<unsigned long long>(r.grid_blocks) * r.warps_per_block, kV1SpansPerWarp,
                [&base, f](const kernels::TimingTracer& t) { f(base, t, nullptr); });
  } else if (stage == Stage::v2_partition) {
    V2Launch f = nullptr;
    timed_v2(s.dtype, s.head_size, s.block_size, f);
    const kernels::V2Args& v2 = runner.v2_args();
    r.plan = "v2: partitions of " + std::to_string(v2.base.partition_size) + " tokens, grid (heads, sequences, " +
             std::to_string(v2.max_partitions) + ") then the reduce, grid (heads, sequences)";
    r.grid_blocks = s.num_heads * p.num_seqs() * v2.max_partitions;  // the partition kernel's; the reduce's are fewer
    const unsigned long long reduce_warps =
        static_cast<unsigned long long>(s.num_heads) * p.num_seqs() * (kernels::kV2ReduceThreads / 32);
    tl = single(static_cast<unsigned long long>(r.grid_blocks) * r.warps_per_block + reduce_warps, kV2SpansPerWarp,
                [&v2, f](const kernels::TimingTracer& t) { f(v2, t, nullptr); });
  } else if (stage == Stage::cascade_merge) {
    tl = detail::cascade_timed_launch(runner, p, r);
  } else {
    TimedOptFns f{};
    timed_opt(s.dtype, s.head_size, s.block_size, opt_head_tiles(s.num_heads / s.num_kv_heads), f);
    if (f.prepare() <= 0) PA_CUDA_CHECK(cudaGetLastError());
    const OptimizedArgs a = kernels::optimized_args(base);
    const OptimizedPlan plan = plan_optimized(a, o.force_splits);
    r.plan = plan.describe();
    ws = kernels::DeviceBuffer(std::max<std::size_t>(plan.workspace_bytes, 1));
    ws.fill_bytes(0);  // arrival counters start at 0 (the last CTA leaves them at 0)
    prm = opt::opt_make_params(a, plan, ws.get());
    const dim3 grid(plan.splits, plan.units, a.num_seqs);
    r.grid_blocks = static_cast<int>(grid.x * grid.y * grid.z);
    tl = single(static_cast<unsigned long long>(r.grid_blocks) * r.warps_per_block, detail::opt_spans_per_warp(plan),
                [&prm, f, grid](const kernels::TimingTracer& t) { f.launch(prm, grid, t, nullptr); });
  }

  // Every warp its own slots (TimingTracer): the buffer holds each kernel's
  // warps x its bound. A warp that needed more raised the counter to the
  // number it wanted: once more with every bound at least that.
  unsigned min_per_warp = static_cast<unsigned>(o.spans_per_warp);
  unsigned long long slots = 0;
  kernels::DeviceBuffer buf, counter(sizeof(unsigned long long));
  auto tracer = [&] {
    return tracer_for(stage, static_cast<Span*>(buf.get()), static_cast<unsigned long long*>(counter.get()));
  };
  for (int attempt = 0;; ++attempt) {
    slots = tl.slots(min_per_warp);
    if (slots > kMaxSpanSlots) {
      throw std::invalid_argument("record_timeline: " + std::to_string(slots) + " span slots (48 bytes each) is more than " +
                                  std::to_string(kMaxSpanSlots) + ": time a smaller problem");
    }
    buf = kernels::DeviceBuffer(slots * sizeof(Span));
    auto zero = [&] {
      PA_CUDA_CHECK(cudaMemset(buf.get(), 0, slots * sizeof(Span)));  // unfilled slots stay empty
      PA_CUDA_CHECK(cudaMemset(counter.get(), 0, sizeof(unsigned long long)));
    };
    if (attempt == 0) {
      // One launch first, not kept: a kernel's first launch loads its code
      // (CUDA's lazy module loading), which would show as a gap of hundreds
      // of microseconds before it (the cascade's prefix kernel: 275 us).
      zero();
      tl.launch(tracer(), min_per_warp);
      PA_CUDA_CHECK(cudaGetLastError());
      PA_CUDA_CHECK(cudaDeviceSynchronize());
    }
    zero();
    runner.poison_outputs();
    tl.launch(tracer(), min_per_warp);
    PA_CUDA_CHECK(cudaGetLastError());
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    ++r.launches;
    unsigned long long wanted = 0;
    PA_CUDA_CHECK(cudaMemcpy(&wanted, counter.get(), sizeof wanted, cudaMemcpyDeviceToHost));
    if (wanted == 0) break;
    if (attempt == 1) throw std::runtime_error("record_timeline: the span count changed between two runs");
    min_per_warp = static_cast<unsigned>(wanted);
  }
  r.spans.resize(static_cast<std::size_t>(slots));
  PA_CUDA_CHECK(cudaMemcpy(r.spans.data(), buf.get(), r.spans.size() * sizeof(Span), cudaMemcpyDeviceToHost));
  std::erase_if(r.spans, [](const Span& x) { return kernels::TimingTracer::empty_slot(x); });
  std::sort(r.spans.begin(), r.spans.end(), [](const Span& x, const Span& y) {
    return std::tie(x.kernel, x.block, x.warp, x.t_begin_ns, x.clk_begin) <
           std::tie(y.kernel, y.block, y.warp, y.t_begin_ns, y.clk_begin);
  });
  // Sorted by warp: a warp's spans stand together.
  for (std::size_t i = 0; i < r.spans.size(); ++i) {
    const Span& x = r.spans[i];
    if (i == 0 || std::tie(x.kernel, x.block, x.warp) !=
                      std::tie(r.spans[i - 1].kernel, r.spans[i - 1].block, r.spans[i - 1].warp))
      ++r.warps;
  }
  {  // the timed launch's output, wherever the stage writes it
    std::vector<std::uint8_t> bytes(out_elems * dtype_bytes(s.dtype));
    PA_CUDA_CHECK(cudaMemcpy(bytes.data(), base.out, bytes.size(), cudaMemcpyDeviceToHost));
    r.out.resize(out_elems);
    decode(s.dtype, bytes.data(), out_elems, r.out.data());
  }

  // The overhead: the same launch, untimed (the runner's normal instance) and
  // timed into the buffer above, which has room for every span (so every
  // launch stores all of them).
  const kernels::TimingTracer all = tracer();
  r.untimed_ms = runner.time(o.timing_iters, o.timing_warmup).median_ms;
  r.timed_ms = kernels::median_of(kernels::time_indexed_launches_ms(
      [&](int) { tl.launch(all, min_per_warp); }, o.timing_iters, o.timing_warmup, [](int) {}));
  return r;
}

}  // namespace pa::trace
