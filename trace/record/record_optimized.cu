// record_optimized: stage 8 run with the recording tracer on the planned grid
// (the launcher's split heuristic with this GPU's SM count and the
// instance's occupancy), the selected CTAs' events copied back in replay
// order, and what the host model needs to reproduce them (model_options:
// device numbers and which CTA arrived last at each arrival counter).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"
#include "record_events.cuh"
#include "record_optimized.cuh"

namespace pa::trace {
namespace detail {

#define PA_X(DT, HS, BS, HT, KV, C)                                    \
  int opt_record_prepare_##DT##_##HS##_##BS##_##HT##_##KV##_##C();     \
  void opt_record_launch_##DT##_##HS##_##BS##_##HT##_##KV##_##C(const opt::OptParams&, dim3, const OptRecordingTracer&, \
                                                                cudaStream_t);
PA_TRACE_OPT_CONFIGS(PA_X)
#undef PA_X

bool opt_record_fns(DType dt, KvDType kv, bool token_rows, int head_size, int block_size, int head_tiles,
                    OptRecordFns& f) {
#define PA_X(DT, HS, BS, HT, KV, C)                                                                               \
  if (dt == DType::DT && kv == KvDType::KV && token_rows == (std::string_view(#C) == "rows") && head_size == HS &&  \
      block_size == BS && head_tiles == HT) {                                                                     \
    f = {&opt_record_prepare_##DT##_##HS##_##BS##_##HT##_##KV##_##C, &opt_record_launch_##DT##_##HS##_##BS##_##HT##_##KV##_##C}; \
    return true;                                                                                                  \
  }
  PA_TRACE_OPT_CONFIGS(PA_X)
#undef PA_X
  return false;
}

bool can_record_optimized(const ProblemSpec& s) {
  if (s.num_threads != 128 || s.num_kv_heads < 1 || s.num_heads % s.num_kv_heads != 0) return false;
  OptRecordFns f{};
  return opt_record_fns(s.dtype, s.kv_dtype, kv_layout_token_rows(s.kv_layout), s.head_size, s.block_size,
                        opt_head_tiles(s.num_heads / s.num_kv_heads), f);
}

std::string recordable_optimized_text() {
  std::string s = "stage optimized (dtype head block head-tiles[/fp8 cache][/nhd+hnd]):";
#define PA_X(DT, HS, BS, HT, KV, C)                                                  \
  s += std::string(" ") + dtype_name(DType::DT) + "/" #HS "/" #BS "/" #HT +        \
       (is_fp8(KvDType::KV) ? std::string("/") + kv_dtype_name(KvDType::KV) : std::string()) + \
       (std::string_view(#C) == "rows" ? "/nhd+hnd" : "");
  PA_TRACE_OPT_CONFIGS(PA_X)
#undef PA_X
  return s + " (head tiles 1: GQA groups <= 8 heads, 2: 9..16 and more)";
}

}  // namespace detail

RecordResult record_optimized(const PagedProblem& p, const Selection& sel, int force_splits,
                              unsigned long long initial_capacity) {
  const ProblemSpec& s = p.spec;
  s.validate();
  if (const std::string why = kv_cache_refusal(s, Stage::optimized); !why.empty())
    throw std::invalid_argument("record_optimized: " + why);
  if (!detail::can_record_optimized(s)) {
    throw std::invalid_argument(std::string("record_optimized: no recording instance for ") + dtype_name(s.dtype) +
                                (is_fp8(s.kv_dtype) ? std::string(" kv ") + kv_dtype_name(s.kv_dtype) : "") +
                                " layout " + kv_layout_name(s.kv_layout) +
                                " head " + std::to_string(s.head_size) + " block " + std::to_string(s.block_size) +
                                " with " + std::to_string(s.num_heads) + "/" + std::to_string(s.num_kv_heads) +
                                " heads (recordable: " + detail::recordable_optimized_text() +
                                "); the host model covers every configuration");
  }
  RecordResult res;
  const kernels::GpuInfo gi = kernels::gpu_info();  // throws NoGpuError without a GPU
  res.gpu_name = gi.name;
  const int group = s.num_heads / s.num_kv_heads;
  detail::OptRecordFns fns{};
  detail::opt_record_fns(s.dtype, s.kv_dtype, kv_layout_token_rows(s.kv_layout), s.head_size, s.block_size,
                         opt_head_tiles(group), fns);

  // The plan, as the launcher makes it on this GPU.
  ModelOptions opts;
  opts.optimized.sm_count = gi.sm_count;
  opts.optimized.dram_gbps = gi.dram_peak_gbps;
  opts.optimized.ctas_per_sm = std::max(1, fns.prepare());
  opts.optimized.force_splits = force_splits;
  PA_CUDA_CHECK(cudaGetLastError());
  const OptimizedModelPlan mp = optimized_model_plan(s, opts.optimized);
  const std::vector<BlockId> blocks = resolve_selection(s, Stage::optimized, sel, opts);
  if (blocks.size() > static_cast<std::size_t>(kernels::kMaxTracedBlocks)) {
    throw std::invalid_argument("record_optimized: " + std::to_string(blocks.size()) +
                                " selected CTAs (accepted: at most " + std::to_string(kernels::kMaxTracedBlocks) + ")");
  }

  const kernels::DeviceInputs in(p);  // the cache in the spec's layout
  const std::size_t out_elems = static_cast<std::size_t>(p.num_seqs()) * s.num_heads * s.head_size;
  kernels::DeviceBuffer out(out_elems * dtype_bytes(s.dtype));
  kernels::StageArgs base = in.args();
  base.out = out.get();
  OptimizedArgs a = kernels::optimized_args(base);
  OptimizedPlan plan;
  plan.head_tiles = mp.head_tiles;
  plan.head_chunks = mp.head_chunks;
  plan.units = mp.units;
  plan.splits = mp.splits;
  plan.split_blocks = mp.split_blocks;
  // Where this build also holds the normal (NullTracer) kernel, its planner
  // must choose the same grid: the recording is what pa-lab run launches.
  if (optimized_supported(s.dtype, s.head_size, s.block_size, s.kv_dtype, s.kv_layout)) {
    const OptimizedPlan real = plan_optimized(a, force_splits);
    if (real.splits != mp.splits || real.split_blocks != mp.split_blocks || real.units != mp.units) {
      throw std::logic_error("record_optimized: plan_optimized chose " + real.describe() +
                             " but the recording plan is splits=" + std::to_string(mp.splits) +
                             " split_blocks=" + std::to_string(mp.split_blocks) + " units=" + std::to_string(mp.units));
    }
  }
  const OptWorkspaceGeometry wsg{a.num_seqs, mp.units, mp.splits, s.head_size};
  kernels::DeviceBuffer ws(std::max<std::size_t>(mp.splits > 1 ? wsg.total_bytes() : 0, 1));
  ws.fill_bytes(0);  // arrival counters start at 0 (the last CTA leaves them at 0)
  const opt::OptParams prm = opt::opt_make_params(a, plan, ws.get());
  const dim3 grid(mp.splits, mp.units, a.num_seqs);

  detail::OptRecordingTracer proto{};
  proto.group = group;
  proto.head_chunks = mp.head_chunks;
  detail::record_events(proto, blocks, initial_capacity, "record_optimized: the event count changed between two runs",
                        res, [&](const detail::OptRecordingTracer& t) {
                          out.fill_bytes(0xFF);
                          fns.launch(prm, grid, t, nullptr);
                          PA_CUDA_CHECK(cudaGetLastError());
                        });
  // Which CTA arrived last at each selected (sequence, unit): the one whose
  // split_arrive atomic reports 1; none selected: -1 (an unselected CTA).
  for (const BlockId& b : blocks) {
    const int unit = opt_unit_of_head(b.head, mp.group, mp.head_chunks);
    auto& la = opts.optimized.last_arrivals;
    if (std::any_of(la.begin(), la.end(), [&](const auto& x) { return x.seq == b.seq && x.unit == unit; })) continue;
    int merger = -1;
    for (const Event& e : res.events) {
      if (e.step == Step::split_arrive && e.op == Op::atomic && e.value == 1.f && e.seq == b.seq && e.head == b.head)
        merger = e.partition;
    }
    la.push_back({b.seq, unit, merger});
  }
  res.model_options = opts;
  return res;
}

}  // namespace pa::trace
