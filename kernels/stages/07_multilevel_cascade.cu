// Host side of the multi-level cascade (pa/kernels/multilevel_cascade.hpp;
// what it adds: 07_multilevel_cascade.cuh): the checks, the plan (each
// shared group's chunks, the workspace), the uploaded tables and the launch
// sequence.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "07_cascade_host.cuh"
#include "07_cascade_prefix_mma.cuh"
#include "07_multilevel_cascade.cuh"
#include "host_checks.hpp"
#include "pa/kernels/multilevel_cascade.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/kernels/shard_merge.hpp"

namespace pa::kernels {
namespace {

using detail::at;
using detail::bad;
using detail::carve;
using detail::device_sm_count;

std::string str(long long v) { return std::to_string(v); }

// Device memory owned by the cascade (this stage library sits below the
// runner's DeviceBuffer).
class DeviceMem {
 public:
  DeviceMem() = default;
  explicit DeviceMem(std::size_t bytes) { PA_CUDA_CHECK(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1))); }
  ~DeviceMem() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceMem(DeviceMem&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  DeviceMem& operator=(DeviceMem&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

DeviceMem upload_ints(const std::vector<int>& v) {
  DeviceMem b(v.size() * sizeof(int));
  if (!v.empty()) PA_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(int), cudaMemcpyHostToDevice));
  return b;
}

// What the cascade refuses, before anything is planned or uploaded.
void check_inputs(const StageArgs& b, const MultiLevelCascade& c) {
  c.validate();
  const std::string who = "multi-level cascade: ";
  if (b.num_heads < 1 || b.num_kv_heads < 1 || b.num_heads % b.num_kv_heads != 0)
    bad(who + "num_heads " + str(b.num_heads) + ", num_kv_heads " + str(b.num_kv_heads) +
        "; accepted: >= 1 each, num_kv_heads dividing num_heads");
  if (b.q == nullptr || b.k_cache == nullptr || b.v_cache == nullptr)
    bad(who + "a null input pointer; accepted: q, k_cache and v_cache set (device pointers)");
  if (b.dtype == DType::f32)
    bad(who + "dtype fp32; accepted: fp16, bf16 (the shared levels run on the tensor-core prefix kernel)");
  if (is_fp8(b.kv_dtype))
    bad(who + std::string("a ") + kv_dtype_name(b.kv_dtype) + " KV cache; accepted: a cache in the query's dtype");
  if (b.kv_layout != KvLayout::vllm)
    bad(who + std::string("KV layout ") + kv_layout_name(b.kv_layout) +
        "; accepted: vllm (the prefix kernel reads vLLM's split K/V pages)");
  if (b.alibi_slopes != nullptr) bad(who + "ALiBi slopes; accepted: none (the reference cascade has no ALiBi)");
  if (c.num_levels() > kMaxCascadeLevels)
    bad(who + str(c.num_levels()) + " levels; accepted: 1.." + str(kMaxCascadeLevels) + " (the fold of level states)");
  if (c.page_size != b.block_size)
    bad(who + "pages of " + str(c.page_size) + " slots; accepted: the cache's block size " + str(b.block_size));
  if (c.num_pages > b.cg.num_blocks)
    bad(who + "the tables name pages up to " + str(c.num_pages) + "; accepted: at most the pool's " +
        str(b.cg.num_blocks) + " pages");
  if (c.num_requests != b.num_seqs)
    bad(who + str(c.num_requests) + " requests for " + str(b.num_seqs) + " query rows; accepted: one row per request");
  if (!optimized_supported(b.dtype, b.head_size, b.block_size))
    bad(who + "stage 8 (the last level) is not built for " + detail::config_text(b) + " (" +
        optimized_supported_list() + ")");
  if ((b.qg.q_stride * dtype_bytes(b.dtype)) % 16 != 0)
    bad(who + "Q row stride " + str(b.qg.q_stride) + " elements; accepted: a multiple of 16 bytes");
}

}  // namespace

