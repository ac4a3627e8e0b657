// The multi-level cascade over host problems (run_multilevel_cascade,
// time_multilevel_cascade in pa/kernels/multilevel_cascade.hpp): upload,
// poison, launch, copy back; or time the cascade and its parts.
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/kernels/multilevel_cascade.hpp"
#include "pa/kernels/runner.hpp"

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#endif

namespace pa::kernels {

// Plain C++, so it exists in builds without CUDA too.
std::string MultiLevelPlan::describe() const {
  std::ostringstream o;
  o << "multi-level cascade: " << num_levels << " levels over " << num_requests << " requests; ";
  int level = -1;
  for (const MultiLevelJob& j : jobs) {
    if (j.level != level) {
      level = j.level;
      o << "level " << level << (reordered[level] ? " (Q reordered)" : "") << ": ";
    }
    o << "[group " << j.group << ": " << j.members << " x " << j.tokens << " tokens, " << j.num_chunks << " chunks of "
      << j.chunk_len << "] ";
  }
  o << "prefix kernel " << prefix_kernel_name(prefix_kernel) << " on " << streams << " stream(s); last level: stage 8 ("
    << last.splits << " splits of " << last.split_blocks << " blocks); workspace "
    << static_cast<double>(workspace_bytes) / (1024.0 * 1024.0) << " MiB";
  return o.str();
}

#if PA_HAVE_CUDA
namespace {

// The queries' Q and the pool's pages as one launch shape.
StageArgs cascade_inputs(const DeviceInputs& q, const DeviceInputs& kv) {
  StageArgs b = q.args();
  const StageArgs pool = kv.args();
  b.k_cache = pool.k_cache;
  b.v_cache = pool.v_cache;
  b.cg = pool.cg;
  b.block_tables = nullptr;  // the cascade's own tables are read instead
  b.context_lens = nullptr;
  return b;
}

// The queries, once checked to have the pool's shape.
const PagedProblem& same_shape_queries(const PagedProblem& queries, const PagedProblem& pool) {
  const ProblemSpec &a = queries.spec, &b = pool.spec;
  if (a.dtype != b.dtype || a.head_size != b.head_size || a.num_heads != b.num_heads ||
      a.num_kv_heads != b.num_kv_heads || a.block_size != b.block_size)
    throw std::invalid_argument(
        "multi-level cascade: the queries' and the pool's problems differ in dtype, head size, heads, KV heads or "
        "block size; accepted: the same (make_cascade_problem builds both)");
  return queries;
}

// What running and timing the cascade both start from: the problems checked
// (before anything is uploaded), uploaded, the cascade planned over them and
// its output buffer. The run reads the uploads, so they live together.
struct CascadeOnDevice {
  CascadeOnDevice(const PagedProblem& queries, const PagedProblem& pool, const MultiLevelCascade& c,
                  const MultiLevelOptions& opt)
      : q(same_shape_queries(queries, pool)),
        kv(pool),
        run(cascade_inputs(q, kv), c, opt),
        out(static_cast<std::size_t>(c.num_requests) * queries.spec.num_heads * queries.spec.head_size *
            dtype_bytes(queries.spec.dtype)) {}

