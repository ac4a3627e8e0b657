// Host runners and timers for stages 6 and 7 (v2_cascade_run.hpp).
#include "pa/kernels/v2_cascade_run.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/dtype_convert.hpp"

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

// The problem's inputs (DeviceInputs: no v1 shared-memory validation, V2 and
// the cascade take any context) with `out` as the output.
StageArgs base_args(const DeviceInputs& in, void* out) {
  StageArgs a = in.args();
  a.out = out;
  return a;
}

std::vector<float> download_f32(const DeviceBuffer& b, std::size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}
std::vector<float> download_f32(const float* dev, std::size_t n) {
  std::vector<float> v(n);
  if (n) PA_CUDA_CHECK(cudaMemcpy(v.data(), dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
std::vector<float> download_dtype(const DeviceBuffer& b, std::size_t n, DType t) {
  std::vector<std::uint8_t> bytes(n * dtype_bytes(t));
  b.download(bytes.data(), bytes.size());
  std::vector<float> v(n);
  decode(t, bytes.data(), n, v.data());
  return v;
}

struct V2Buffers {
  int max_partitions;
  DeviceBuffer part_out, part_max, part_sum;
  V2Buffers(const PagedProblem& p, int partition_size, TokenRange range)
      : max_partitions(std::max(
            1, num_partitions_in(range, *std::max_element(p.context_lens.begin(), p.context_lens.end()),
                                 partition_size))),
        part_out(rows(p) * max_partitions * p.spec.head_size * sizeof(float)),
        part_max(rows(p) * max_partitions * sizeof(float)),
        part_sum(rows(p) * max_partitions * sizeof(float)) {}
  static std::size_t rows(const PagedProblem& p) { return static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads; }
  void poison() {
    part_out.fill_bytes(0xFF);
    part_max.fill_bytes(0xFF);
    part_sum.fill_bytes(0xFF);
  }
  V2Args args(const StageArgs& base, int partition_size, TokenRange range) const {
    V2Args a;
    a.base = base;
    a.base.partition_size = partition_size;
    a.range = range;
    a.max_partitions = max_partitions;
    a.part_out = static_cast<float*>(part_out.get());
    a.part_max = static_cast<float*>(part_max.get());
    a.part_sum = static_cast<float*>(part_sum.get());
    a.pg = PartitionGeometry{base.num_heads, max_partitions, base.head_size};
    a.stg = StateGeometry{base.num_heads, base.head_size};
    return a;
  }
};

template <class F>
float time_median(F&& launch, int iters, int warmup) {
  return median_of(time_launches_ms(launch, iters, warmup));
}

}  // namespace

V2Run run_v2(const PagedProblem& p, int partition_size, bool single_partition_direct, TokenRange range) {
  const DeviceInputs in(p);
  const std::size_t rows = V2Buffers::rows(p);
  DeviceBuffer out(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
  DeviceBuffer lse(rows * sizeof(float));
  V2Buffers bufs(p, partition_size, range);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  bufs.poison();
  V2Args a = bufs.args(base_args(in, out.get()), partition_size, range);
  a.lse = static_cast<float*>(lse.get());
  a.single_partition_direct = single_partition_direct;
  launch_v2(a);
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  V2Run r;
  r.partition_size = partition_size;
  r.max_partitions = bufs.max_partitions;
  r.pg = a.pg;
  r.out = download_dtype(out, rows * p.spec.head_size, p.spec.dtype);
  r.lse = download_f32(lse, rows);
  r.part_out = download_f32(bufs.part_out, rows * bufs.max_partitions * p.spec.head_size);
  r.part_max = download_f32(bufs.part_max, rows * bufs.max_partitions);
  r.part_sum = download_f32(bufs.part_sum, rows * bufs.max_partitions);
  return r;
}

CascadeRun run_cascade(const PagedProblem& p, int chunk_len, const CascadeOptions& opt) {
  const DeviceInputs in(p);
  const std::size_t rows = V2Buffers::rows(p);
  const std::size_t n = rows * p.spec.head_size;
  DeviceBuffer out(n * dtype_bytes(p.spec.dtype));
  DeviceBuffer lse(rows * sizeof(float));
  const StageArgs base = base_args(in, out.get());
  CascadeRun r;
  r.plan = plan_cascade(base, p.spec.shared_prefix_len, chunk_len, opt);
  DeviceBuffer ws(r.plan.workspace_bytes);
  ws.fill_bytes(0xFF);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  const CascadeStates st = launch_cascade(base, r.plan, ws.get(), static_cast<float*>(lse.get()));
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  r.out = download_dtype(out, n, p.spec.dtype);
  r.lse = download_f32(lse, rows);
  if (st.prefix_out != nullptr) {
    r.prefix_out = download_f32(st.prefix_out, n);
    r.prefix_lse = download_f32(st.prefix_lse, rows);
    r.suffix_out = download_f32(st.suffix_out, n);
    r.suffix_lse = download_f32(st.suffix_lse, rows);
  }
  return r;
}

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
  return {download_dtype(out, n, out_dtype), download_f32(lse, rows)};
}

float time_v2(const PagedProblem& p, int partition_size, int iters, int warmup) {
  const DeviceInputs in(p);
  const std::size_t rows = V2Buffers::rows(p);
  DeviceBuffer out(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
  V2Buffers bufs(p, partition_size, {});
  const V2Args a = bufs.args(base_args(in, out.get()), partition_size, {});
  return time_median([&] { launch_v2(a); }, iters, warmup);
}

CascadeTiming time_cascade(const PagedProblem& p, int iters, int warmup, bool baselines, const CascadeOptions& opt) {
  const DeviceInputs in(p);
  const std::size_t rows = V2Buffers::rows(p);
  DeviceBuffer out(rows * p.spec.head_size * dtype_bytes(p.spec.dtype));
  const StageArgs base = base_args(in, out.get());
  CascadeTiming t;
  const CascadePlan plan = plan_cascade(base, p.spec.shared_prefix_len, 0, opt);
  t.plan = plan.describe();
  {
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
  {  // V2 over the same block tables (the prefix blocks read once per sequence)
    V2Buffers bufs(p, p.spec.partition_size, {});
    const V2Args a = bufs.args(base, p.spec.partition_size, {});
    t.v2_ms = time_median([&] { launch_v2(a); }, iters, warmup);
  }
  const int max_ctx = base.max_context_len;
  if (max_ctx <= v1_max_context(p.spec.dtype, p.spec.head_size, p.spec.num_threads, gpu_info().smem_optin_bytes)) {
    t.v1_ms = time_median([&] { launch_stage(Stage::warp_reduce, base); }, iters, warmup);
  } else {
    t.notes += "v1: context " + std::to_string(max_ctx) + " exceeds its shared-memory limit; ";
  }
  try {  // stage 8, when built for this configuration
    OptimizedArgs o = optimized_args(base);
    o.out = out.get();
    const OptimizedPlan op = plan_optimized(o);
    DeviceBuffer ws(std::max<std::size_t>(op.workspace_bytes, 16));
    ws.fill_bytes(0);
    t.optimized_ms = time_median([&] { launch_optimized(o, op, ws.get()); }, iters, warmup);
  } catch (const std::exception& e) {
    t.notes += std::string("optimized: ") + e.what() + "; ";
  }
  return t;
}

#else  // no CUDA: say so

V2Run run_v2(const PagedProblem&, int, bool, TokenRange) { throw NoGpuError("built without CUDA"); }
CascadeRun run_cascade(const PagedProblem&, int, const CascadeOptions&) { throw NoGpuError("built without CUDA"); }
MergeRun run_merge(const std::vector<float>&, const std::vector<float>&, const std::vector<float>&,
                   const std::vector<float>&, int, int, int, DType) {
  throw NoGpuError("built without CUDA");
}
CascadeTiming time_cascade(const PagedProblem&, int, int, bool, const CascadeOptions&) {
  throw NoGpuError("built without CUDA");
}
float time_v2(const PagedProblem&, int, int, int) { throw NoGpuError("built without CUDA"); }

#endif

}  // namespace pa::kernels