struct MultiLevelCascadeRun::Impl {
  StageArgs base;
  MultiLevelPlan plan;
  std::vector<std::vector<int>> row_of;     // [level][request]: the row of its state, -1 none
  std::vector<DeviceMem> level_indices;  // shared levels: the groups' pages
  std::vector<DeviceMem> level_order;    // reordered levels: the request of each row
  DeviceMem row_tokens;                  // [shared level][row]: the row's group's tokens
  DeviceMem last_indptr, last_indices, last_lpl;  // the last level, one CSR row per request
  DeviceMem source_seq;                  // row_of, flattened, for the fold
  DeviceMem ws;
  bool last_has_tokens = false;
  std::vector<cudaStream_t> streams;  // side streams (none with one stream); the last one runs stage 8
  std::vector<cudaEvent_t> events;    // fork, then one join per stream
  int last_stream = 0;

  ~Impl() {
    for (cudaStream_t s : streams) cudaStreamDestroy(s);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }

  // Stage 8 over the last level's CSR rows (base holds them), writing its states.
  OptimizedArgs last_args() const {
    OptimizedArgs o = optimized_args(base, 0);
    o.out = nullptr;  // the state instead
    o.state_out = at<float>(ws.get(), plan.states_out) + static_cast<std::size_t>(plan.num_levels - 1) * rows() * base.head_size;
    o.state_lse = at<float>(ws.get(), plan.states_lse) + static_cast<std::size_t>(plan.num_levels - 1) * rows();
    return o;
  }
  std::size_t rows() const { return static_cast<std::size_t>(plan.num_requests) * base.num_heads; }

  bool has_side_streams() const { return !streams.empty(); }
  void reorder_q(cudaStream_t caller);
  void fork(cudaStream_t caller);
  void join(cudaStream_t caller);
  void shared_levels(cudaStream_t caller);
  void last_level(cudaStream_t s);
};

