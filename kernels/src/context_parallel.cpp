// Context parallelism, the per-device part (pa/kernels/context_parallel.hpp):
// one shard uploaded and decoded by stage 8 into its attention state, and
// every shard in turn on one device, merged by the merge kernel.
#include "pa/kernels/context_parallel.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "pa/core/shard_problem.hpp"
#include "pa/kernels/api.hpp"

#if PA_HAVE_CUDA
#include <cuda_runtime.h>

#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/kernels/shard_merge.hpp"
#endif

namespace pa::kernels {

const char* state_exchange_name(StateExchange e) {
  return e == StateExchange::all_gather ? "all_gather" : e == StateExchange::sums ? "sums" : "?";
}
std::optional<StateExchange> state_exchange_from_name(std::string_view s) {
  if (s == "all_gather") return StateExchange::all_gather;
  if (s == "sums") return StateExchange::sums;
  return std::nullopt;
}

ShardedStateGeometry sharded_state_geometry(const PagedProblem& p, int num_shards) {
  return ShardedStateGeometry{num_shards, p.num_seqs(), StateGeometry{p.spec.num_heads, p.spec.head_size}};
}

#if PA_HAVE_CUDA

namespace {
// A shard that holds no page at all still gets valid device pointers: one
// zero page, which no block table entry names.
void give_empty_pool_a_page(PagedProblem& l) {
  if (l.num_blocks > 0) return;
  const std::size_t elems = static_cast<std::size_t>(l.cache.block_elems());
  const std::size_t eb = static_cast<std::size_t>(dtype_bytes(l.spec.dtype));
  l.num_blocks = 1;
  l.cache.num_blocks = 1;
  l.k_cache.assign(elems, 0.f);
  l.v_cache.assign(elems, 0.f);
  l.k_bytes.assign(elems * eb, 0);
  l.v_bytes.assign(elems * eb, 0);
}
// Likewise a table with no column (no sequence has a block here).
void give_empty_table_a_column(PagedProblem& l) {
  if (l.max_blocks_per_seq > 0) return;
  l.max_blocks_per_seq = 1;
  l.table = BlockTableGeometry{1};
  l.block_tables.assign(static_cast<std::size_t>(l.num_seqs()), kNoBlock);
}
}  // namespace

struct ShardDecoder::Impl {
  int device = 0, shard = 0;
  std::unique_ptr<PagedProblem> local;  // DeviceInputs keeps a pointer to it: a stable address
  std::unique_ptr<DeviceInputs> in;
  OptimizedArgs args;
  OptimizedPlan plan;
  DeviceBuffer ws;
};

ShardDecoder::ShardDecoder(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  PA_CUDA_CHECK(cudaGetDevice(&m.device));
  m.shard = shard;
  m.local = std::make_unique<PagedProblem>(shard_problem(p, policy, num_shards, shard));
  give_empty_pool_a_page(*m.local);
  give_empty_table_a_column(*m.local);
  m.in = std::make_unique<DeviceInputs>(*m.local);
  m.args = optimized_args(m.in->args());
  m.args.out = nullptr;  // the state is the output
  // The plan's split heuristic sizes the grid by the longest attended range;
  // a shard may hold no token of any sequence (its CTAs then only write empty states).
  m.args.max_context_len = std::max(1, m.local->spec.max_context_len());
  m.plan = plan_optimized(m.args);
  // Arrival counters start at zero once; every launch leaves them there.
  m.ws = DeviceBuffer(std::max<std::size_t>(m.plan.workspace_bytes, 1));
  m.ws.fill_bytes(0);
}

ShardDecoder::~ShardDecoder() = default;
ShardDecoder::ShardDecoder(ShardDecoder&&) noexcept = default;
ShardDecoder& ShardDecoder::operator=(ShardDecoder&&) noexcept = default;

void ShardDecoder::decode(float* state_out, float* state_lse, void* stream) const {
  OptimizedArgs a = impl_->args;
  a.state_out = state_out;
  a.state_lse = state_lse;
  launch_optimized(a, impl_->plan, impl_->ws.get(), stream);
}

int ShardDecoder::device() const { return impl_->device; }
int ShardDecoder::shard() const { return impl_->shard; }
const PagedProblem& ShardDecoder::local() const { return *impl_->local; }
const OptimizedPlan& ShardDecoder::plan() const { return impl_->plan; }
std::int64_t ShardDecoder::kv_bytes() const { return impl_->local->spec.kv_bytes(); }

ShardedRun run_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards) {
  make_shard_plan_checked(policy, num_shards, p.spec.block_size, 0);  // the error names the bad value
  const ShardedStateGeometry g = sharded_state_geometry(p, num_shards);
  const std::size_t rows = static_cast<std::size_t>(g.rows_per_shard());
  const std::size_t out_elems = rows * p.spec.head_size;
  DeviceBuffer states_out(out_elems * num_shards * sizeof(float)), states_lse(rows * num_shards * sizeof(float));
  DeviceBuffer out(out_elems * dtype_bytes(p.spec.dtype)), lse(rows * sizeof(float));
  for (DeviceBuffer* b : {&states_out, &states_lse, &out, &lse}) b->fill_bytes(0xFF);  // NaN: unwritten shows
  ShardedRun r;
  for (int s = 0; s < num_shards; ++s) {
    // One shard's pages on the device at a time, as a device of its own would hold them.
    const ShardDecoder d(p, policy, num_shards, s);
    d.decode(static_cast<float*>(states_out.get()) + s * out_elems, static_cast<float*>(states_lse.get()) + s * rows,
             nullptr);
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    r.plans.push_back(d.plan().describe());
  }
  ShardMergeArgs m;
  m.states_out = static_cast<const float*>(states_out.get());
  m.states_lse = static_cast<const float*>(states_lse.get());
  m.g = g;
  m.out = out.get();
  m.out_dtype = p.spec.dtype;
  m.out_lse = static_cast<float*>(lse.get());
  launch_merge_shards(m);
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  r.out = download_decoded(out, out_elems, p.spec.dtype);
  r.lse = download_floats(lse, rows);
  r.states_out = download_floats(states_out, out_elems * num_shards);
  r.states_lse = download_floats(states_lse, rows * num_shards);
  return r;
}

#else  // no CUDA: say so

struct ShardDecoder::Impl {};
ShardDecoder::ShardDecoder(const PagedProblem&, ShardPolicy, int, int) { throw NoGpuError("built without CUDA"); }
ShardDecoder::~ShardDecoder() = default;
ShardDecoder::ShardDecoder(ShardDecoder&&) noexcept = default;
ShardDecoder& ShardDecoder::operator=(ShardDecoder&&) noexcept = default;
void ShardDecoder::decode(float*, float*, void*) const { throw NoGpuError("built without CUDA"); }
int ShardDecoder::device() const { throw NoGpuError("built without CUDA"); }
int ShardDecoder::shard() const { throw NoGpuError("built without CUDA"); }
const PagedProblem& ShardDecoder::local() const { throw NoGpuError("built without CUDA"); }
const OptimizedPlan& ShardDecoder::plan() const { throw NoGpuError("built without CUDA"); }
std::int64_t ShardDecoder::kv_bytes() const { throw NoGpuError("built without CUDA"); }
ShardedRun run_sharded(const PagedProblem&, ShardPolicy, int) { throw NoGpuError("built without CUDA"); }

#endif

}  // namespace pa::kernels
