// pa-bench: the decode-attention benchmark.
//
// For each shape and dtype it times v1 (stage 5), v2 (stage 6), the
// optimized kernel (stage 8) and, on the shared-prefix problem, cascade
// (stage 7): median of >= 100 CUDA-event timings after warm-up, one event pair
// per launch. KV comes from a pool far larger than L2: R disjoint sets of
// physical blocks (R * set bytes >= --pool-gb), each with its own shuffled
// block tables and Q, rotated every launch, so no launch finds its KV in L2.
// The device-to-device copy bandwidth ((bytes read + bytes written) / time)
// is measured in the same run; each row reports time, GB/s of KV read (the
// bytes of the tokens in the contexts, K and V, each once) and that as a
// percentage of the copy bandwidth. Before each timed launch a 50 us GPU
// busy-wait kernel runs, so the host's launch path is enqueued while the GPU is
// busy and the event pair times the kernel alone. Kernels not in this build or refusing a
// shape are reported as such, never timed as something else. With --layouts
// stage 8 is timed again on nhd / hnd caches: the same pool's elements moved
// into that layout on the device (relayout_kv), so its output must agree with
// the vLLM-layout run's. Every other
// kernel's output on the first set must agree with stage 8's on it
// (bench_check.hpp); a row that does not, or a kernel that fails where it
// should run, is an error: the file keeps every row and pa-bench exits 1.
//
// The command line, the shapes, the pool sizing and the JSON file are plain
// C++ (bench_options.hpp, bench_json.hpp: tested without a GPU); this file is
// what needs CUDA. `pa-bench --help` lists the options.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_paged_read.cuh"
#include "bench_json.hpp"
#include "bench_options.hpp"
#include "pa/core/atomic_file.hpp"
#include "pa/core/fp8.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/optimized_split.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/stage_launch.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/multilevel_cascade.hpp"
#include "pa/core/multilevel_cascade.hpp"

namespace {

using namespace pa;
using bench::BenchOptions;
using bench::BenchRow;
using Shape = bench::BenchShape;

using kernels::DeviceBuffer;

// A value in [-1, 1) from a hash of the index and the seed: fills GBs at
// memory speed, never zeros.
__device__ float hashed_unit(std::size_t i, std::uint32_t seed) {
  std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed ^ static_cast<std::uint32_t>(i >> 32) * 40503u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  h *= 3266489917u;
  h ^= h >> 16;
  return static_cast<float>(h & 0xFFFFFF) / 8388608.0f - 1.0f;
}

// Random 16-bit values in [-scale, scale) (fp16 or bf16 bit patterns).
__global__ void fill_random16(std::uint16_t* dst, std::size_t n, std::uint32_t seed, int bf16, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float f = hashed_unit(i, seed) * scale;
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (bf16) {
      dst[i] = static_cast<std::uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
    } else {
      dst[i] = __half_as_ushort(__float2half_rn(f));
    }
  }
}

// Random fp8 codes of values in [-1, 1) (pa/core/fp8.hpp's conversion, the
// one the reference uses): an fp8 KV pool at scale 1.
__global__ void fill_random8(std::uint8_t* dst, std::size_t n, std::uint32_t seed, Fp8Format f) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = fp8_from_float(f, hashed_unit(i, seed));
}

// The pool's 2-byte elements moved from vLLM's layout (k, v) into `to`'s one
// K/V tensor (kv): pa/index/kv_layout.hpp's offsets on both sides, one
// element (page, kv head, d, t) per thread step.
__global__ void relayout_kv(const std::uint16_t* k, const std::uint16_t* v, KvLayoutGeometry from, KvLayoutGeometry to,
                            std::uint16_t* kv) {
  const CacheGeometry& g = from.cache;
  const std::size_t n = static_cast<std::size_t>(g.num_blocks) * g.num_kv_heads * g.head_size * g.block_size;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % g.head_size);
    const int t = static_cast<int>(i / g.head_size % g.block_size);
    const int kvh = static_cast<int>(i / (static_cast<std::size_t>(g.head_size) * g.block_size) % g.num_kv_heads);
    const int page = static_cast<int>(i / (static_cast<std::size_t>(g.head_size) * g.block_size * g.num_kv_heads));
    kv[to.k_offset(page, kvh, d, t)] = k[from.k_offset(page, kvh, d, t)];
    kv[to.v_offset(page, kvh, d, t)] = v[from.v_offset(page, kvh, d, t)];
  }
}

// Keeps the GPU busy while the host enqueues the next timed launch, so the
// event pair measures the kernel, not the host's launch path (the GPU would
// otherwise sit idle between the first event and the kernel's arrival).
__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}

// The second ceiling beside the copy: a kernel that only reads. Each thread
// keeps four independent 16-byte streaming loads in flight per round and folds
// them into an XOR that decides a store, so no load can be dropped.
__global__ void read_stream(const uint4* p, std::size_t n16, unsigned* sink) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
                d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    const uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;  // the buffer holds equal bytes: never true, but unknown to the compiler
}

// read_stream's grid shapes, (CTAs per SM, threads per CTA): every use times
// both and keeps the faster.
constexpr std::pair<int, int> kReadStreamGrids[] = {{4, 512}, {16, 256}};

// GB/s of `bytes` read in `us` microseconds.
double gbps_of(double bytes, double us) { return bytes / (us * 1e-6) / 1e9; }

// Bytes read per second by read_stream over `bytes` (two buffers used in
// turn, each far larger than L2), the median of `iters` launches; the faster
// of the grid shapes of kReadStreamGrids.
double measure_read_bandwidth_gbs(std::size_t bytes, int iters, int sm_count) {
  DeviceBuffer a(bytes), b(bytes), sink(sizeof(unsigned));
  a.fill_bytes(1);
  b.fill_bytes(1);
  const std::size_t n16 = bytes / 16;
  double best = 0;
  for (const auto [per_sm, threads] : kReadStreamGrids) {
    auto launch = [&](int i) {
      read_stream<<<per_sm * sm_count, threads>>>(static_cast<const uint4*>(i % 2 ? b.get() : a.get()), n16,
                                                  static_cast<unsigned*>(sink.get()));
      PA_CUDA_CHECK(cudaGetLastError());
    };
    const std::vector<float> ms = kernels::time_indexed_launches_ms(launch, iters, /*warmup=*/3, [](int) {});
    best = std::max(best, gbps_of(static_cast<double>(n16 * 16), kernels::median_of(ms) * 1e3));
  }
  return best;
}