MultiLevelCascadeRun::MultiLevelCascadeRun(const StageArgs& base, const MultiLevelCascade& c,
                                           const MultiLevelOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  check_inputs(base, c);
  if (opt.streams < 1 || opt.streams > 16) bad("multi-level cascade: streams " + str(opt.streams) + "; accepted: 1..16");
  Impl& m = *impl_;
  m.base = base;
  m.base.out = nullptr;
  MultiLevelPlan& p = m.plan;
  const int L = c.num_levels(), R = c.num_requests, H = base.num_heads, hs = base.head_size;
  const int E = dtype_bytes(base.dtype);
  p.num_levels = L;
  p.num_requests = R;
  p.prefix_kernel = detail::resolve_prefix_kernel(base, opt.prefix);
  p.streams = opt.streams;
  p.reordered.assign(static_cast<std::size_t>(L), false);
  p.q_reordered.assign(static_cast<std::size_t>(L), 0);
  m.row_of.assign(static_cast<std::size_t>(L), std::vector<int>(static_cast<std::size_t>(R), -1));

  std::size_t cur = 0;
  p.states_out = carve(cur, static_cast<std::size_t>(L) * R * H * hs * 4);
  p.states_lse = carve(cur, static_cast<std::size_t>(L) * R * H * 4);

  // Shared levels: each level's rows are its groups' members side by side.
  const int ratio = H / base.num_kv_heads;
  const int variant = static_cast<int>(p.prefix_kernel);
  std::vector<int> row_tokens(static_cast<std::size_t>(std::max(L - 1, 0)) * R, 0);
  for (int l = 0; l + 1 < L; ++l) {
    const CascadeLevel& lv = c.levels[l];
    const CsrPageTable t = c.table(l);
    std::vector<std::vector<int>> members(static_cast<std::size_t>(lv.num_groups()));
    for (int r = 0; r < R; ++r) members[lv.group_of[r]].push_back(r);
    std::vector<int> order;  // row -> request
    std::vector<MultiLevelJob> level_jobs;
    long long work = 0;  // the level's CTA-tokens, to share the GPU among its groups
    for (int g = 0; g < lv.num_groups(); ++g) {
      const int tokens = t.seq_len(g);
      if (members[g].empty() || tokens == 0) continue;  // nobody reads it, or nothing to read
      MultiLevelJob j;
      j.level = l;
      j.group = g;
      j.row_begin = static_cast<int>(order.size());
      j.members = static_cast<int>(members[g].size());
      j.tokens = tokens;
      j.page_begin = lv.groups.indptr[g];
      for (int r : members[g]) {
        m.row_of[l][r] = static_cast<int>(order.size());
        row_tokens[static_cast<std::size_t>(l) * R + order.size()] = tokens;
        order.push_back(r);
      }
      work += static_cast<long long>(prefix_query_tiles(j.members, ratio, prefix_rows_per_block(variant, hs))) * tokens;
      level_jobs.push_back(j);
    }
    // Every group gets a share of the GPU in proportion to its work, so the
    // level's concurrent launches fill it about once.
    const int sms = device_sm_count();
    for (MultiLevelJob& j : level_jobs) {
      const int tiles = prefix_query_tiles(j.members, ratio, prefix_rows_per_block(variant, hs));
      const int sm_share =
          std::max(1, static_cast<int>(static_cast<long long>(sms) * tiles * j.tokens / std::max(work, 1LL)));
      j.chunk_len = detail::prefix_chunk_len(base, p.prefix_kernel, j.tokens, tiles, sm_share, 0);
      j.num_chunks = ceil_div(j.tokens, j.chunk_len);
      const std::size_t parts = static_cast<std::size_t>(j.members) * H * j.num_chunks;
      j.part_out = carve(cur, parts * hs * 4);
      j.part_max = carve(cur, parts * 4);
      j.part_sum = carve(cur, parts * 4);
      p.jobs.push_back(j);
    }
    bool identity = true;
    for (std::size_t i = 0; i < order.size(); ++i) identity = identity && order[i] == static_cast<int>(i);
    m.level_indices.push_back(upload_ints(lv.groups.indices));
    if (!identity) {
      p.reordered[l] = true;
      p.q_reordered[l] = carve(cur, order.size() * H * hs * E);
      m.level_order.push_back(upload_ints(order));
    } else {
      m.level_order.emplace_back();
    }
  }
  m.row_tokens = upload_ints(row_tokens);

  // The last level: one CSR row per request (its group's pages; a group
  // read by several requests is listed once per request).
  {
    const CascadeLevel& lv = c.levels[L - 1];
    const CsrPageTable t = c.table(L - 1);
    std::vector<int> indptr{0}, indices, lpl, row_lens;
    int max_ctx = 0;
    for (int r = 0; r < R; ++r) {
      const int g = lv.group_of[r];
      indices.insert(indices.end(), lv.groups.indices.begin() + lv.groups.indptr[g],
                     lv.groups.indices.begin() + lv.groups.indptr[g + 1]);
      indptr.push_back(static_cast<int>(indices.size()));
      const int tokens = t.seq_len(g);
      lpl.push_back(tokens > 0 ? lv.groups.last_page_len[g] : 0);
      if (tokens > 0) m.row_of[L - 1][r] = r;
      row_lens.push_back(tokens);
      max_ctx = std::max(max_ctx, tokens);
    }
    m.last_indptr = upload_ints(indptr);
    m.last_indices = upload_ints(indices);
    m.last_lpl = upload_ints(lpl);
    m.last_has_tokens = max_ctx > 0;
    StageArgs& b = m.base;  // its page table: these rows (the caller's tables are not read)
    b.page_table = PageTableForm::csr;
    b.block_tables = static_cast<const int*>(m.last_indices.get());
    b.kv_indptr = static_cast<const int*>(m.last_indptr.get());
    b.kv_last_page_len = static_cast<const int*>(m.last_lpl.get());
    b.context_lens = nullptr;
    b.host_context_lens = nullptr;  // the caller's are per sequence, these rows per request
    b.max_context_len = max_ctx;
    if (m.last_has_tokens) {
      OptimizedArgs o = optimized_args(b, 0);  // the plan does not depend on where the states go
      o.host_context_lens = row_lens.data();    // each row's own tokens, for the split planner
      p.last = plan_optimized(o);
      p.last_ws = carve(cur, p.last.workspace_bytes);
    }
  }
  p.workspace_bytes = cur;
  m.ws = DeviceMem(cur);
  // Stage 8's arrival counters start at zero and the kernel leaves them so.
  PA_CUDA_CHECK(cudaMemset(m.ws.get(), 0, cur));

  std::vector<int> flat;
  for (const std::vector<int>& r : m.row_of) flat.insert(flat.end(), r.begin(), r.end());
  m.source_seq = upload_ints(flat);

  if (opt.streams > 1) {
    for (int i = 0; i < opt.streams + 1; ++i) {  // the last one runs stage 8
      cudaStream_t s = nullptr;
      PA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      m.streams.push_back(s);
    }
    m.last_stream = opt.streams;
    for (int i = 0; i < opt.streams + 2; ++i) {
      cudaEvent_t e = nullptr;
      PA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      m.events.push_back(e);
    }
  }
  PA_CUDA_CHECK(cudaDeviceSynchronize());
}