  DeviceInputs q, kv;  // declared before run: it is built from them
  MultiLevelCascadeRun run;
  DeviceBuffer out;
};

}  // namespace

MultiLevelResult run_multilevel_cascade(const PagedProblem& queries, const PagedProblem& pool,
                                        const MultiLevelCascade& c, const MultiLevelOptions& opt) {
  CascadeOnDevice d(queries, pool, c, opt);
  MultiLevelCascadeRun& run = d.run;
  const int R = c.num_requests, H = queries.spec.num_heads, hs = queries.spec.head_size, L = c.num_levels();
  const std::size_t rows = static_cast<std::size_t>(R) * H;
  DeviceBuffer& out = d.out;
  DeviceBuffer lse(rows * 4);
  out.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
  // The level states too: a row no kernel writes stays NaN.
  PA_CUDA_CHECK(cudaMemset(const_cast<float*>(run.states_out()), 0xFF, L * rows * hs * 4));
  PA_CUDA_CHECK(cudaMemset(const_cast<float*>(run.states_lse()), 0xFF, L * rows * 4));
  run.launch(out.get(), static_cast<float*>(lse.get()));
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  MultiLevelResult r;
  r.plan = run.plan().describe();
  r.out = download_decoded(out, rows * hs, queries.spec.dtype);
  r.lse = download_floats(lse, rows);
  std::vector<float> so(L * rows * hs), sl(L * rows);
  PA_CUDA_CHECK(cudaMemcpy(so.data(), run.states_out(), so.size() * 4, cudaMemcpyDeviceToHost));
  PA_CUDA_CHECK(cudaMemcpy(sl.data(), run.states_lse(), sl.size() * 4, cudaMemcpyDeviceToHost));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  r.level_out.assign(L, std::vector<float>(rows * hs, nan));
  r.level_lse.assign(L, std::vector<float>(rows, nan));
  for (int l = 0; l < L; ++l)
    for (int req = 0; req < R; ++req) {
      const int row = run.level_row(l, req);
      if (row < 0) continue;
      for (int h = 0; h < H; ++h) {
        const std::size_t from = (static_cast<std::size_t>(l) * R + row) * H + h, to = static_cast<std::size_t>(req) * H + h;
        r.level_lse[l][to] = sl[from];
        for (int d = 0; d < hs; ++d) r.level_out[l][to * hs + d] = so[from * hs + d];
      }
    }
  return r;
}

MultiLevelTiming time_multilevel_cascade(const PagedProblem& queries, const PagedProblem& pool,
                                         const MultiLevelCascade& c, int iters, int warmup,
                                         const MultiLevelOptions& opt) {
  CascadeOnDevice d(queries, pool, c, opt);
  MultiLevelCascadeRun& run = d.run;
  DeviceBuffer& out = d.out;
  MultiLevelTiming t;
  t.plan = run.plan().describe();
  t.all_ms = median_of(time_launches_ms([&] { run.launch(out.get()); }, iters, warmup));
  t.shared_ms = median_of(time_launches_ms([&] { run.launch_shared_levels(); }, iters, warmup));
  t.last_ms = median_of(time_launches_ms([&] { run.launch_last_level(); }, iters, warmup));
  return t;
}

#else  // no CUDA: say so

struct MultiLevelCascadeRun::Impl {};
MultiLevelCascadeRun::MultiLevelCascadeRun(const StageArgs&, const MultiLevelCascade&, const MultiLevelOptions&) {
  throw NoGpuError("built without CUDA");
}
MultiLevelCascadeRun::~MultiLevelCascadeRun() = default;
MultiLevelCascadeRun::MultiLevelCascadeRun(MultiLevelCascadeRun&&) noexcept = default;
MultiLevelCascadeRun& MultiLevelCascadeRun::operator=(MultiLevelCascadeRun&&) noexcept = default;
const MultiLevelPlan& MultiLevelCascadeRun::plan() const { throw NoGpuError("built without CUDA"); }
void MultiLevelCascadeRun::launch(void*, float*, void*) { throw NoGpuError("built without CUDA"); }
void MultiLevelCascadeRun::launch_shared_levels(void*) { throw NoGpuError("built without CUDA"); }
void MultiLevelCascadeRun::launch_last_level(void*) { throw NoGpuError("built without CUDA"); }
const float* MultiLevelCascadeRun::states_out() const { throw NoGpuError("built without CUDA"); }
const float* MultiLevelCascadeRun::states_lse() const { throw NoGpuError("built without CUDA"); }
int MultiLevelCascadeRun::level_row(int, int) const { throw NoGpuError("built without CUDA"); }

MultiLevelResult run_multilevel_cascade(const PagedProblem&, const PagedProblem&, const MultiLevelCascade&,
                                        const MultiLevelOptions&) {
  throw NoGpuError("built without CUDA");
}
MultiLevelTiming time_multilevel_cascade(const PagedProblem&, const PagedProblem&, const MultiLevelCascade&, int, int,
                                         const MultiLevelOptions&) {
  throw NoGpuError("built without CUDA");
}

#endif

}  // namespace pa::kernels
