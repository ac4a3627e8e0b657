// pa-bench's command line and what it implies (the shapes it times, the size of
// the KV pool it rotates over). Plain C++, apart from the CUDA benchmark in
// bench.cu, so that the parser and the pool formula are unit-tested in a build
// without CUDA (tests/cli/test_bench_options.cpp).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/index/dtype.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/kernels/cascade.hpp"

namespace pa::bench {

// A bad command line. The message names the flag, the value given and what
// is accepted; pa-bench prints it and exits 2.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// One problem shape of the benchmark. Every sequence has `context` tokens; the
// cascade shape's first `prefix` of them are shared (the same physical blocks).
// A ragged shape (the split sweep's) lists each sequence's tokens in
// context_lens instead, and `context` is their maximum.
struct BenchShape {
  int seqs = 1, heads = 32, kv_heads = 8, context = 4096, head_size = 128;
  int block_size = 16;
  int prefix = 0;
  std::vector<int> context_lens = {};  // empty: every sequence has `context` tokens
  int context_of(int seq) const { return context_lens.empty() ? context : context_lens[seq]; }
};

// One shape of the split sweep (--split-sweep): its problem and the element
// types it runs in.
struct SweepShape {
  BenchShape shape;
  DType dtype = DType::f16;
  KvDType kv_dtype = KvDType::same;
};

// One --cascade-sweep item: the text as given and the plan options it names.
struct CascadeSweepItem {
  std::string text;
  kernels::CascadeOptions options;
};

struct BenchOptions {
  std::string json = "bench.json";  // --json FILE
  int iters = 100;                  // timed launches per row
  int warmup = 10;                  // warm-up launches, at least ...
  double warmup_ms = 50;            // ... and at least this much wall time of them
  double pool_gb = 6.0;             // KV pool to rotate over (kv_pool_of: capped by the launches)
  bool only_optimized = false;      // --only optimized
  bool quick = false;               // three shapes
  bool cascade_only = false;        // only the cascade shape (every kernel on it)
  bool multilevel = false;          // only the multi-level cascade benchmark (its own JSON rows)
  std::vector<CascadeSweepItem> cascade_sweep;  // extra cascade plans, timed whole and by part
  int spin_us = 50;                 // GPU busy-wait before each timed launch (0 = off)
  int force_splits = 0;             // stage 8: 0 = the split heuristic
  bool alibi = false;               // --alibi: every problem with ALiBi's slopes
  // --paged-read: with stage 8's row of each shape (first dtype, 16-bit
  // cache), stage 8's bytes read with nothing done with them
  // (cli/bench_paged_read.cuh), in that row and printed beside it.
  bool paged_read = false;
  int paged_read_step_ns = 0;  // --paged-read-step-ns: both paged reads again, each warp held this long a step
  // --kv-dtypes: the KV cache element types timed, each with every dtype (fp8: one byte per element).
  std::vector<KvDType> kv_dtypes = {KvDType::same};
  // --layouts: stage 8 timed again on each of these cache layouts (the pool
  // moved into it on the device); vLLM's is always timed first, the other
  // rows' reference.
  std::vector<KvLayout> layouts = {KvLayout::vllm};
  bool has_shape = false;           // --shape replaces the shape list
  BenchShape shape;
  std::vector<DType> dtypes = {DType::f16, DType::bf16};  // timed in this order
  // --split-sweep N: stage 8 alone on N random shapes (split_sweep_shapes), each
  // at its planned split and at every split count of a grid, into its own JSON.
  int split_sweep = 0;
  std::uint64_t seed = 1;           // --seed: the sweep's shapes
  bool help = false;
};

// Parses the arguments after the program name. Throws UsageError.
BenchOptions parse_bench_options(const std::vector<std::string>& args);
std::string bench_usage();

// The shapes a run times, in order: the fixed set (three with --quick), or
// --shape alone, then the cascade shape unless --quick, --only or --shape
// left it out; --cascade-only: the cascade shape alone.
std::vector<BenchShape> bench_shapes(const BenchOptions& o);
BenchShape cascade_shape();

// The KV pool of one shape and dtype. A "set" is the physical blocks one
// launch reads (the shared prefix once, then every sequence's own blocks);
// the pool holds `sets` disjoint sets and launches rotate through them, so no
// launch finds its KV in L2. sets = ceil(pool_gb * 1e9 / set_bytes), at least
// 2 and at most iters + warmup (more sets than launches would never be read),
// so a small shape's pool is far below --pool-gb: 110 sets of 16.8 MB, 1.85 GB,
// for one sequence of 4096 tokens in fp16 at the default options.
// scripts/bench_table.py repeats this formula for JSON files written before
// pa-bench recorded the pool.
struct KvPool {
  long long set_blocks = 0;  // physical blocks of one set
  double set_bytes = 0;      // K and V of one set
  int sets = 0;
  double bytes = 0;          // sets * set_bytes
};
KvPool kv_pool_of(const BenchShape& s, int elem_bytes, const BenchOptions& o);

// The split sweep's shapes: n problems drawn from `seed` (std::mt19937_64's
// raw outputs, which the C++ standard fixes, so every platform draws the same
// shapes): sequences 1-256 and longest contexts 128-131072 tokens, both
// log-uniform; three shapes in four ragged (each sequence between a quarter
// of the longest and the longest, the first the longest); one in five MQA (one
// KV head, 8-64 query heads), the rest 2-32 KV heads with 1-8 query heads
// each; head 64, 128 or 256 (128 twice as often); block size 16. Shape i runs
// in dtypes[i % |dtypes|] with kv_dtypes[(i / |dtypes|) % |kv_dtypes|].
// Sequences are dropped until one copy of the KV is at most 4 GB.
std::vector<SweepShape> split_sweep_shapes(int n, std::uint64_t seed, const std::vector<DType>& dtypes,
                                           const std::vector<KvDType>& kv_dtypes);

}  // namespace pa::bench
