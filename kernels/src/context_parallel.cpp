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

std::vector<int> even_sequence_groups(int num_seqs, int groups) {
  if (groups < 1 || groups > num_seqs)
    throw std::invalid_argument("sequence groups: " + std::to_string(groups) + " groups of " +
                                std::to_string(num_seqs) + " sequences; accepted: 1.." + std::to_string(num_seqs));
  std::vector<int> bounds{0};
  for (int g = 0; g < groups; ++g) bounds.push_back(bounds.back() + num_seqs / groups + (g < num_seqs % groups));
  return bounds;
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

// Stage 8's arguments for sequences [b, e) of `all`: the same device
// buffers, offset to sequence b.
OptimizedArgs sequence_range_args(const OptimizedArgs& all, const PagedProblem& local, int b, int e) {
  OptimizedArgs a = all;
  const std::size_t eb = static_cast<std::size_t>(dtype_bytes(all.dtype));
  a.q = static_cast<const unsigned char*>(all.q) + static_cast<std::size_t>(b) * all.q_stride * eb;
  a.block_tables = all.block_tables + static_cast<std::size_t>(b) * all.max_blocks_per_seq;
  a.context_lens = all.context_lens + b;
  a.host_context_lens = local.context_lens.data() + b;
  a.num_seqs = e - b;
  int longest = 0;
  for (int s = b; s < e; ++s) longest = std::max(longest, local.context_lens[s]);
  // The split heuristic sizes the grid by the longest attended range; a shard
  // may hold no token of any of these sequences (its CTAs then only write empty states).
  a.max_context_len = std::max(1, longest);
  return a;
}
void check_group_bounds(const std::vector<int>& b, int num_seqs) {
  bool ok = b.size() >= 2 && b.front() == 0 && b.back() == num_seqs;
  for (std::size_t i = 1; ok && i < b.size(); ++i) ok = b[i] > b[i - 1];
  if (ok) return;
  std::string got;
  for (int x : b) {
    if (!got.empty()) got += ',';
    got += std::to_string(x);
  }
  throw std::invalid_argument("ShardDecoder: group bounds {" + got + "}; accepted: 0 < s1 < ... < num_seqs (" +
                              std::to_string(num_seqs) + "), first 0 and last num_seqs");
}
}  // namespace

struct ShardDecoder::Impl {
  int device = 0;
  std::unique_ptr<PagedProblem> local;  // DeviceInputs keeps a pointer to it: a stable address
  std::unique_ptr<DeviceInputs> in;
  // Per sequence group: stage 8's arguments, plan and workspace. One
  // workspace per plan: a plan's arrival counters sit after its split
  // states, at an offset that depends on the plan, and each workspace's
  // counters are zero only where its own plan's launches leave them.
  std::vector<OptimizedArgs> group_args;
  std::vector<OptimizedPlan> group_plans;
  std::vector<DeviceBuffer> group_ws;

  void check_group(int g) const {
    if (g < 0 || g >= static_cast<int>(group_plans.size()))
      throw std::invalid_argument("ShardDecoder: group " + std::to_string(g) + "; accepted: 0.." +
                                  std::to_string(group_plans.size() - 1));
  }
};

ShardDecoder::ShardDecoder(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard,
                           const std::vector<int>& group_bounds)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  PA_CUDA_CHECK(cudaGetDevice(&m.device));
  const std::vector<int> bounds = group_bounds.empty() ? std::vector<int>{0, p.num_seqs()} : group_bounds;
  check_group_bounds(bounds, p.num_seqs());
  m.local = std::make_unique<PagedProblem>(shard_problem(p, policy, num_shards, shard));
  give_empty_pool_a_page(*m.local);
  give_empty_table_a_column(*m.local);
  m.in = std::make_unique<DeviceInputs>(*m.local);
  OptimizedArgs all = optimized_args(m.in->args());
  all.out = nullptr;  // the state is the output
  for (std::size_t g = 0; g + 1 < bounds.size(); ++g) {
    m.group_args.push_back(sequence_range_args(all, *m.local, bounds[g], bounds[g + 1]));
    m.group_plans.push_back(plan_optimized(m.group_args.back()));
    // Arrival counters start at zero once; every launch leaves them there.
    m.group_ws.emplace_back(std::max<std::size_t>(m.group_plans.back().workspace_bytes, 1));
    m.group_ws.back().fill_bytes(0);
  }
  // The uploads and the memsets run on the legacy default stream, which
  // orders nothing before a non-blocking stream's launches: wait for them.
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  // Only the shape and the lengths are needed from here on.
  for (auto* v : {&m.local->k_cache, &m.local->v_cache}) std::vector<float>().swap(*v);
  for (auto* v : {&m.local->k_bytes, &m.local->v_bytes, &m.local->q_bytes}) decltype(m.local->k_bytes)().swap(*v);
}