MultiLevelCascadeRun::~MultiLevelCascadeRun() = default;
MultiLevelCascadeRun::MultiLevelCascadeRun(MultiLevelCascadeRun&&) noexcept = default;
MultiLevelCascadeRun& MultiLevelCascadeRun::operator=(MultiLevelCascadeRun&&) noexcept = default;

const MultiLevelPlan& MultiLevelCascadeRun::plan() const { return impl_->plan; }
const float* MultiLevelCascadeRun::states_out() const { return at<float>(impl_->ws.get(), impl_->plan.states_out); }
const float* MultiLevelCascadeRun::states_lse() const { return at<float>(impl_->ws.get(), impl_->plan.states_lse); }
int MultiLevelCascadeRun::level_row(int level, int request) const {
  if (level < 0 || level >= impl_->plan.num_levels || request < 0 || request >= impl_->plan.num_requests)
    bad("multi-level cascade: level_row(" + str(level) + ", " + str(request) + "); accepted: level < " +
        str(impl_->plan.num_levels) + ", request < " + str(impl_->plan.num_requests));
  return impl_->row_of[level][request];
}

// Q in each reordered level's order, on the caller's stream: the prefix kernel
// reads a level's members as consecutive rows. It runs before the fork, so
// that every side stream sees it.
void MultiLevelCascadeRun::Impl::reorder_q(cudaStream_t caller) {
  const int H = base.num_heads, hs = base.head_size, E = dtype_bytes(base.dtype);
  const int R = plan.num_requests;
  for (int l = 0; l + 1 < plan.num_levels; ++l) {
    if (!plan.reordered[l]) continue;
    const int row_vecs = H * hs * E / 16;
    int rows = 0;
    for (int r = 0; r < R; ++r) rows += row_of[l][r] >= 0 ? 1 : 0;
    if (rows == 0) continue;
    reorder_q_kernel<<<std::min(4096, ceil_div(rows * row_vecs, 256)), 256, 0, caller>>>(
        static_cast<const uint4*>(base.q), static_cast<const int*>(level_order[l].get()), rows, row_vecs,
        base.qg.q_stride * E / 16, at<uint4>(ws.get(), plan.q_reordered[l]));
    PA_CUDA_CHECK(cudaGetLastError());
  }
}

// The side streams start after everything queued on the caller's stream so
// far: one event, recorded once, that each of them waits on.
void MultiLevelCascadeRun::Impl::fork(cudaStream_t caller) {
  if (!has_side_streams()) return;
  PA_CUDA_CHECK(cudaEventRecord(events[0], caller));
  for (cudaStream_t s : streams) PA_CUDA_CHECK(cudaStreamWaitEvent(s, events[0], 0));
}

// The caller's stream goes on once every side stream's work is done: an
// event recorded on each, all of which it waits on.
void MultiLevelCascadeRun::Impl::join(cudaStream_t caller) {
  for (std::size_t i = 0; i < streams.size(); ++i) {
    PA_CUDA_CHECK(cudaEventRecord(events[i + 1], streams[i]));
    PA_CUDA_CHECK(cudaStreamWaitEvent(caller, events[i + 1], 0));
  }
}

