// Context parallelism over several GPUs through NCCL
// (pa/kernels/context_parallel_nccl.hpp): one process, one communicator and
// one stream per device, the collectives of all devices in one NCCL group.
#include "pa/kernels/context_parallel_nccl.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "pa/kernels/api.hpp"
#include "pa/kernels/context_parallel.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/shard_merge.hpp"

#define PA_NCCL_CHECK(call)                                                                                  \
  do {                                                                                                       \
    const ncclResult_t pa_nccl_r_ = (call);                                                                  \
    if (pa_nccl_r_ != ncclSuccess)                                                                           \
      throw std::runtime_error(std::string(__FILE__) + ":" + std::to_string(__LINE__) + ": " #call " failed: " + \
                               ncclGetErrorString(pa_nccl_r_));                                              \
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

std::string nccl_version_text() {
  int v = 0;
  PA_NCCL_CHECK(ncclGetVersion(&v));
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z since 2.9.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

namespace {

// How long a device waits for the host's release before it goes on anyway
// (a timing loop never hangs; a release that late shows in the times).
constexpr unsigned long long kReleaseTimeoutNs = 2'000'000'000ull;

struct Rank {
  int device = 0;
  std::unique_ptr<ShardDecoder> shard;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  cudaEvent_t ev[4] = {};  // start, decoded, exchanged, merged
  // all_gather: every shard's state (shard-major); sums: this rank's state only.
  DeviceBuffer states_out, states_lse;
  DeviceBuffer max_lse, sums;  // sums
  DeviceBuffer out, out_lse;
};

}  // namespace

struct ContextParallel::Impl {
  ContextParallelOptions opt;
  ShardedStateGeometry g;
  DType dtype = DType::f16;
  std::vector<Rank> ranks;
  int* flag = nullptr;  // pinned, mapped: the host's release of a timed iteration
  int release = 0;

  std::size_t rows() const { return static_cast<std::size_t>(g.rows_per_shard()); }
  std::size_t out_elems() const { return rows() * g.state.head_size; }

  float* own_state_out(Rank& r) const {
    return static_cast<float*>(r.states_out.get()) + (opt.exchange == StateExchange::all_gather ? r.device * out_elems() : 0);
  }
  float* own_state_lse(Rank& r) const {
    return static_cast<float*>(r.states_lse.get()) + (opt.exchange == StateExchange::all_gather ? r.device * rows() : 0);
  }

  // One iteration on every device: decode, exchange, merge, with the four
  // events around the parts; when timed, every device first waits for the
  // host, which releases them all once everything is queued.
  void enqueue(bool timed) {
    if (timed) ++release;
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      if (timed) launch_wait_host_flag(flag, release, kReleaseTimeoutNs, r.stream);
      PA_CUDA_CHECK(cudaEventRecord(r.ev[0], r.stream));
      r.shard->decode(own_state_out(r), own_state_lse(r), r.stream);
      PA_CUDA_CHECK(cudaEventRecord(r.ev[1], r.stream));
    }
    if (opt.exchange == StateExchange::all_gather) {
      // In place: rank r's state already sits in its slot of the gathered buffer.
      PA_NCCL_CHECK(ncclGroupStart());
      for (Rank& r : ranks) {
        PA_NCCL_CHECK(ncclAllGather(own_state_out(r), r.states_out.get(), out_elems(), ncclFloat, r.comm, r.stream));
        PA_NCCL_CHECK(ncclAllGather(own_state_lse(r), r.states_lse.get(), rows(), ncclFloat, r.comm, r.stream));
      }
      PA_NCCL_CHECK(ncclGroupEnd());
    } else {
      for (Rank& r : ranks) {
        PA_CUDA_CHECK(cudaSetDevice(r.device));
        PA_CUDA_CHECK(cudaMemcpyAsync(r.max_lse.get(), r.states_lse.get(), rows() * sizeof(float),
                                      cudaMemcpyDeviceToDevice, r.stream));
      }
      PA_NCCL_CHECK(ncclGroupStart());
      for (Rank& r : ranks)
        PA_NCCL_CHECK(ncclAllReduce(r.max_lse.get(), r.max_lse.get(), rows(), ncclFloat, ncclMax, r.comm, r.stream));
      PA_NCCL_CHECK(ncclGroupEnd());
      for (Rank& r : ranks) {
        PA_CUDA_CHECK(cudaSetDevice(r.device));
        launch_weigh_state(sum_args(r), r.stream);
      }
      PA_NCCL_CHECK(ncclGroupStart());
      for (Rank& r : ranks)
        PA_NCCL_CHECK(ncclAllReduce(r.sums.get(), r.sums.get(), state_sum_elems(g.rows_per_shard(), g.state.head_size),
                                    ncclFloat, ncclSum, r.comm, r.stream));
      PA_NCCL_CHECK(ncclGroupEnd());
    }
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      PA_CUDA_CHECK(cudaEventRecord(r.ev[2], r.stream));
      if (opt.exchange == StateExchange::all_gather) {
        ShardMergeArgs m;
        m.states_out = static_cast<const float*>(r.states_out.get());
        m.states_lse = static_cast<const float*>(r.states_lse.get());
        m.g = g;
        m.out = r.out.get();
        m.out_dtype = dtype;
        m.out_lse = static_cast<float*>(r.out_lse.get());
        launch_merge_shards(m, r.stream);
      } else {
        launch_normalize_sums(sum_args(r), r.stream);
      }
      PA_CUDA_CHECK(cudaEventRecord(r.ev[3], r.stream));
    }
    if (timed) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *static_cast<volatile int*>(flag) = release;
    }
  }

  StateSumArgs sum_args(Rank& r) const {
    StateSumArgs a;
    a.state_out = static_cast<const float*>(r.states_out.get());
    a.state_lse = static_cast<const float*>(r.states_lse.get());
    a.max_lse = static_cast<const float*>(r.max_lse.get());
    a.sums = static_cast<float*>(r.sums.get());
    a.out = r.out.get();
    a.out_dtype = dtype;
    a.out_lse = static_cast<float*>(r.out_lse.get());
    a.rows = g.rows_per_shard();
    a.head_size = g.state.head_size;
    return a;
  }

  void synchronize_all() {
    for (Rank& r : ranks) {
      PA_CUDA_CHECK(cudaSetDevice(r.device));
      PA_CUDA_CHECK(cudaStreamSynchronize(r.stream));
    }
  }

  ~Impl() {
    // Each rank's resources freed with its own device current; errors here
    // cannot be reported (a destructor), and the process may be unwinding.
    for (Rank& r : ranks) {
      if (cudaSetDevice(r.device) != cudaSuccess) continue;
      cudaStreamSynchronize(r.stream);
      if (r.comm) ncclCommDestroy(r.comm);
      for (cudaEvent_t e : r.ev)
        if (e) cudaEventDestroy(e);
      r.shard.reset();
      r.states_out = {};
      r.states_lse = {};
      r.max_lse = {};
      r.sums = {};
      r.out = {};
      r.out_lse = {};
      if (r.stream) cudaStreamDestroy(r.stream);
    }
    if (flag) cudaFreeHost(flag);
  }
};