void fill(void* p, std::size_t elems, std::uint32_t seed, DType dt, float scale) {
  fill_random16<<<4096, 256>>>(static_cast<std::uint16_t*>(p), elems, seed, dt == DType::bf16 ? 1 : 0, scale);
  PA_CUDA_CHECK(cudaGetLastError());
}
// The KV pool: in the dtype, or fp8 codes.
void fill_kv(void* p, std::size_t elems, std::uint32_t seed, DType dt, KvDType kv) {
  if (!is_fp8(kv)) return fill(p, elems, seed, dt, 1.0f);
  fill_random8<<<4096, 256>>>(static_cast<std::uint8_t*>(p), elems, seed, fp8_format_of(kv));
  PA_CUDA_CHECK(cudaGetLastError());
}

double pct_of(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))];
}

// One problem instance set: R rotations of (Q, block tables) over disjoint KV
// blocks, on the device, described for the runner by `layout`
// (problem_layout: the shape, no host data) and `views`.
struct Problem {
  Shape s;
  DType dt;
  int R = 0, blocks_per_seq = 0, set_blocks = 0;
  std::size_t block_elems = 0;
  DeviceBuffer k, v, q, tables, ctx, slopes;
  PagedProblem layout;
  kernels::DeviceInputViews views;
  double kv_bytes = 0, kv_unique = 0;
  double pool_bytes = 0;  // K and V of all R sets (kv_pool_of)
};

void build_problem(Problem& P, const Shape& s, DType dt, KvDType kv, const BenchOptions& o, std::mt19937_64& rng) {
  P.s = s;
  P.dt = dt;
  const int E = dtype_bytes(dt);
  const int EKV = kv_elem_bytes(dt, kv);
  P.blocks_per_seq = ceil_div(s.context, s.block_size);
  const int prefix_blocks = s.prefix / s.block_size;
  // The pool (its sets and their size) as the JSON reports it: bench_options.hpp.
  const bench::KvPool pool = bench::kv_pool_of(s, EKV, o);
  P.set_blocks = static_cast<int>(pool.set_blocks);
  P.R = pool.sets;
  P.pool_bytes = pool.bytes;
  P.block_elems = static_cast<std::size_t>(s.kv_heads) * s.head_size * s.block_size;
  // V2 and the cascade's suffix decode in partitions of 512 tokens.
  ProblemSpec spec;
  spec.dtype = dt;
  spec.head_size = s.head_size;
  spec.block_size = s.block_size;
  spec.num_heads = s.heads;
  spec.num_kv_heads = s.kv_heads;
  spec.context_lens.resize(s.seqs);
  for (int q = 0; q < s.seqs; ++q) spec.context_lens[q] = s.context_of(q);
  spec.shared_prefix_len = s.prefix;
  spec.partition_size = 512;
  spec.alibi = o.alibi;
  spec.kv_dtype = kv;  // fp8: scales 1 (problem_layout), the codes' values
  P.layout = problem_layout(spec, P.R * P.set_blocks);
  // K+V bytes read, the one formula (ProblemSpec::kv_bytes): every token once
  // per sequence; the cascade's row counts the shared prefix once.
  P.kv_bytes = static_cast<double>(spec.kv_bytes());
  P.kv_unique = static_cast<double>(spec.kv_bytes(/*shared_prefix_once=*/true));
  const std::size_t pool_elems = static_cast<std::size_t>(P.R) * P.set_blocks * P.block_elems;
  P.k = DeviceBuffer(pool_elems * EKV);
  P.v = DeviceBuffer(pool_elems * EKV);
  fill_kv(P.k.get(), pool_elems, static_cast<std::uint32_t>(rng()), dt, kv);
  fill_kv(P.v.get(), pool_elems, static_cast<std::uint32_t>(rng()), dt, kv);
  const std::size_t q_elems = static_cast<std::size_t>(s.seqs) * s.heads * s.head_size;
  P.q = DeviceBuffer(q_elems * E * P.R);
  fill(P.q.get(), q_elems * P.R, static_cast<std::uint32_t>(rng()), dt, 2.0f);
  // Block tables: set r uses physical blocks [r*set_blocks, (r+1)*set_blocks), shuffled;
  // the prefix blocks (cascade) are the same physical blocks for every sequence;
  // a ragged shape's shorter sequences leave the rest of their row at the set's
  // first block (never read).
  std::vector<int> tables(static_cast<std::size_t>(P.R) * s.seqs * P.blocks_per_seq);
  std::vector<int> perm(P.set_blocks);
  for (int r = 0; r < P.R; ++r) {
    std::iota(perm.begin(), perm.end(), r * P.set_blocks);
    std::shuffle(perm.begin(), perm.end(), rng);
    int next = prefix_blocks;
    for (int sq = 0; sq < s.seqs; ++sq) {
      const int used = ceil_div(s.context_of(sq), s.block_size);
      for (int b = 0; b < P.blocks_per_seq; ++b)
        tables[(static_cast<std::size_t>(r) * s.seqs + sq) * P.blocks_per_seq + b] =
            b < prefix_blocks ? perm[b] : b < used ? perm[next++] : r * P.set_blocks;
    }
  }
  P.tables = DeviceBuffer(tables.size() * 4);
  P.tables.upload(tables.data(), tables.size() * 4);
  P.ctx = DeviceBuffer(spec.context_lens.size() * 4);
  P.ctx.upload(spec.context_lens.data(), spec.context_lens.size() * 4);
  P.views = kernels::DeviceInputViews{P.q.get(), P.k.get(), P.v.get(), static_cast<const int*>(P.tables.get()),
                                      static_cast<const int*>(P.ctx.get()), P.R};
  if (P.layout.has_alibi()) {
    const std::vector<float>& sl = P.layout.alibi_slopes;
    P.slopes = DeviceBuffer(sl.size() * sizeof(float));
    P.slopes.upload(sl.data(), sl.size() * sizeof(float));
    P.views.alibi_slopes = static_cast<const float*>(P.slopes.get());
  }
  PA_CUDA_CHECK(cudaDeviceSynchronize());
}

