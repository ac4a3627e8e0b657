// Stage 7's merge runner and cascade timings (cascade_run.hpp), and the
// names and description of a cascade plan.
#include "pa/kernels/cascade_run.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/kernels/runner.hpp"

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/optimized.hpp"
#endif

namespace pa::kernels {

const char* prefix_kernel_name(PrefixKernel k) {
  switch (k) {
    case PrefixKernel::automatic: return "automatic";
    case PrefixKernel::mma_4warps: return "mma_4warps";
    case PrefixKernel::mma_8warps: return "mma_8warps";
    case PrefixKernel::wgmma: return "wgmma";
  }
  return "?";
}
std::optional<PrefixKernel> prefix_kernel_from_name(std::string_view name) {
  for (PrefixKernel k : {PrefixKernel::automatic, PrefixKernel::mma_4warps, PrefixKernel::mma_8warps, PrefixKernel::wgmma})
    if (name == prefix_kernel_name(k)) return k;
  return std::nullopt;
}

// Plain C++, so it exists in builds without CUDA too (pa-lab prints plans).
std::string CascadePlan::describe() const {
  std::ostringstream o;
  o << "cascade: prefix " << prefix_len << " tokens";
  if (tensor_cores)
    o << " in " << num_chunks << " chunks of " << chunk_len << " (prefix kernel " << prefix_kernel_name(prefix_kernel)
      << ", " << query_tiles << " query tiles/KV head)";
  else
    o << " by the V2 kernel per sequence (fp32: no shared-prefix kernel)";
  if (suffix == Suffix::v2) o << ", suffix V2 partition " << partition_size << " x " << suffix_partitions;
  else  // (OptimizedPlan::describe lives in the CUDA-only stage 8 library)
    o << ", suffix stage 8 (" << suffix_opt.splits << " splits of " << suffix_opt.split_blocks << " blocks, "
      << suffix_opt.stages << " stages, " << (suffix_opt.pipeline == OptPipeline::lean ? "lean" : "full")
      << " pipeline)";
  o << ", streams mode " << streams
    << ", workspace "
    << workspace_bytes / (1024.0 * 1024.0) << " MiB";
  return o.str();
}

#if PA_HAVE_CUDA
namespace {

template <class F>
float time_median(F&& launch, int iters, int warmup) {
  return median_of(time_launches_ms(launch, iters, warmup));
}

}  // namespace

MergeRun run_merge(const std::vector<float>& a_out, const std::vector<float>& a_lse, const std::vector<float>& b_out,
                   const std::vector<float>& b_lse, int num_seqs, int num_heads, int head_size, DType out_dtype) {
  const std::size_t rows = static_cast<std::size_t>(num_seqs) * num_heads, n = rows * head_size;
  if (a_out.size() != n || b_out.size() != n || a_lse.size() != rows || b_lse.size() != rows)
    throw std::invalid_argument("run_merge: state sizes do not match num_seqs x num_heads x head_size");
  DeviceBuffer ao(n * 4), al(rows * 4), bo(n * 4), bl(rows * 4), out(n * dtype_bytes(out_dtype)), lse(rows * 4);
  ao.upload(a_out.data(), n * 4);
  al.upload(a_lse.data(), rows * 4);
  bo.upload(b_out.data(), n * 4);
  bl.upload(b_lse.data(), rows * 4);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  MergeArgs m;
  m.a_out = static_cast<const float*>(ao.get());
  m.a_lse = static_cast<const float*>(al.get());
  m.b_out = static_cast<const float*>(bo.get());
  m.b_lse = static_cast<const float*>(bl.get());
  m.out = out.get();
  m.out_dtype = out_dtype;
  m.out_lse = static_cast<float*>(lse.get());
  m.num_seqs = num_seqs;
  m.num_heads = num_heads;
  m.head_size = head_size;
  m.stg = StateGeometry{num_heads, head_size};
  launch_merge_states(m);
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  return {download_decoded(out, n, out_dtype), download_floats(lse, rows)};
}

CascadeTiming time_cascade(const PagedProblem& p, int iters, int warmup, bool baselines, const CascadeOptions& opt) {
  CascadeTiming t;
  {  // the cascade, and each of its sides alone (CascadeParts), on one upload
    const DeviceInputs in(p);
    DeviceBuffer out(static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads * p.spec.head_size *
                     dtype_bytes(p.spec.dtype));
    StageArgs base = in.args();
    base.out = out.get();
    const CascadePlan plan = plan_cascade(base, p.spec.shared_prefix_len, 0, opt);
    t.plan = plan.describe();
    DeviceBuffer ws(plan.workspace_bytes);
    t.cascade_ms = time_median([&] { launch_cascade(base, plan, ws.get(), nullptr); }, iters, warmup);
    if (plan.prefix_len > 0) {
      t.prefix_ms = time_median(
          [&] { launch_cascade(base, plan, ws.get(), nullptr, nullptr, CascadeParts::prefix_only); }, iters, warmup);
      t.suffix_ms = time_median(
          [&] { launch_cascade(base, plan, ws.get(), nullptr, nullptr, CascadeParts::suffix_only); }, iters, warmup);
    }
  }
  if (!baselines) return t;
  // The baselines over the same block tables (the prefix blocks read once per
  // sequence), one runner at a time so that one upload is on the device at once.
  t.v2_ms = StageRunner(p, Stage::v2_partition).time(iters, warmup).median_ms;
  const int max_ctx = p.spec.max_context_len();
  if (max_ctx <= v1_max_context(p.spec.dtype, p.spec.head_size, p.spec.num_threads, gpu_info().smem_optin_bytes)) {
    t.v1_ms = StageRunner(p, Stage::warp_reduce).time(iters, warmup).median_ms;
  } else {
    t.notes += "v1: context " + std::to_string(max_ctx) + " exceeds its shared-memory limit; ";
  }
  try {  // stage 8, when built for this configuration
    t.optimized_ms = StageRunner(p, Stage::optimized).time(iters, warmup).median_ms;
  } catch (const std::invalid_argument& e) {
    t.notes += std::string("optimized: ") + e.what() + "; ";
  }
  return t;
}

#else  // no CUDA: say so

MergeRun run_merge(const std::vector<float>&, const std::vector<float>&, const std::vector<float>&,
                   const std::vector<float>&, int, int, int, DType) {
  throw NoGpuError("built without CUDA");
}
CascadeTiming time_cascade(const PagedProblem&, int, int, bool, const CascadeOptions&) {
  throw NoGpuError("built without CUDA");
}

#endif

}  // namespace pa::kernels
