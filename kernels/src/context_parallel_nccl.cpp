// Context parallelism over several GPUs through NCCL
// (pa/kernels/context_parallel_nccl.hpp): one process, one communicator and
// one stream per device, the collectives of all devices in one NCCL group.
#include "pa/kernels/context_parallel_nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pa/kernels/api.hpp"
#include "pa/kernels/context_parallel.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/shard_merge.hpp"

#define PA_NCCL_CHECK(call)                                                              \
  do {                                                                                   \
    const ncclResult_t pa_nccl_r_ = (call);                                              \
    if (pa_nccl_r_ != ncclSuccess)                                                       \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) +  \
                               ": " #call " failed: " + ncclGetErrorString(pa_nccl_r_)); \
  } while (0)

namespace pa::kernels {

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void set_current_device(int d) { PA_CUDA_CHECK(cudaSetDevice(d)); }

// nccl_version_text decodes NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z,
// NCCL's encoding since 2.9; the constructor checks that the library loaded
// at run time has the major version of the header compiled against.
#if NCCL_VERSION_CODE < 20900
#error "context parallelism needs NCCL 2.9 or later"
#endif

std::string nccl_version_text() {
  int v = 0;
  PA_NCCL_CHECK(ncclGetVersion(&v));
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

namespace {

// How long a device waits for the host's release before it goes on anyway:
// a timing loop never hangs, and a wait that timed out is reported
// (time() throws), never timed as if the devices had started together.
constexpr unsigned long long kReleaseTimeoutNs = 2'000'000'000ull;

// ncclGroupStart ... ncclGroupEnd, the end also when a call inside throws
// (an open group would hold back every later NCCL call of this thread).
class NcclGroup {
 public:
  NcclGroup() { PA_NCCL_CHECK(ncclGroupStart()); }
  void end() {
    open_ = false;
    PA_NCCL_CHECK(ncclGroupEnd());
  }
  ~NcclGroup() {
    if (open_) ncclGroupEnd();  // unwinding: the first error is the one reported
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

 private:
  bool open_ = true;
};

struct Rank {
  int device = 0;
  std::unique_ptr<ShardDecoder> shard;
  cudaStream_t stream = nullptr;  // the decode
  cudaStream_t comm = nullptr;    // the exchange and the merge (== stream with one sequence group)
  ncclComm_t nccl = nullptr;
  cudaEvent_t ev[4] = {};            // start, last decode done, last exchange done, last merge done
  std::vector<cudaEvent_t> decoded;  // per sequence group: the comm stream waits for it
  // all_gather: every shard's state, group by group, shard-major in each
  // group; sums: this rank's state only. Then the sums (group by group
  // [weighted out | weights]), the maxima, the merged output and lse.
  DeviceBuffer states_out, states_lse;
  DeviceBuffer max_lse, sums;
  DeviceBuffer out, out_lse;
};

// Where sequence group g lives in the buffers: its first state row and its rows.
struct GroupSpan {
  std::size_t row0 = 0, rows = 0;
  int seqs = 0;
};

}  // namespace

struct ContextParallel::Impl {
  ContextParallelOptions opt;
  ShardedStateGeometry g;
  DType dtype = DType::f16;
  std::vector<Rank> ranks;
  std::vector<GroupSpan> groups;
  // Pinned, mapped: [0] the host's release of a timed iteration, [1] set by a
  // device whose wait for it timed out.
  int* flag = nullptr;
  int release = 0;

  int n() const { return static_cast<int>(ranks.size()); }
  std::size_t rows() const { return static_cast<std::size_t>(g.rows_per_shard()); }
  std::size_t hs() const { return static_cast<std::size_t>(g.state.head_size); }
  std::size_t out_elems() const { return rows() * hs(); }
  bool gather() const { return opt.exchange == StateExchange::all_gather; }

  // Group k's part of the state buffers. all_gather: the N states of the
  // group's rows side by side (what an all-gather of the group leaves),
  // starting at N x the rows before it; this rank's slot is the rank-th.
  float* group_states_out(Rank& r, const GroupSpan& k) const {
    return static_cast<float*>(r.states_out.get()) + (gather() ? n() * k.row0 * hs() : k.row0 * hs());
  }
  float* group_states_lse(Rank& r, const GroupSpan& k) const {
    return static_cast<float*>(r.states_lse.get()) + (gather() ? n() * k.row0 : k.row0);
  }
  float* own_state_out(Rank& r, const GroupSpan& k) const {
    return group_states_out(r, k) + (gather() ? r.device * k.rows * hs() : 0);
  }
  float* own_state_lse(Rank& r, const GroupSpan& k) const {
    return group_states_lse(r, k) + (gather() ? r.device * k.rows : 0);
  }

  StateSumArgs sum_args(Rank& r, const GroupSpan& k) const {
    StateSumArgs a;
    a.state_out = own_state_out(r, k);
    a.state_lse = own_state_lse(r, k);
    a.max_lse = static_cast<const float*>(r.max_lse.get()) + k.row0;
    a.sums = static_cast<float*>(r.sums.get()) + k.row0 * (hs() + 1);
    a.out = static_cast<unsigned char*>(r.out.get()) + k.row0 * hs() * dtype_bytes(dtype);
    a.out_dtype = dtype;
    a.out_lse = static_cast<float*>(r.out_lse.get()) + k.row0;
    a.rows = static_cast<std::int64_t>(k.rows);
    a.head_size = g.state.head_size;
    return a;
  }

  // Group k's exchange, on every rank's comm stream (one NCCL group per collective step).
  void exchange(const GroupSpan& k) {
    if (gather()) {
      // In place: each rank's state already sits in its slot of the gathered buffer.
      PA_NCCL_CHECK(ncclGroupStart());
      for (Rank& r : ranks) {
        PA_NCCL_CHECK(
            ncclAllGather(own_state_out(r, k), group_states_out(r, k), k.rows * hs(), ncclFloat, r.nccl, r.comm));
        PA_NCCL_CHECK(ncclAllGather(own_state_lse(r, k), group_states_lse(r, k), k.rows, ncclFloat, r.nccl, r.comm));
      }
      PA_NCCL_CHECK(ncclGroupEnd());
      return;
    }
    {  // M: the largest lse of each row over all ranks
      NcclGroup group;
      for (Rank& r : ranks)
        PA_NCCL_CHECK(ncclAllReduce(own_state_lse(r, k), static_cast<float*>(r.max_lse.get()) + k.row0, k.rows,
                                    ncclFloat, ncclMax, r.nccl, r.comm));
      group.end();
    }
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      launch_weigh_state(sum_args(r, k), r.comm);
    }
    NcclGroup group;  // the weighted states summed over all ranks
    for (Rank& r : ranks) {
      float* sums = sum_args(r, k).sums;
      PA_NCCL_CHECK(ncclAllReduce(sums, sums, k.rows * (hs() + 1), ncclFloat, ncclSum, r.nccl, r.comm));
    }
    group.end();
  }

  void merge(Rank& r, const GroupSpan& k) const {
    if (!gather()) {
      launch_normalize_sums(sum_args(r, k), r.comm);
      return;
    }
    ShardMergeArgs m;
    m.states_out = group_states_out(r, k);
    m.states_lse = group_states_lse(r, k);
    m.g = ShardedStateGeometry{n(), k.seqs, g.state};
    m.out = static_cast<unsigned char*>(r.out.get()) + k.row0 * hs() * dtype_bytes(dtype);
    m.out_dtype = dtype;
    m.out_lse = static_cast<float*>(r.out_lse.get()) + k.row0;
    launch_merge_shards(m, r.comm);
  }

  // One iteration on every device: group by group, decode on the decode
  // stream, then (on the comm stream, once that group is decoded) exchange
  // and merge, so that with several groups one group's exchange overlaps the
  // next group's decode. Events: start, after the last decode, before the
  // last merge, after it. When timed, every device first waits for the host,
  // which releases them all once everything is queued.
  void enqueue(bool timed) {
    if (timed) ++release;
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      if (timed) launch_wait_host_flag(flag, release, kReleaseTimeoutNs, flag + 1, r.stream);
      PA_CUDA_CHECK(cudaEventRecord(r.ev[0], r.stream));
    }
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const GroupSpan& k = groups[gi];
      for (Rank& r : ranks) {
        PA_CUDA_CHECK(cudaSetDevice(r.device));
        r.shard->decode(static_cast<int>(gi), own_state_out(r, k), own_state_lse(r, k), r.stream);
        PA_CUDA_CHECK(cudaEventRecord(r.decoded[gi], r.stream));
        if (gi + 1 == groups.size()) PA_CUDA_CHECK(cudaEventRecord(r.ev[1], r.stream));
        if (r.comm != r.stream) PA_CUDA_CHECK(cudaStreamWaitEvent(r.comm, r.decoded[gi], 0));
      }
      exchange(k);
      for (Rank& r : ranks) {
        PA_CUDA_CHECK(cudaSetDevice(r.device));
        if (gi + 1 == groups.size()) PA_CUDA_CHECK(cudaEventRecord(r.ev[2], r.comm));
        merge(r, k);
      }
    }
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      PA_CUDA_CHECK(cudaEventRecord(r.ev[3], r.comm));
      // The next iteration's decode writes states this one's exchange reads.
      if (r.comm != r.stream) PA_CUDA_CHECK(cudaStreamWaitEvent(r.stream, r.ev[3], 0));
    }
    if (timed) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *static_cast<volatile int*>(flag) = release;
    }
  }

  void synchronize_all() {
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      PA_CUDA_CHECK(cudaStreamSynchronize(r.stream));
      PA_CUDA_CHECK(cudaStreamSynchronize(r.comm));
    }
  }

  ~Impl() {
    // Each rank's resources freed with its own device current, after every
    // device has finished (a wait kernel may still read the flag); errors
    // here cannot be reported (a destructor), and the process may be unwinding.
    int saved = 0;
    const bool restore = cudaGetDevice(&saved) == cudaSuccess;
    for (Rank& r : ranks) {
      if (cudaSetDevice(r.device) != cudaSuccess) continue;
      cudaDeviceSynchronize();
    }
    for (Rank& r : ranks) {
      if (cudaSetDevice(r.device) != cudaSuccess) continue;
      if (r.nccl) ncclCommDestroy(r.nccl);
      for (cudaEvent_t e : r.ev)
        if (e) cudaEventDestroy(e);
      for (cudaEvent_t e : r.decoded)
        if (e) cudaEventDestroy(e);
      r.shard.reset();
      r.states_out = {};
      r.states_lse = {};
      r.max_lse = {};
      r.sums = {};
      r.out = {};
      r.out_lse = {};
      if (r.comm && r.comm != r.stream) cudaStreamDestroy(r.comm);
      if (r.stream) cudaStreamDestroy(r.stream);
    }
    if (flag) cudaFreeHost(flag);
    if (restore) cudaSetDevice(saved);
  }
};