ContextParallel::ContextParallel(const PagedProblem& p, const ContextParallelOptions& opt)
    : impl_(std::make_unique<Impl>()) {
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
  make_shard_plan_checked(opt.policy, opt.devices, p.spec.block_size, 0);  // names a bad policy
  m.opt = opt;
  m.g = sharded_state_geometry(p, opt.devices);
  m.dtype = p.spec.dtype;
  const int n = opt.devices;
  m.ranks.resize(n);
  for (int r = 0; r < n; ++r) {
    Rank& k = m.ranks[r];
    k.device = r;
    PA_CUDA_CHECK(cudaSetDevice(r));
    k.shard = std::make_unique<ShardDecoder>(p, opt.policy, n, r);
    PA_CUDA_CHECK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
    for (cudaEvent_t& e : k.ev) PA_CUDA_CHECK(cudaEventCreate(&e));
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
  // Multicast off before NCCL reads its environment (see the header).
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<ncclComm_t> comms(n);
  std::vector<int> devs(n);
  for (int r = 0; r < n; ++r) devs[r] = r;
  PA_NCCL_CHECK(ncclCommInitAll(comms.data(), n, devs.data()));
  for (int r = 0; r < n; ++r) m.ranks[r].comm = comms[r];
  PA_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&m.flag), sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *m.flag = 0;
}

ContextParallel::~ContextParallel() = default;

const ContextParallelOptions& ContextParallel::options() const { return impl_->opt; }

ContextParallelResult ContextParallel::run() {
  Impl& m = *impl_;
  for (Rank& r : m.ranks) {
    PA_CUDA_CHECK(cudaSetDevice(r.device));
    for (DeviceBuffer* b : {&r.states_out, &r.states_lse, &r.out, &r.out_lse}) b->fill_bytes(0xFF);
    if (m.opt.exchange == StateExchange::sums) {
      r.max_lse.fill_bytes(0xFF);
      r.sums.fill_bytes(0xFF);
    }
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
    res.plans.push_back(r.shard->plan().describe());
    if (r.device == 0) {
      res.out = std::move(out);
      res.lse = std::move(lse);
      continue;
    }
    res.ranks_agree = res.ranks_agree && out.size() == res.out.size() && lse.size() == res.lse.size() &&
                      std::memcmp(out.data(), res.out.data(), out.size() * sizeof(float)) == 0 &&
                      std::memcmp(lse.data(), res.lse.data(), lse.size() * sizeof(float)) == 0;
  }
  return res;
}

ContextParallelTiming ContextParallel::time(int iters, int warmup) {
  Impl& m = *impl_;
  if (iters < 1) throw std::invalid_argument("context parallelism: iters " + std::to_string(iters) + "; accepted: >= 1");
  for (int i = 0; i < warmup; ++i) m.enqueue(false);  // connections set up, caches warm
  m.synchronize_all();
  const int n = static_cast<int>(m.ranks.size());
  std::vector<float> total, exchange, merge;
  std::vector<std::vector<float>> decode(n);
  for (int i = 0; i < iters; ++i) {
    m.enqueue(true);
    m.synchronize_all();
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