// Times launch_rotation(r) (time_kernel: runner.launch(r)) for iters
// launches after a warm-up, rotating r over the R disjoint data sets
// (pa/kernels/event_timer.hpp: one event pair per
// timed launch, the busy-wait kernel before each). The warm-up runs the same
// loop (busy-wait, event pair, launch) for at least --warmup launches and
// --warmup-ms of wall time: on an H100, 10 warm-up launches (< 1 ms) left the
// first row of a process ~1 us slower at (1,32,8,4096) than the same kernel
// timed second, and 2000 warm-up launches (or a 200 us busy-wait) removed the
// difference (kernels/NOTES.md, the warm-up measurement): the host's launch path had not
// reached its steady state and outran the 50 us busy-wait.
template <class Launch>
void time_launches(BenchRow& row, int R, const BenchOptions& o, Launch&& launch_rotation) {
  auto busy_wait = [&](int) {
    if (o.spin_us > 0) spin_kernel<<<1, 1>>>(static_cast<unsigned long long>(o.spin_us) * 1000ull);
  };
  int done = 0;  // launches so far: the rotation continues across warm-up and timing
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  while (done < o.warmup || elapsed_ms() < o.warmup_ms) {
    constexpr int kRound = 8;
    (void)kernels::time_indexed_launches_ms([&](int i) { launch_rotation((done + i) % R); }, kRound, 0, busy_wait);
    done += kRound;
  }
  row.warmup_launches = done;
  const auto ms =
      kernels::time_indexed_launches_ms([&](int i) { launch_rotation((done + i) % R); }, o.iters, 0, busy_wait);
  row.timed = static_cast<int>(ms.size());
  row.median_us = kernels::median_of(ms) * 1e3;
  row.min_us = *std::min_element(ms.begin(), ms.end()) * 1e3;
  row.p10_us = pct_of(ms, 0.1) * 1e3;
  row.p90_us = pct_of(ms, 0.9) * 1e3;
}
void time_kernel(BenchRow& row, const Problem& P, const BenchOptions& o, kernels::StageRunner& runner) {
  time_launches(row, P.R, o, [&](int r) { runner.launch(r); });
}

// --paged-read (cli/bench_paged_read.cuh): stage 8's bytes read with nothing
// done with them, timed like every row, into stage 8's row (paged_read_us ..
// held_bulk_us) and printed beside its time.
void time_paged_read(const Problem& P, const BenchOptions& o, BenchRow& opt_row, double copy_gbps,
                     int sm_count) {
  const Shape& s = P.s;
  const std::string name = std::to_string(s.seqs) + "x" + std::to_string(s.heads) + "x" + std::to_string(s.kv_heads) +
                           "x" + std::to_string(s.context) + " hs" + std::to_string(s.head_size);
  if (s.prefix > 0 || static_cast<long long>(s.head_size) * s.block_size * dtype_bytes(P.dt) != bench::kPagedTileBytes ||
      opt_row.status != "ok") {
    std::printf("paged-read %s: skipped (needs 4 KB tiles, no shared prefix, and stage 8's row)\n", name.c_str());
    return;
  }
  kernels::RunOptions ro;
  ro.splits = o.force_splits;
  const kernels::StageRunner runner(P.layout, P.views, kernels::Stage::optimized, ro);
  const OptimizedPlan& plan = runner.optimized_plan();
  const std::size_t table_ints = static_cast<std::size_t>(s.seqs) * P.blocks_per_seq;  // one rotation's rows
  bench::PagedReadArgs a;
  a.k = static_cast<const unsigned char*>(P.k.get());
  a.v = static_cast<const unsigned char*>(P.v.get());
  a.context_lens = static_cast<const int*>(P.ctx.get());
  a.max_blocks = P.blocks_per_seq;
  a.block_size = s.block_size;
  a.kv_heads = s.kv_heads;
  a.split_blocks = plan.split_blocks;
  DeviceBuffer sink(sizeof(unsigned));
  a.sink = static_cast<unsigned*>(sink.get());
  const dim3 grid(plan.splits, s.kv_heads, s.seqs);
  PA_CUDA_CHECK(cudaFuncSetAttribute(bench::paged_read_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     bench::kPagedSmemBytes));
  PA_CUDA_CHECK(cudaFuncSetAttribute(bench::paged_read_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     bench::kPagedSmemBytes));
  auto paged = [&](auto kernel, long long step_cycles = 0) {
    BenchRow row;
    time_launches(row, P.R, o, [&](int r) {
      bench::PagedReadArgs ar = a;
      ar.tables = static_cast<const int*>(P.tables.get()) + r * table_ints;
      ar.step_cycles = step_cycles;
      kernel<<<grid, bench::kPagedWarps * 32, bench::kPagedSmemBytes>>>(ar);
      PA_CUDA_CHECK(cudaGetLastError());
    });
    return row.median_us;
  };
  const double cp_async_us = paged(bench::paged_read_kernel<false>);
  const double bulk_us = paged(bench::paged_read_kernel<true>);
  std::string held;  // both paged reads holding each warp after every step, if asked for
  if (o.paged_read_step_ns > 0) {
    int khz = 0;
    PA_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const long long cycles = static_cast<long long>(o.paged_read_step_ns) * khz / 1000000;  // at the maximum clock
    opt_row.held_step_ns = o.paged_read_step_ns;
    opt_row.held_read_us = paged(bench::paged_read_kernel<false>, cycles);
    opt_row.held_bulk_us = paged(bench::paged_read_kernel<true>, cycles);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "; holding each warp %d ns a step (%lld cycles at %d MHz): paged cp.async %.1f us, paged bulk %.1f us",
                  o.paged_read_step_ns, cycles, khz / 1000, opt_row.held_read_us, opt_row.held_bulk_us);
    held = buf;
  }
  // The contiguous ceiling at this size: read_stream over kv_bytes of the K
  // pool, a different window each launch (the pool is far larger than L2).
  const std::size_t n16 = static_cast<std::size_t>(P.kv_bytes) / 16;
  const std::size_t pool16 = P.k.size() / 16;
  double contiguous_us = 0;
  for (const auto [per_sm, threads] : kReadStreamGrids) {
    BenchRow row;
    time_launches(row, P.R, o, [&](int r) {
      const std::size_t first = pool16 > n16 ? (static_cast<std::size_t>(r) * n16) % (pool16 - n16) : 0;
      read_stream<<<per_sm * sm_count, threads>>>(static_cast<const uint4*>(P.k.get()) + first, std::min(n16, pool16),
                                                  a.sink);
      PA_CUDA_CHECK(cudaGetLastError());
    });
    contiguous_us = contiguous_us == 0 ? row.median_us : std::min(contiguous_us, row.median_us);
  }
  opt_row.paged_read_us = cp_async_us;
  opt_row.paged_bulk_us = bulk_us;
  opt_row.contiguous_read_us = contiguous_us;
  auto pct = [&](double us) { return 100.0 * gbps_of(P.kv_bytes, us) / copy_gbps; };
  std::printf("paged-read %s %s (%.1f MB, %d splits): stage 8 %.1f us (%.1f%% of copy); contiguous read-only %.1f us "
              "(%.1f%%); paged cp.async %.1f us (%.1f%%); paged bulk %.1f us (%.1f%%)%s\n",
              name.c_str(), dtype_name(P.dt), P.kv_bytes / 1e6, plan.splits, opt_row.median_us,
              pct(opt_row.median_us), contiguous_us, pct(contiguous_us), cp_async_us, pct(cp_async_us), bulk_us,
              pct(bulk_us), held.c_str());
}