ContextParallel::ContextParallel(const PagedProblem& p, const ContextParallelOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  const DeviceScope keep;  // the caller's device is current again on return
  Impl& m = *impl_;
  const int have = cuda_device_count();
  if (have < 1) throw NoGpuError("context parallelism: no CUDA GPU");
  if (opt.devices < 1 || opt.devices > std::min(kMaxShards, have))
    throw std::invalid_argument("context parallelism: devices " + std::to_string(opt.devices) + "; accepted: 1.." +
                                std::to_string(std::min(kMaxShards, have)) + " (this machine has " +
                                std::to_string(have) + " GPU" + (have == 1 ? "" : "s") + ", the plan at most " +
                                std::to_string(kMaxShards) + ")");
  if (state_exchange_name(opt.exchange)[0] == '?')
    throw std::invalid_argument("context parallelism: exchange " + std::to_string(static_cast<int>(opt.exchange)) +
                                "; accepted: " + kStateExchangeNamesText);
  if (opt.sequence_groups < 1 || opt.sequence_groups > p.num_seqs())
    throw std::invalid_argument("context parallelism: sequence_groups " + std::to_string(opt.sequence_groups) +
                                "; accepted: 1.." + std::to_string(p.num_seqs()) + " (the batch's sequences)");
  make_shard_plan_checked(opt.policy, opt.devices, p.spec.block_size, 0);  // names a bad policy
  int loaded = 0;
  PA_NCCL_CHECK(ncclGetVersion(&loaded));
  if (loaded / 10000 != NCCL_MAJOR)
    throw std::runtime_error("context parallelism: NCCL " + nccl_version_text() + " loaded, built against " +
                             std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) +
                             ": the major versions differ (the library found at run time is not the one CMake found)");
  m.opt = opt;
  m.g = sharded_state_geometry(p, opt.devices);
  m.dtype = p.spec.dtype;
  const std::vector<int> bounds = even_sequence_groups(p.num_seqs(), opt.sequence_groups);
  for (int k = 0; k < opt.sequence_groups; ++k) {
    const int seqs = bounds[k + 1] - bounds[k];
    m.groups.push_back(GroupSpan{static_cast<std::size_t>(bounds[k]) * p.spec.num_heads,
                                 static_cast<std::size_t>(seqs) * p.spec.num_heads, seqs});
  }
  const int n = opt.devices;
  m.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    Rank& k = m.ranks[r];
    k.device = r;
    PA_CUDA_CHECK(cudaSetDevice(r));
    PA_CUDA_CHECK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    if (opt.sequence_groups > 1)
      PA_CUDA_CHECK(cudaStreamCreateWithFlags(&k.comm, cudaStreamNonBlocking));
    else
      k.comm = k.stream;
    for (cudaEvent_t& e : k.ev) PA_CUDA_CHECK(cudaEventCreate(&e));
    k.decoded.assign(opt.sequence_groups, nullptr);
    for (cudaEvent_t& e : k.decoded) PA_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    k.shard = std::make_unique<ShardDecoder>(p, opt.policy, n, r, bounds);
    const int slots = opt.exchange == StateExchange::all_gather ? n : 1;
    k.states_out = DeviceBuffer(m.out_elems() * slots * sizeof(float));
    k.states_lse = DeviceBuffer(m.rows() * slots * sizeof(float));
    if (opt.exchange == StateExchange::sums) {
      k.max_lse = DeviceBuffer(m.rows() * sizeof(float));
      k.sums = DeviceBuffer(state_sum_elems(m.g.rows_per_shard(), m.g.state.head_size) * sizeof(float));
    }
    k.out = DeviceBuffer(m.out_elems() * dtype_bytes(m.dtype));
    k.out_lse = DeviceBuffer(m.rows() * sizeof(float));
  }
  // Multicast off before NCCL reads its environment, whatever the caller's
  // environment says (see the header: on a shared host it is not allowed).
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int r = 0; r < n; ++r) devs[r] = r;
  PA_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int r = 0; r < n; ++r) m.ranks[r].nccl = comms[r];
  PA_CUDA_CHECK(
      cudaHostAlloc(reinterpret_cast<void**>(&m.flag), 2 * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  m.flag[0] = m.flag[1] = 0;
}

ContextParallel::~ContextParallel() = default;

const ContextParallelOptions& ContextParallel::options() const { return impl_->opt; }

ContextParallelResult ContextParallel::run() {
  const DeviceScope keep;
  Impl& m = *impl_;
  for (Rank& r : m.ranks) {
    PA_CUDA_CHECK(cudaSetDevice(r.device));
    for (DeviceBuffer* b : {&r.states_out, &r.states_lse, &r.out, &r.out_lse, &r.max_lse, &r.sums})
      if (b->get()) b->fill_bytes(0xFF);  // NaN: whatever is not written shows
    PA_CUDA_CHECK(cudaDeviceSynchronize());
  }
  m.enqueue(false);
  m.synchronize_all();
  ContextParallelResult res;
  res.ranks_agree = true;
  for (Rank& r : m.ranks) {
    PA_CUDA_CHECK(cudaSetDevice(r.device));
    std::vector<float> out = download_decoded(r.out, m.out_elems(), m.dtype);
    std::vector<float> lse = download_floats(r.out_lse, m.rows());
    res.plans.push_back(r.shard->describe());
    if (r.device == 0) {
      res.out = std::move(out);
      res.lse = std::move(lse);
      continue;
    }
    res.ranks_agree = res.ranks_agree && same_bits(out, res.out) && same_bits(lse, res.lse);
  }
  return res;
}

ContextParallelTiming ContextParallel::time(int iters, int warmup) {
  const DeviceScope keep;
  Impl& m = *impl_;
  if (iters < 1)
    throw std::invalid_argument("context parallelism: iters " + std::to_string(iters) + "; accepted: >= 1");
  // At least one untimed iteration: NCCL sets up its connections in the first
  // collectives, on the host, which a device waiting for its release must not wait out.
  if (warmup < 1)
    throw std::invalid_argument("context parallelism: warmup " + std::to_string(warmup) + "; accepted: >= 1");
  for (int i = 0; i < warmup; ++i) m.enqueue(false);  // connections set up, caches warm
  m.synchronize_all();
  const int n = m.n();
  std::vector<float> total, exchange, merge;
  std::vector<std::vector<float>> decode(n);
  for (int i = 0; i < iters; ++i) {
    m.enqueue(true);
    m.synchronize_all();
    if (m.flag[1] != 0)
      throw std::runtime_error(
          "context parallelism: a device waited " + std::to_string(kReleaseTimeoutNs / 1000000000ull) +
          " s for the host's release of timed iteration " + std::to_string(i) +
          " and started alone: the host blocked while queueing the iteration; these times would not be of "
          "devices started together");
    float worst_total = 0, worst_merge = 0, last_decode = -1, its_exchange = 0;
    for (int r = 0; r < n; ++r) {
      Rank& k = m.ranks[r];
      float t[3] = {}, all = 0;
      for (int j = 0; j < 3; ++j) PA_CUDA_CHECK(cudaEventElapsedTime(&t[j], k.ev[j], k.ev[j + 1]));
      PA_CUDA_CHECK(cudaEventElapsedTime(&all, k.ev[0], k.ev[3]));
      decode[r].push_back(t[0]);
      worst_total = std::max(worst_total, all);
      worst_merge = std::max(worst_merge, t[2]);
      if (t[0] > last_decode) {
        last_decode = t[0];
        its_exchange = t[1];
      }
    }
    total.push_back(worst_total);
    exchange.push_back(its_exchange);
    merge.push_back(worst_merge);
  }
  ContextParallelTiming t;
  t.iters = iters;
  t.total_ms = median_of(total);
  t.exchange_ms = median_of(exchange);
  t.merge_ms = median_of(merge);
  const std::int64_t state = m.g.state_bytes_per_shard();
  for (int r = 0; r < n; ++r) {
    t.decode_ms.push_back(median_of(decode[r]));
    t.kv_bytes.push_back(m.ranks[r].shard->kv_bytes());
  }
  // Ring algorithms: an all-gather brings each rank the N-1 other states; an
  // all-reduce is a reduce-scatter plus an all-gather, 2 (N-1)/N of its buffer.
  t.exchange_bytes = m.opt.exchange == StateExchange::all_gather
                         ? state * (n - 1)
                         : 2 * (n - 1) * (state + m.g.rows_per_shard() * static_cast<std::int64_t>(sizeof(float))) / n;
  return t;
}

}  // namespace pa::kernels