// Each shared group: the prefix kernel over its pages and its members' rows,
// then the reduce of its chunks into the level's states. With side streams
// the groups go round-robin over them (forked from the caller, after
// reorder_q); the last side stream is left to stage 8.
void MultiLevelCascadeRun::Impl::shared_levels(cudaStream_t caller) {
  const int H = base.num_heads, hs = base.head_size, E = dtype_bytes(base.dtype);
  const int R = plan.num_requests;
  const StateGeometry stg{H, hs};
  int next = 0;
  for (const MultiLevelJob& j : plan.jobs) {
    const cudaStream_t s =
        has_side_streams() ? streams[static_cast<std::size_t>(next++ % plan.streams)] : caller;
    const bool re = plan.reordered[j.level];
    const char* q0 = re ? at<char>(ws.get(), plan.q_reordered[j.level]) : static_cast<const char*>(base.q);
    const int q_stride = re ? H * hs : base.qg.q_stride;
    PrefixArgs pa;
    pa.q = q0 + static_cast<std::size_t>(j.row_begin) * q_stride * E;
    pa.k_cache = base.k_cache;
    pa.v_cache = base.v_cache;
    pa.prefix_blocks = static_cast<const int*>(level_indices[j.level].get()) + j.page_begin;
    pa.qg = QueryGeometry{j.members, H, hs, q_stride};
    pa.cg = base.cg;
    pa.num_seqs = j.members;
    pa.num_heads = H;
    pa.num_kv_heads = base.num_kv_heads;
    pa.prefix_len = j.tokens;
    pa.chunk_len = j.chunk_len;
    pa.scale = base.scale;
    pa.part_out = at<float>(ws.get(), j.part_out);
    pa.part_max = at<float>(ws.get(), j.part_max);
    pa.part_sum = at<float>(ws.get(), j.part_sum);
    pa.pg = PartitionGeometry{H, j.num_chunks, hs};
    detail::launch_prefix_kernel(base, plan.prefix_kernel, pa, s);

    V2Args red;
    red.base = base;
    red.base.out = nullptr;
    red.base.num_seqs = j.members;
    red.base.partition_size = j.chunk_len;  // the reduce counts chunks with the chunk length
    red.base.context_lens = static_cast<const int*>(row_tokens.get()) + static_cast<std::size_t>(j.level) * R + j.row_begin;
    red.range = {0, -1};
    red.max_partitions = j.num_chunks;
    red.part_out = pa.part_out;
    red.part_max = pa.part_max;
    red.part_sum = pa.part_sum;
    red.pg = pa.pg;
    const std::size_t state_row = static_cast<std::size_t>(j.level) * R + j.row_begin;
    red.out_state = at<float>(ws.get(), plan.states_out) + state_row * H * hs;
    red.lse = at<float>(ws.get(), plan.states_lse) + state_row * H;
    red.stg = stg;
    red.single_partition_direct = false;  // the prefix kernel never writes a final state
    if (base.dtype == DType::f16) launch_v2_reduce<__half>(red, s);
    else launch_v2_reduce<__nv_bfloat16>(red, s);
  }
}

void MultiLevelCascadeRun::Impl::last_level(cudaStream_t s) {
  if (!last_has_tokens) return;
  launch_optimized(last_args(), plan.last, plan.last.workspace_bytes > 0 ? at<char>(ws.get(), plan.last_ws) : nullptr,
                   s);
}

void MultiLevelCascadeRun::launch(void* out, float* lse, void* stream) {
  Impl& m = *impl_;
  if (out == nullptr) bad("multi-level cascade: null output pointer");
  const auto caller = static_cast<cudaStream_t>(stream);
  // One fork after the Q copies covers every side stream; stage 8 reads the
  // caller's Q and waits on it only for the copies (a few MB at most).
  m.reorder_q(caller);
  m.fork(caller);
  // The memory-bound last level first, on its own stream, so it streams
  // while the compute-bound shared levels run beside it.
  m.last_level(m.has_side_streams() ? m.streams[m.last_stream] : caller);
  m.shared_levels(caller);
  m.join(caller);
  ShardMergeArgs f;
  f.states_out = states_out();
  f.states_lse = states_lse();
  f.g = ShardedStateGeometry{m.plan.num_levels, m.plan.num_requests, StateGeometry{m.base.num_heads, m.base.head_size}};
  f.source_seq = static_cast<const int*>(m.source_seq.get());
  f.out = out;
  f.out_dtype = m.base.dtype;
  f.out_lse = lse;
  launch_merge_shards(f, caller);
}

void MultiLevelCascadeRun::launch_shared_levels(void* stream) {
  Impl& m = *impl_;
  const auto caller = static_cast<cudaStream_t>(stream);
  m.reorder_q(caller);
  m.fork(caller);
  m.shared_levels(caller);
  m.join(caller);
}

void MultiLevelCascadeRun::launch_last_level(void* stream) { impl_->last_level(static_cast<cudaStream_t>(stream)); }

}  // namespace pa::kernels