// End-to-end latency of stage 8 on a small shape: what a decode step costs
// with the host's launch inside the measurement (the rows' median hides it
// behind the busy-wait). On one stream of its own, rotating over the pool:
//  - single: one launch between an event pair, nothing before it: the GPU
//    waits for the host's launch path between the two events;
//  - back-to-back: kChain launches enqueued together between one event pair,
//    per launch (the host keeps ahead only if its launch path is faster than
//    the kernel);
//  - graph: the same kChain launches captured once into a CUDA graph and
//    replayed, per launch (the launch path once per graph).
// Medians of --iters singles and of 7 chains each. The launches go through
// StageLaunch (the runner's launcher) with the runner's output and workspace.
constexpr double kLatencyMaxKvBytes = 600e6;  // shapes whose launch cost is a visible part of the time
void time_latency(BenchRow& row, const Problem& P, const BenchOptions& o, const kernels::RunOptions& ro) {
  constexpr int kChain = 64, kReps = 7;
  kernels::StageRunner runner(P.layout, P.views, kernels::Stage::optimized, ro);
  const kernels::StageArgs& args = runner.stage_args();
  const kernels::StageLaunch launcher(args, kernels::Stage::optimized, ro);
  const kernels::StageBuffers buffers{args.out, nullptr, runner.workspace(), /*workspace_fresh=*/false};
  struct Resources {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ~Resources() {
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
      if (stream) cudaStreamDestroy(stream);
    }
  } res;
  PA_CUDA_CHECK(cudaStreamCreateWithFlags(&res.stream, cudaStreamNonBlocking));
  PA_CUDA_CHECK(cudaEventCreate(&res.start));
  PA_CUDA_CHECK(cudaEventCreate(&res.stop));
  int next = 0;
  auto launch = [&] {
    const int r = next++ % P.R;
    const void* q = static_cast<const char*>(args.q) + static_cast<std::size_t>(r) * P.s.seqs *
                                                           P.layout.q_stride * dtype_bytes(P.dt);
    const int* tables = args.block_tables + static_cast<std::size_t>(r) * P.s.seqs * P.layout.max_blocks_per_seq;
    (void)launcher.launch(buffers, res.stream, q, tables);
  };
  auto elapsed_us = [&] {
    PA_CUDA_CHECK(cudaEventSynchronize(res.stop));
    float ms = 0;
    PA_CUDA_CHECK(cudaEventElapsedTime(&ms, res.start, res.stop));
    return ms * 1e3f;
  };
  for (int i = 0; i < kChain; ++i) launch();  // warm-up
  PA_CUDA_CHECK(cudaStreamSynchronize(res.stream));
  std::vector<float> single, chain, graph;
  for (int i = 0; i < o.iters; ++i) {
    PA_CUDA_CHECK(cudaEventRecord(res.start, res.stream));
    launch();
    PA_CUDA_CHECK(cudaEventRecord(res.stop, res.stream));
    single.push_back(elapsed_us());
  }
  for (int k = 0; k < kReps; ++k) {
    PA_CUDA_CHECK(cudaEventRecord(res.start, res.stream));
    for (int i = 0; i < kChain; ++i) launch();
    PA_CUDA_CHECK(cudaEventRecord(res.stop, res.stream));
    chain.push_back(elapsed_us() / kChain);
  }
  PA_CUDA_CHECK(cudaStreamBeginCapture(res.stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kChain; ++i) launch();
  PA_CUDA_CHECK(cudaStreamEndCapture(res.stream, &res.graph));
  PA_CUDA_CHECK(cudaGraphInstantiate(&res.exec, res.graph, 0));
  PA_CUDA_CHECK(cudaGraphLaunch(res.exec, res.stream));  // warm-up
  for (int k = 0; k < kReps; ++k) {
    PA_CUDA_CHECK(cudaEventRecord(res.start, res.stream));
    PA_CUDA_CHECK(cudaGraphLaunch(res.exec, res.stream));
    PA_CUDA_CHECK(cudaEventRecord(res.stop, res.stream));
    graph.push_back(elapsed_us() / kChain);
  }
  PA_CUDA_CHECK(cudaStreamSynchronize(res.stream));
  row.single_us = kernels::median_of(single);
  row.b2b_us = kernels::median_of(chain);
  row.graph_us = kernels::median_of(graph);
}

// Max |a - b| of two decoded outputs (rotation 0 of each); infinity for a NaN.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// One row: a runner for the stage over the problem's device inputs, timed;
// then one launch on rotation 0, whose output is compared with `ref` (stage
// 8's, when it ran) or, for stage 8, kept as `ref`. A refusal
// (std::invalid_argument) gets `refusal` as the status's prefix, any other
// failure "error: ".
BenchRow time_row(BenchRow row, const Problem& P, const BenchOptions& o, kernels::Stage stage,
                  const kernels::RunOptions& ro, std::vector<float>& ref, const char* refusal,
                  const kernels::DeviceInputViews* views = nullptr) {
  try {
    kernels::StageRunner runner(P.layout, views ? *views : P.views, stage, ro);
    if (!runner.plan().empty()) row.plan = runner.plan();
    time_kernel(row, P, o, runner);
    runner.launch(0);
    std::vector<float> out = runner.output();
    if (stage == kernels::Stage::optimized && views == nullptr) {  // stage 8 on vLLM's layout: the reference
      ref = std::move(out);
    } else if (!ref.empty()) {
      row.xcheck_max_abs = max_abs_diff(ref, out);
      const std::string bad = bench::xcheck_failure(ref, out, P.dt);
      if (!bad.empty()) row.status = "error: its output differs from stage 8's on the same inputs: " + bad;
    }
  } catch (const std::invalid_argument& e) {  // the kernel refused the problem, by name
    row.status = std::string(refusal) + e.what();
    cudaGetLastError();
  } catch (const std::exception& e) {  // it failed while running: never a refusal
    row.status = std::string("error: ") + e.what();
    cudaGetLastError();
  }
  return row;
}

void finish_row(BenchRow& row, double copy_gbps) {
  if (row.status != "ok" || row.median_us <= 0) return;
  row.gbps = gbps_of(row.kv_bytes, row.median_us);
  row.pct_copy = 100.0 * row.gbps / copy_gbps;
}

void run_shape(const Shape& s, DType dt, KvDType kv, const BenchOptions& o, std::mt19937_64& rng, double copy_gbps,
               int sm_count, std::vector<BenchRow>& rows) {
  Problem P;
  build_problem(P, s, dt, kv, o, rng);
  auto new_row = [&](const char* k) {
    BenchRow r;
    r.kernel = k;
    r.dtype = dtype_name(dt);
    r.kv_dtype = kv_dtype_name(kv);
    r.shape = s;
    r.kv_bytes = P.kv_bytes;
    r.pool_sets = P.R;
    r.pool_bytes = P.pool_bytes;
    return r;
  };
  const bool cascade_shape = s.prefix > 0;
  auto finish = [&](BenchRow row) {
    finish_row(row, copy_gbps);
    rows.push_back(row);
    return row.status == "ok";
  };
  std::vector<float> ref;  // stage 8's output on rotation 0, the cross-check's reference

  kernels::RunOptions opt8;
  opt8.splits = o.force_splits;
  // Stage 8 should run wherever this build holds its instance: a failure there is an error; a missing
  // instance (a quick build, an fp8 cache at block size 8) is the build's choice, said as such.
  const char* opt_refusal =
      optimized_supported(dt, s.head_size, s.block_size, kv) ? "error: " : "unsupported: not built: ";
  BenchRow opt_row = time_row(new_row("optimized"), P, o, kernels::Stage::optimized, opt8, ref, opt_refusal);
  if (opt_row.status == "ok" && P.kv_bytes <= kLatencyMaxKvBytes && !cascade_shape) {
    try {
      time_latency(opt_row, P, o, opt8);
    } catch (const std::exception& e) {
      opt_row.status = std::string("error: end-to-end latency: ") + e.what();
      cudaGetLastError();
    }
  }
  if (o.paged_read && dt == o.dtypes.front() && !is_fp8(kv)) time_paged_read(P, o, opt_row, copy_gbps, sm_count);
  const bool opt_ok = finish(opt_row);
  // Stage 8 on the other layouts: the same elements, moved on the device.
  if (o.layouts.size() > 1) {
    DeviceBuffer moved;
    const CacheGeometry g = P.layout.cache;
    for (KvLayout l : o.layouts) {
      if (l == KvLayout::vllm) continue;
      BenchRow row = new_row("optimized");
      row.layout = kv_layout_name(l);
      if (is_fp8(kv) || !optimized_supported(dt, s.head_size, s.block_size, kv, l)) {
        row.status = std::string("unsupported: not built: stage 8 on layout ") + row.layout + " (" +
                     optimized_supported_list() + ")";
        finish(row);
        continue;
      }
      const KvLayoutGeometry to{l, g};
      if (moved.size() == 0) moved = DeviceBuffer(static_cast<std::size_t>(to.k_tensor_elems()) * 2);
      relayout_kv<<<4096, 256>>>(static_cast<const std::uint16_t*>(P.k.get()),
                                 static_cast<const std::uint16_t*>(P.v.get()), KvLayoutGeometry{KvLayout::vllm, g}, to,
                                 static_cast<std::uint16_t*>(moved.get()));
      PA_CUDA_CHECK(cudaGetLastError());
      PA_CUDA_CHECK(cudaDeviceSynchronize());
      kernels::DeviceInputViews views = P.views;
      views.k_cache = views.v_cache = moved.get();
      views.kv_layout = l;
      std::vector<float> none;  // stage 8 on vLLM's layout failed: nothing to compare with
      (void)finish(time_row(row, P, o, kernels::Stage::optimized, opt8, opt_ok ? ref : none, "error: ", &views));
    }
  }
  if (o.only_optimized) return;
  if (!opt_ok) ref.clear();
  (void)finish(time_row(new_row("v1"), P, o, kernels::Stage::warp_reduce, {}, ref, "unsupported: "));
  (void)finish(time_row(new_row("v2"), P, o, kernels::Stage::v2_partition, {}, ref, "unsupported: "));
  if (!cascade_shape) return;

  // --- cascade (stage 7), shared-prefix problem only ---
  BenchRow cascade = new_row("cascade");
  cascade.kv_bytes = P.kv_unique;  // what cascade must read: the prefix once
  (void)finish(time_row(cascade, P, o, kernels::Stage::cascade_merge, {}, ref, "unsupported: "));
  // Experiments (not rows of the JSON): other plans (kernels::CascadeOptions),
  // each timed whole, prefix alone (kernel + chunk reduce) and suffix alone,
  // on the same rotated data.
  for (const bench::CascadeSweepItem& sweep : o.cascade_sweep) {
    const kernels::CascadeParts parts[3] = {kernels::CascadeParts::all, kernels::CascadeParts::prefix_only,
                                            kernels::CascadeParts::suffix_only};
    double us[3];
    std::string plan, error;
    double xc = -1;
    for (int k = 0; k < 3 && error.empty(); ++k) {
      kernels::RunOptions ro;
      ro.cascade = sweep.options;
      ro.cascade_parts = parts[k];
      // The whole cascade (k == 0) is checked against stage 8's output; a part
      // alone is not the attention: it gets an empty reference, nothing is compared.
      std::vector<float> unchecked;
      const BenchRow r = time_row(new_row("sweep"), P, o, kernels::Stage::cascade_merge, ro,
                                  k == 0 ? ref : unchecked, "error ");
      if (r.status != "ok") error = r.status;
      us[k] = r.median_us;
      if (k == 0) {
        plan = r.plan;
        xc = r.xcheck_max_abs;
      }
    }
    if (!error.empty()) std::printf("sweep %s %s: %s\n", dtype_name(dt), sweep.text.c_str(), error.c_str());
    else
      std::printf("sweep %s %s: ran %s: all %.1f us, prefix %.1f, suffix %.1f, xcheck %.2g\n", dtype_name(dt),
                  sweep.text.c_str(), plan.c_str(), us[0], us[1], us[2], xc);
  }
}

// ---- the multi-level cascade benchmark (--multilevel) ---------------------------
// 128 requests, 32 query heads = 32 KV heads of 128, pages of 16: a 16384-
// token prefix shared by all, 8 groups of 16 requests sharing 4096 more, 256
// own tokens each (1.34 GB of distinct fp16 KV). Timed three ways over the
// same pages: the 3-level cascade, the 2-level one (the group spans read per
// request by stage 8) and stage 8 alone over every request's whole context
// (each shared page read once per request), all through MultiLevelCascadeRun
// (a 1-level cascade is stage 8 plus the fold of one state: a copy of the
// output). Two sets of pages and queries, used in turn, so a launch never
// finds the previous one's KV in L2; the busy-wait before each timed launch as
// for every other row.
struct MultiLevelSet {
  MultiLevelCascade c;
  DeviceBuffer q;
};

MultiLevelCascade multilevel_tables(int first_page, int requests, int page, std::mt19937_64& rng) {
  const int groups = 8, prefix = 16384, group_tokens = 4096, own = 256;
  std::vector<int> pages(static_cast<std::size_t>(prefix + groups * group_tokens + requests * own) / page);
  std::iota(pages.begin(), pages.end(), first_page);
  std::shuffle(pages.begin(), pages.end(), rng);
  std::size_t next = 0;
  auto level_of = [&](int num_groups, int tokens, auto group_of_request) {
    CascadeLevel l;
    l.groups.indptr.push_back(0);
    for (int g = 0; g < num_groups; ++g) {
      for (int i = 0; i < tokens / page; ++i) l.groups.indices.push_back(pages[next++]);
      l.groups.indptr.push_back(static_cast<int>(l.groups.indices.size()));
      l.groups.last_page_len.push_back(page);
    }
    for (int r = 0; r < requests; ++r) l.group_of.push_back(group_of_request(r));
    return l;
  };
  MultiLevelCascade c;
  c.page_size = page;
  c.num_requests = requests;
  c.levels.push_back(level_of(1, prefix, [](int) { return 0; }));
  c.levels.push_back(level_of(groups, group_tokens, [&](int r) { return r / (requests / groups); }));
  c.levels.push_back(level_of(requests, own, [](int r) { return r; }));
  c.num_pages = first_page + static_cast<int>(pages.size());
  return c;
}

int run_multilevel_bench(const BenchOptions& o, const bench::BenchRun& run) {
  constexpr int kRequests = 128, kHeads = 32, kKvHeads = 32, kHead = 128, kPage = 16, kSets = 2;
  std::mt19937_64 rng(20261129);
  std::string rows_json;
  int failed = 0;
  std::printf("%-5s %-26s %10s %8s %9s %9s  %s\n", "dt", "variant", "us", "%floor", "shared us", "last us",
              "status");
  for (DType dt : o.dtypes) {
    const int E = dtype_bytes(dt);
    std::vector<MultiLevelSet> sets;
    int pool_pages = 0;
    for (int r = 0; r < kSets; ++r) {
      MultiLevelSet set;
      set.c = multilevel_tables(pool_pages, kRequests, kPage, rng);
      pool_pages = set.c.num_pages;
      set.q = DeviceBuffer(static_cast<std::size_t>(kRequests) * kHeads * kHead * E);
      fill(set.q.get(), static_cast<std::size_t>(kRequests) * kHeads * kHead, static_cast<std::uint32_t>(rng()), dt,
           2.0f);
      sets.push_back(std::move(set));
    }
    const std::size_t page_elems = static_cast<std::size_t>(kKvHeads) * kHead * kPage;
    DeviceBuffer k(page_elems * pool_pages * E), v(page_elems * pool_pages * E);
    fill(k.get(), page_elems * pool_pages, static_cast<std::uint32_t>(rng()), dt, 1.0f);
    fill(v.get(), page_elems * pool_pages, static_cast<std::uint32_t>(rng()), dt, 1.0f);
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    const double distinct = 2.0 * E * page_elems * (pool_pages / kSets);  // K + V of one set's pages
    const double floor_us = distinct / (run.copy_gbps * 1e9) * 1e6;

    kernels::StageArgs base;
    base.dtype = dt;
    base.head_size = kHead;
    base.block_size = kPage;
    base.num_seqs = kRequests;
    base.num_heads = kHeads;
    base.num_kv_heads = kKvHeads;
    base.scale = 1.0f / std::sqrt(static_cast<float>(kHead));
    base.k_cache = k.get();
    base.v_cache = v.get();
    base.qg = QueryGeometry{kRequests, kHeads, kHead, kHeads * kHead};
    base.cg = CacheGeometry{pool_pages, kKvHeads, kHead, kPage, 16 / E};
    DeviceBuffer out(static_cast<std::size_t>(kRequests) * kHeads * kHead * E);
    std::vector<float> flat_out;  // stage 8's output on set 0: the cross-check's reference
    // Stage 8 alone first (the reference), then 2 and 3 levels.
    for (int first : {0, 1, 2}) {
      const char* variant = first == 0   ? "stage 8 (no cascade)"
                            : first == 1 ? "2 levels (stage 7's cascade)"
                                         : "3 levels";
      std::string status = "ok", plan;
      double med = 0, shared = 0, last = 0, xc = -1, reads = 0;
      try {
        std::vector<kernels::MultiLevelCascadeRun> runs;
        for (MultiLevelSet& set : sets) {
          kernels::StageArgs b = base;
          b.q = set.q.get();
          runs.emplace_back(b, join_levels_from(set.c, first));
        }
        plan = runs[0].plan().describe();
        const MultiLevelCascade joined = join_levels_from(sets[0].c, first);
        for (const CascadeLevel& l : joined.levels) reads += static_cast<double>(l.groups.indices.size());
        reads *= 2.0 * E * page_elems;  // pages each launch reads, K and V
        auto busy_wait = [&](int) {
          if (o.spin_us > 0) spin_kernel<<<1, 1>>>(static_cast<unsigned long long>(o.spin_us) * 1000ull);
        };
        auto timed = [&](auto&& launch) {
          const auto ms = kernels::time_indexed_launches_ms([&](int i) { launch(runs[i % kSets]); }, o.iters,
                                                           std::max(o.warmup, 2 * kSets), busy_wait);
          return kernels::median_of(ms) * 1e3;
        };
        med = timed([&](kernels::MultiLevelCascadeRun& r) { r.launch(out.get()); });
        shared = timed([&](kernels::MultiLevelCascadeRun& r) { r.launch_shared_levels(); });
        last = timed([&](kernels::MultiLevelCascadeRun& r) { r.launch_last_level(); });
        out.fill_bytes(0xFF);
        runs[0].launch(out.get());
        std::vector<float> got = kernels::download_decoded(out, static_cast<std::size_t>(kRequests) * kHeads * kHead, dt);
        if (first == 0) {
          flat_out = std::move(got);
        } else {
          xc = max_abs_diff(flat_out, got);
          const std::string bad = bench::xcheck_failure(flat_out, got, dt);
          if (!bad.empty()) status = "error: its output differs from stage 8's on the same inputs: " + bad;
        }
      } catch (const std::exception& e) {
        status = std::string("error: ") + e.what();
        cudaGetLastError();
      }
      if (status != "ok") ++failed;
      const double pct = med > 0 ? 100.0 * floor_us / med : 0;
      std::printf("%-5s %-26s %10.1f %8.1f %9.1f %9.1f  %s\n", dtype_name(dt), variant, med, pct, shared, last,
                  status == "ok" ? "" : status.substr(0, 80).c_str());
      if (!rows_json.empty()) rows_json += ",\n    ";
      rows_json += "{\"dtype\": " + bench::json_string(dtype_name(dt)) + ", \"variant\": " + bench::json_string(variant) +
                   ", \"levels\": " + std::to_string(first + 1) + ", \"median_us\": " +
                   std::to_string(med) + ", \"pct_floor\": " + std::to_string(pct) + ", \"shared_us\": " +
                   std::to_string(shared) + ", \"last_us\": " + std::to_string(last) + ", \"kv_read_bytes\": " +
                   std::to_string(reads) + ", \"distinct_kv_bytes\": " + std::to_string(distinct) +
                   ", \"floor_us\": " + std::to_string(floor_us) + ", \"xcheck_max_abs\": " + std::to_string(xc) +
                   ", \"plan\": " + bench::json_string(plan) + ", \"status\": " + bench::json_string(status) + "}";
    }
  }
  const std::string json =
      "{\n  \"benchmark\": \"multilevel\",\n  \"gpu\": " + bench::json_string(run.gpu) +
      ",\n  \"sm_count\": " + std::to_string(run.sm_count) + ",\n  \"copy_gbps\": " + std::to_string(run.copy_gbps) +
      ",\n  \"iters\": " + std::to_string(o.iters) + ",\n  \"spin_us\": " + std::to_string(o.spin_us) +
      ",\n  \"sets\": " + std::to_string(kSets) + ",\n  \"requests\": " + std::to_string(kRequests) +
      ", \"heads\": " + std::to_string(kHeads) + ", \"kv_heads\": " + std::to_string(kKvHeads) +
      ", \"head_size\": " + std::to_string(kHead) + ", \"block_size\": " + std::to_string(kPage) +
      ",\n  \"levels\": \"16384 tokens shared by all; 8 groups of 16 requests sharing 4096; 256 own tokens each\"" +
      ",\n  \"rows\": [\n    " + rows_json + "\n  ]\n}\n";
  core::write_file_atomically(o.json, json);
  std::printf("wrote %s\n", o.json.c_str());
  if (failed > 0) {
    std::fprintf(stderr, "pa-bench: %d multi-level row(s) with status error\n", failed);
    return 1;
  }
  return 0;
}


// ---- the split sweep (--split-sweep) ------------------------------------------
// Stage 8 alone on random shapes (bench::split_sweep_shapes), each timed at
// the split the planner picks and at every count of a grid (1, 2, 3, 4, 5, 6,
// 8, 10, 12, 16, ... about 2^(k/4), up to the shape's steps and
// kOptMaxSplits), each count that gives a split of its own (forcing s splits
// rounds the split to whole steps, so neighbours can coincide); the same
// rotated pool, busy-wait and event pairs as every row. Every point's output
// is checked against the first one's. The planned split is then judged
// against the fastest point (bench_json.hpp: within 5%).
std::vector<int> sweep_grid(int max_splits) {
  std::vector<int> g;
  for (int k = 0;; ++k) {
    const int s = static_cast<int>(std::lround(std::exp2(k / 4.0)));
    if (s > max_splits) break;
    if (g.empty() || g.back() != s) g.push_back(s);
  }
  if (g.empty() || g.back() != max_splits) g.push_back(max_splits);
  return g;
}

int run_split_sweep(const BenchOptions& o, const bench::BenchRun& run) {
  bench::SweepRun sw;
  sw.gpu = run.gpu;
  sw.sm_count = run.sm_count;
  sw.copy_gbps = run.copy_gbps;
  sw.dram_peak_gbps = run.dram_peak_gbps;
  sw.options = o;
  std::mt19937_64 rng(o.seed ^ 0x5EEDu);
  int failed = 0;
  const std::vector<bench::SweepShape> shapes = bench::split_sweep_shapes(o.split_sweep, o.seed, o.dtypes, o.kv_dtypes);
  std::printf("%3s %-4s %-8s %4s %3s %3s %3s %7s %6s  %7s %9s  %7s %9s  %6s  %s\n", "#", "dt", "cache", "seqs", "hd",
              "kv", "hs", "ctx", "MB", "planned", "us", "best", "us", "ratio", "status");
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    bench::SweepResult res;
    res.index = static_cast<int>(i);
    res.w = shapes[i];
    const Shape& s = res.w.shape;
    if (!optimized_supported(res.w.dtype, s.head_size, s.block_size, res.w.kv_dtype)) {
      res.status = std::string("unsupported: not built: stage 8 for this shape (") + optimized_supported_list() + ")";
    } else {
      try {
        Problem P;
        build_problem(P, s, res.w.dtype, res.w.kv_dtype, o, rng);
        res.kv_bytes = P.kv_bytes;
        res.pool_sets = P.R;
        res.pool_bytes = P.pool_bytes;
        const OptimizedPlan planned = kernels::StageRunner(P.layout, P.views, kernels::Stage::optimized).optimized_plan();
        res.units = planned.units;
        res.ctas_per_sm = planned.ctas_per_sm;
        res.blocks_per_step = planned.blocks_per_step;
        res.planned_splits = planned.splits;
        res.planned_split_blocks = planned.split_blocks;
        const int steps = ceil_div(ceil_div(s.context, s.block_size), planned.blocks_per_step);
        std::vector<int> counts = sweep_grid(std::min(kOptMaxSplits, steps));
        counts.push_back(planned.splits);
        std::sort(counts.begin(), counts.end());
        std::vector<float> ref;
        std::vector<int> seen;
        for (int c : counts) {
          kernels::RunOptions ro;
          ro.splits = c;
          kernels::StageRunner runner(P.layout, P.views, kernels::Stage::optimized, ro);
          const OptimizedPlan& plan = runner.optimized_plan();
          if (std::find(seen.begin(), seen.end(), plan.splits) != seen.end()) continue;
          seen.push_back(plan.splits);
          bench::SweepPoint pt;
          pt.splits = plan.splits;
          pt.split_blocks = plan.split_blocks;
          pt.ctas = static_cast<long long>(s.seqs) * plan.units * plan.splits;
          BenchRow timing;
          time_kernel(timing, P, o, runner);
          pt.median_us = timing.median_us;
          runner.poison_outputs();
          runner.launch(0);
          std::vector<float> out = runner.output();
          if (ref.empty()) {
            ref = std::move(out);
          } else {
            pt.xcheck_max_abs = max_abs_diff(ref, out);
            const std::string bad = bench::xcheck_failure(ref, out, res.w.dtype);
            if (!bad.empty()) {
              pt.status = "error: its output differs from the first point's: " + bad;
              res.status = "error: a point's output differs from the first point's";
            }
          }
          res.points.push_back(pt);
        }
      } catch (const std::exception& e) {
        res.status = std::string("error: ") + e.what();
        cudaGetLastError();
      }
    }
    if (res.status.rfind("error", 0) == 0) ++failed;
    const bench::SweepPoint* b = res.best();
    std::printf("%3d %-4s %-8s %4d %3d %3d %3d %7d %6.0f  %7d %9.1f  %7d %9.1f  %6.3f  %s\n", res.index,
                dtype_name(res.w.dtype), kv_dtype_name(res.w.kv_dtype), s.seqs, s.heads, s.kv_heads, s.head_size,
                s.context, res.kv_bytes / 1e6, res.planned_splits, res.planned_us(), b ? b->splits : 0,
                b ? b->median_us : 0.0, res.planned_over_best(), res.status == "ok" ? "" : res.status.substr(0, 70).c_str());
    std::fflush(stdout);
    sw.shapes.push_back(std::move(res));
  }
  core::write_file_atomically(o.json, bench::split_sweep_json(sw));
  const bench::SweepSummary sum = bench::sweep_summary(sw);
  std::printf("planned split within %.0f%% of the best on %d of %d shapes; wrote %s\n",
              100 * (bench::kSweepWithin - 1), sum.within, sum.ran, o.json.c_str());
  if (failed > 0) {
    std::fprintf(stderr, "pa-bench: %d sweep shape(s) with status error\n", failed);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  BenchOptions o;
  try {
    o = bench::parse_bench_options(std::vector<std::string>(argv + 1, argv + argc));
    if (o.help) {
      std::fputs(bench::bench_usage().c_str(), stdout);
      return 0;
    }
    // A results file that cannot be written is found now, not after the run.
    core::check_can_write(o.json);
  } catch (const core::FileWriteError& e) {
    std::fprintf(stderr, "pa-bench: --json: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pa-bench: %s\n", e.what());
    return 2;
  }
  try {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
      std::printf("pa-bench: no CUDA GPU present; nothing to measure.\n");
      return 3;
    }
    cudaDeviceProp prop{};
    PA_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    bench::BenchRun run;
    run.gpu = prop.name;
    run.sm_count = prop.multiProcessorCount;
    run.l2_bytes = prop.l2CacheSize;
    run.options = o;
    // 2 GiB each way (40x an H100's L2), at least 20 copies.
    run.copy_bytes_each_way = static_cast<double>(std::size_t{2} << 30);
    run.copy_gbps = kernels::measure_copy_bandwidth_gbs(std::size_t{2} << 30, std::max(20, o.iters / 5));
    run.read_bytes = static_cast<double>(std::size_t{2} << 30);
    run.read_gbps = measure_read_bandwidth_gbs(std::size_t{2} << 30, std::max(20, o.iters / 5), run.sm_count);
    run.dram_peak_gbps = kernels::gpu_info().dram_peak_gbps;
    std::printf("GPU: %s, %d SMs, L2 %d MB; D2D copy %.0f GB/s (read+write), read-only %.0f GB/s, DRAM peak %.0f GB/s\n",
                prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20, run.copy_gbps, run.read_gbps,
                run.dram_peak_gbps);

    if (o.multilevel) return run_multilevel_bench(o, run);
    if (o.split_sweep > 0) return run_split_sweep(o, run);

    std::mt19937_64 rng(20261122);
    for (KvDType kv : o.kv_dtypes)
      for (const Shape& s : bench::bench_shapes(o))
        for (DType dt : o.dtypes) {
          const std::size_t first = run.rows.size();
          run_shape(s, dt, kv, o, rng, run.copy_gbps, run.sm_count, run.rows);
          const BenchRow& r = run.rows[first];
          std::fprintf(stderr, "  done %s kv %s seqs=%d heads=%d kv=%d ctx=%d hs=%d: optimized %.1f us\n",
                       dtype_name(dt), kv_dtype_name(kv), s.seqs, s.heads, s.kv_heads, s.context, s.head_size,
                       r.median_us);
        }
    run.cascade = bench::cascade_speedups(run.rows);
    core::write_file_atomically(o.json, bench::bench_json(run));

    std::printf("%-9s %-4s %-8s %-4s %4s %3s %3s %7s %4s %9s %7s %6s  %s\n", "kernel", "dt", "cache", "lay",
                "seqs", "hd", "kv", "ctx", "hs", "us", "GB/s", "%copy", "status");
    for (const BenchRow& r : run.rows)
      std::printf("%-9s %-4s %-8s %-4s %4d %3d %3d %7d %4d %9.1f %7.0f %6.1f  %s\n", r.kernel.c_str(),
                  r.dtype.c_str(), r.kv_dtype.c_str(), r.layout.c_str(),
                  r.shape.seqs, r.shape.heads, r.shape.kv_heads, r.shape.context, r.shape.head_size, r.median_us,
                  r.gbps, r.pct_copy, r.status == "ok" ? "" : r.status.substr(0, 60).c_str());
    for (const auto& c : run.cascade)
      std::printf("cascade %s: %.1f us, %.1fx faster than %s\n", c.dtype.c_str(), c.cascade_us, c.speedup,
                  c.best_kernel.c_str());
    std::printf("wrote %s\n", o.json.c_str());
    // A kernel that failed where it should run, or disagreed with stage 8,
    // fails the run (its row says why; the file keeps every row).
    const auto failed = std::count_if(run.rows.begin(), run.rows.end(),
                                      [](const BenchRow& r) { return r.status.rfind("error:", 0) == 0; });
    if (failed > 0) {
      std::fprintf(stderr, "pa-bench: %ld row(s) with status error (see the table above and %s)\n",
                   static_cast<long>(failed), o.json.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pa-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