ShardDecoder::~ShardDecoder() {
  if (!impl_) return;  // moved from
  DeviceScope on(impl_->device);
  impl_.reset();
}
ShardDecoder::ShardDecoder(ShardDecoder&&) noexcept = default;
ShardDecoder& ShardDecoder::operator=(ShardDecoder&&) noexcept = default;

void ShardDecoder::decode(int g, float* state_out, float* state_lse, void* stream) const {
  impl_->check_group(g);
  DeviceScope on(impl_->device);
  OptimizedArgs a = impl_->group_args[g];
  a.state_out = state_out;
  a.state_lse = state_lse;
  launch_optimized(a, impl_->group_plans[g], impl_->group_ws[g].get(), stream);
}

int ShardDecoder::num_groups() const { return static_cast<int>(impl_->group_plans.size()); }
std::string ShardDecoder::describe() const {
  std::string s;
  for (const OptimizedPlan& plan : impl_->group_plans) {
    if (!s.empty()) s += "; ";
    s += plan.describe();
  }
  return s;
}
std::int64_t ShardDecoder::kv_bytes() const { return impl_->local->spec.kv_bytes(); }

ShardedRun run_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards, int sequence_groups) {
  make_shard_plan_checked(policy, num_shards, p.spec.block_size, 0);  // the error names the bad value
  const std::vector<int> bounds = even_sequence_groups(p.num_seqs(), sequence_groups);
  const ShardedStateGeometry g = sharded_state_geometry(p, num_shards);
  const std::size_t rows = static_cast<std::size_t>(g.rows_per_shard());
  const std::size_t out_elems = rows * p.spec.head_size;
  DeviceBuffer states_out(out_elems * num_shards * sizeof(float)), states_lse(rows * num_shards * sizeof(float));
  DeviceBuffer out(out_elems * dtype_bytes(p.spec.dtype)), lse(rows * sizeof(float));
  for (DeviceBuffer* b : {&states_out, &states_lse, &out, &lse}) b->fill_bytes(0xFF);  // NaN: unwritten shows
  ShardedRun r;
  for (int s = 0; s < num_shards; ++s) {
    // One shard's pages on the device at a time, as a device of its own would hold them.
    const ShardDecoder d(p, policy, num_shards, s, bounds);
    for (int k = 0; k < d.num_groups(); ++k) {
      const std::size_t row0 = static_cast<std::size_t>(bounds[k]) * p.spec.num_heads;
      d.decode(k, static_cast<float*>(states_out.get()) + s * out_elems + row0 * p.spec.head_size,
               static_cast<float*>(states_lse.get()) + s * rows + row0, nullptr);
    }
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    r.plans.push_back(d.describe());
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
ShardDecoder::ShardDecoder(const PagedProblem&, ShardPolicy, int, int, const std::vector<int>&) {
  throw NoGpuError("built without CUDA");
}
ShardDecoder::~ShardDecoder() = default;
ShardDecoder::ShardDecoder(ShardDecoder&&) noexcept = default;
ShardDecoder& ShardDecoder::operator=(ShardDecoder&&) noexcept = default;
void ShardDecoder::decode(int, float*, float*, void*) const { throw NoGpuError("built without CUDA"); }
int ShardDecoder::num_groups() const { throw NoGpuError("built without CUDA"); }
std::string ShardDecoder::describe() const { throw NoGpuError("built without CUDA"); }
std::int64_t ShardDecoder::kv_bytes() const { throw NoGpuError("built without CUDA"); }
ShardedRun run_sharded(const PagedProblem&, ShardPolicy, int, int) { throw NoGpuError("built without CUDA"); }

#endif

}  // namespace pa::kernels
