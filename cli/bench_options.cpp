// pa-bench's command line: see bench_options.hpp.
#include "bench_options.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include "pa/core/config_dispatch.hpp"
#include "pa/core/parse_number.hpp"
#include "pa/index/config.hpp"

namespace pa::bench {

namespace {

// Limits: wide enough for any experiment on one GPU, narrow enough that a
// typo (an extra zero or two) is refused instead of running for hours or
// asking for terabytes.
constexpr int kMaxIters = 1'000'000;
constexpr int kMaxWarmup = 1'000'000;
constexpr double kMaxWarmupMs = 60'000;
constexpr double kMaxPoolGb = 1024;
constexpr int kMaxSpinUs = 1'000'000;
constexpr int kMaxSplits = 4096;
constexpr int kMaxSeqs = 1 << 16;
constexpr int kMaxHeads = 1024;
constexpr int kMaxContext = 1 << 24;
constexpr int kMaxSweepShapes = 1000;

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t next = s.find(c, pos);
    out.push_back(s.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) return out;
    pos = next + 1;
  }
}

[[noreturn]] void bad(const std::string& flag, const std::string& value, const std::string& accepted) {
  throw UsageError(flag + " '" + value + "': " + accepted);
}

int to_int(const std::string& flag, const std::string& v, long long lo, long long hi, const std::string& what = "") {
  const auto x = parse_number<long long>(v);
  const std::string accepted = (what.empty() ? "" : what + ": ") + "an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "] is accepted";
  if (!x || *x < lo || *x > hi) bad(flag, v, accepted);
  return static_cast<int>(*x);
}

double to_number(const std::string& flag, const std::string& v, double lo, double hi, bool lo_open) {
  const auto x = parse_number<double>(v);
  std::ostringstream accepted;
  accepted << "a number in " << (lo_open ? "(" : "[") << lo << ", " << hi << "] is accepted";
  if (!x || *x < lo || (lo_open && *x == lo) || *x > hi) bad(flag, v, accepted.str());
  return *x;
}

std::string join(const int* b, const int* e) {
  std::string s;
  for (const int* p = b; p != e; ++p) s += (p == b ? "" : ", ") + std::to_string(*p);
  return s;
}

// "prefix:streams:chunks[:suffix]" (kernels::CascadeOptions).
CascadeSweepItem parse_sweep_item(const std::string& item) {
  static const std::string accepted =
      "accepted: prefix:streams:chunks[:suffix], prefix automatic|mma_4warps|mma_8warps|wgmma, streams -1..2, "
      "chunks >= 0 (0 automatic), suffix automatic|v2|optimized|optimized_lean";
  const auto f = split(item, ':');
  if (f.size() != 3 && f.size() != 4) bad("--cascade-sweep item", item, "3 or 4 fields; " + accepted);
  CascadeSweepItem out;
  out.text = item;
  const auto pk = kernels::prefix_kernel_from_name(f[0]);
  if (!pk) bad("--cascade-sweep item", item, "unknown prefix kernel '" + f[0] + "'; " + accepted);
  out.options.prefix = *pk;
  out.options.streams = to_int("--cascade-sweep item '" + item + "' streams", f[1], -1, 2);
  out.options.chunks = to_int("--cascade-sweep item '" + item + "' chunks", f[2], 0, 1 << 20);
  if (f.size() == 4) {
    using S = kernels::CascadeOptions::Suffix;
    if (f[3] == "automatic") out.options.suffix = S::automatic;
    else if (f[3] == "v2") out.options.suffix = S::v2;
    else if (f[3] == "optimized") out.options.suffix = S::optimized;
    else if (f[3] == "optimized_lean") out.options.suffix = S::optimized_lean;
    else bad("--cascade-sweep item", item, "unknown suffix '" + f[3] + "'; " + accepted);
  }
  return out;
}

BenchShape parse_shape(const std::string& v) {
  static const char* flag = "--shape";
  const auto f = split(v, ',');
  if (f.size() != 5) bad(flag, v, "5 integers seqs,heads,kv_heads,context,head_size are accepted");
  BenchShape s;
  s.seqs = to_int(flag, f[0], 1, kMaxSeqs, "seqs");
  s.heads = to_int(flag, f[1], 1, kMaxHeads, "heads");
  s.kv_heads = to_int(flag, f[2], 1, kMaxHeads, "kv_heads");
  s.context = to_int(flag, f[3], 1, kMaxContext, "context");
  s.head_size = to_int(flag, f[4], 1, 4096, "head_size");
  if (s.heads % s.kv_heads != 0)
    bad(flag, v, "kv_heads must divide heads (" + std::to_string(s.heads) + " % " + std::to_string(s.kv_heads) +
                     " != 0)");
  const auto& hs = kSupportedHeadSizes;
  if (std::find(std::begin(hs), std::end(hs), s.head_size) == std::end(hs))
    bad(flag, v, "head_size " + std::to_string(s.head_size) + " is not supported (accepted: " +
                     join(std::begin(hs), std::end(hs)) + ")");
  return s;
}

std::vector<DType> parse_dtypes(const std::string& v) {
  static const std::string accepted = "a comma list of fp16 and bf16 (each once, timed in that order) is accepted";
  std::vector<DType> out;
  for (const std::string& tok : split(v, ',')) {
    const std::optional<DType> parsed = dtype_from_name(tok);
    // pa-bench times the tensor-core dtypes only (no fp32 stage 8 or cascade).
    if (!parsed)
      bad("--dtypes", v, (tok.empty() ? std::string("empty item; ") : "unknown dtype '" + tok + "'; ") + accepted);
    if (*parsed == DType::f32) bad("--dtypes", v, "fp32 is not timed (stage 8 and the cascade have no fp32 path); " + accepted);
    const DType d = *parsed;
    if (std::find(out.begin(), out.end(), d) != out.end()) bad("--dtypes", v, tok + " twice; " + accepted);
    out.push_back(d);
  }
  return out;
}

}  // namespace

std::string bench_usage() {
  return "usage: pa-bench [options]\n"
         "  --json FILE           where to write the results (default bench.json; written to a temporary\n"
         "                        file in the same folder, then renamed)\n"
         "  --iters N             timed launches per row, 1.." + std::to_string(kMaxIters) + " (default 100)\n"
         "  --warmup N            at least N warm-up launches, 0.." + std::to_string(kMaxWarmup) + " (default 10)\n"
         "  --warmup-ms T         and at least T ms of them, 0..60000 (default 50)\n"
         "  --pool-gb G           KV pool to rotate over, (0, 1024] GB (default 6; at most iters + warmup sets)\n"
         "  --only optimized      time stage 8 alone\n"
         "  --quick               three shapes, no cascade\n"
         "  --cascade-only        only the cascade shape (every kernel on it)\n"
         "  --multilevel          the multi-level cascade alone: 128 requests (32 heads, head 128, block 16)\n"
         "                        sharing a 16384-token prefix, 8 groups of 16 sharing 4096 more, 256 own\n"
         "                        tokens each; 3 levels, 2 levels and stage 8 on the same tables, against\n"
         "                        the floor (every distinct KV byte read once at the copy bandwidth)\n"
         "  --cascade-sweep LIST  extra cascade plans prefix:streams:chunks[:suffix],... (prefix automatic|\n"
         "                        mma_4warps|mma_8warps|wgmma, streams -1..2, chunks >= 0, suffix automatic|v2|\n"
         "                        optimized|optimized_lean); needs the cascade shape\n"
         "  --spin-us N           GPU busy-wait before each timed launch, 0.." + std::to_string(kMaxSpinUs) +
         " us (default 50; 0 = off)\n"
         "  --splits N            stage 8: force N splits, 0.." + std::to_string(kMaxSplits) +
         " (default 0: the heuristic)\n"
         "  --alibi               every kernel with ALiBi (the paper's slope per query head)\n"
         "  --paged-read          after stage 8's row (first dtype, 16-bit caches, head x block = 4 KB tiles):\n"
         "                        the same tiles read in stage 8's grid with nothing done with them, by\n"
         "                        16-byte cp.async and by cp.async.bulk, and as many contiguous bytes by the\n"
         "                        read-only kernel; in stage 8's JSON row (paged_read_us ...) and printed\n"
         "  --paged-read-step-ns N  with --paged-read: both paged reads once more, each warp held N ns\n"
         "                        (1..100000) after every step, where stage 8 does its math\n"
         "  --kv-dtypes LIST      KV cache element types, comma separated: auto (default: the dtype's),\n"
         "                        fp8_e4m3, fp8_e5m2 (fp8 = fp8_e4m3; random codes at scale 1; the cascade\n"
         "                        refuses fp8)\n"
         "  --layouts LIST        stage 8 also on these KV cache layouts: nhd, hnd (vllm, vLLM's own, is always\n"
         "                        timed, first; 2-byte caches; each row is checked against vLLM's output)\n"
         "  --shape S,H,KV,C,D    one shape instead of the set: seqs, heads, kv heads (divides heads), context,\n"
         "                        head size: " + head_sizes_text() + "\n"
         "  --dtypes LIST         fp16,bf16 (default), or one of them\n"
         "  --split-sweep N       stage 8 alone on N random shapes (1.." + std::to_string(kMaxSweepShapes) +
         "; sequences 1-256, contexts 128-131072,\n"
         "                        ragged, GQA 1-8 and MQA, head 64-256), each at the split the planner picks\n"
         "                        and at a grid of split counts; the JSON holds every time (with --dtypes\n"
         "                        and --kv-dtypes: the shapes take them in turn)\n"
         "  --seed S              the split sweep's shapes, 0..2147483647 (default 1)\n"
         "  --help                this text\n"
         "exit: 0 written, 1 error while running or a row with status error (a kernel failed where it should\n"
         "      run, or its output differs from stage 8's on the same inputs; the file is written), 2 bad usage,\n"
         "      3 no GPU\n";
}

BenchOptions parse_bench_options(const std::vector<std::string>& args) {
  BenchOptions o;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2)
      throw UsageError("unexpected argument '" + a + "': options are --name [value] (pa-bench --help lists them)");
    if (!seen.insert(a).second) throw UsageError(a + " given twice (each option is accepted once)");
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size() || args[i + 1].rfind("--", 0) == 0)
        throw UsageError(a + " needs a value (pa-bench --help lists what each option accepts)");
      return args[++i];
    };
    if (a == "--help") o.help = true;
    else if (a == "--json") {
      o.json = next();
      if (o.json.empty()) bad(a, o.json, "a file path is accepted");
      if (o.json.back() == '/') bad(a, o.json, "a file path is accepted, not a folder");
    }
    else if (a == "--iters") o.iters = to_int(a, next(), 1, kMaxIters);
    else if (a == "--warmup") o.warmup = to_int(a, next(), 0, kMaxWarmup);
    else if (a == "--warmup-ms") o.warmup_ms = to_number(a, next(), 0, kMaxWarmupMs, false);
    else if (a == "--pool-gb") o.pool_gb = to_number(a, next(), 0, kMaxPoolGb, true);
    else if (a == "--only") {
      const std::string v = next();
      if (v != "optimized") bad(a, v, "only 'optimized' is accepted");
      o.only_optimized = true;
    }
    else if (a == "--quick") o.quick = true;
    else if (a == "--alibi") o.alibi = true;
    else if (a == "--kv-dtypes") {
      const std::string v = next();
      o.kv_dtypes.clear();
      for (const std::string& tok : split(v, ',')) {
        const auto k = kv_dtype_from_name(tok);
        if (!k) bad(a, v, "unknown KV cache dtype '" + tok + "'; accepted: a comma list of " + kKvDTypeNamesText);
        if (std::find(o.kv_dtypes.begin(), o.kv_dtypes.end(), *k) != o.kv_dtypes.end())
          bad(a, v, tok + " twice (fp8 and fp8_e4m3 are the same); each KV cache dtype is accepted once");
        o.kv_dtypes.push_back(*k);
      }
    }
    else if (a == "--layouts") {
      const std::string v = next();
      for (const std::string& tok : split(v, ',')) {
        const auto l = kv_layout_from_name(tok);
        if (!l) bad(a, v, "unknown layout '" + tok + "'; accepted: a comma list of " + kKvLayoutNamesText);
        if (*l == KvLayout::vllm) continue;  // always timed
        if (std::find(o.layouts.begin(), o.layouts.end(), *l) != o.layouts.end())
          bad(a, v, tok + " twice; each layout is accepted once");
        o.layouts.push_back(*l);
      }
    }
    else if (a == "--cascade-only") o.cascade_only = true;
    else if (a == "--multilevel") o.multilevel = true;
    else if (a == "--cascade-sweep") {
      const std::string v = next();
      for (const std::string& item : split(v, ',')) {
        if (item.empty()) bad(a, v, "empty item; a comma list of prefix:streams:chunks[:suffix] is accepted");
        o.cascade_sweep.push_back(parse_sweep_item(item));
      }
    }
    else if (a == "--spin-us") o.spin_us = to_int(a, next(), 0, kMaxSpinUs);
    else if (a == "--paged-read") o.paged_read = true;
    else if (a == "--paged-read-step-ns") o.paged_read_step_ns = to_int(a, next(), 1, 100000);
    else if (a == "--splits") o.force_splits = to_int(a, next(), 0, kMaxSplits);
    else if (a == "--dtypes") o.dtypes = parse_dtypes(next());
    else if (a == "--split-sweep") o.split_sweep = to_int(a, next(), 1, kMaxSweepShapes, "shapes");
    else if (a == "--seed") o.seed = static_cast<std::uint64_t>(to_int(a, next(), 0, 2147483647));
    else if (a == "--shape") {
      o.shape = parse_shape(next());
      o.has_shape = true;
    }
    else throw UsageError("unknown option '" + a + "' (pa-bench --help lists the options)");
  }
  // Combinations that would silently time something other than what was asked.
  if (o.cascade_only && (o.quick || o.has_shape || o.only_optimized))
    throw UsageError("--cascade-only times the cascade shape alone: it excludes --quick, --shape and --only");
  if (o.multilevel && (o.quick || o.has_shape || o.only_optimized || o.cascade_only || !o.cascade_sweep.empty() ||
                       o.alibi || o.layouts.size() > 1 || o.kv_dtypes != std::vector<KvDType>{KvDType::same} ||
                       seen.count("--splits") || seen.count("--pool-gb") || seen.count("--warmup-ms")))
    throw UsageError("--multilevel times its own problem alone, on its own pool and warm-up: it excludes --quick, "
                     "--shape, --only, --cascade-only, --cascade-sweep, --alibi, --layouts, --kv-dtypes, --splits, "
                     "--pool-gb and --warmup-ms");
  if (o.split_sweep > 0 && (o.quick || o.has_shape || o.only_optimized || o.cascade_only || o.multilevel ||
                            !o.cascade_sweep.empty() || o.layouts.size() > 1 || o.force_splits > 0))
    throw UsageError("--split-sweep times stage 8 on its own random shapes at every split count: it excludes "
                     "--quick, --shape, --only, --cascade-only, --multilevel, --cascade-sweep, --layouts and --splits");
  if (o.paged_read && (o.cascade_only || o.multilevel || o.split_sweep > 0))
    throw UsageError("--paged-read runs beside stage 8's rows of the shape set: it excludes --cascade-only, "
                     "--multilevel and --split-sweep");
  if (o.paged_read_step_ns > 0 && !o.paged_read)
    throw UsageError("--paged-read-step-ns holds the warps of --paged-read's paged reads: it needs --paged-read");
  if (seen.count("--seed") && o.split_sweep == 0)
    throw UsageError("--seed draws the split sweep's shapes: it needs --split-sweep N");
  if (o.quick && o.has_shape) throw UsageError("--quick and --shape exclude each other (--shape times one shape)");
  if (!o.cascade_sweep.empty() && !o.cascade_only && (o.quick || o.has_shape || o.only_optimized))
    throw UsageError("--cascade-sweep needs the cascade shape, which --quick, --shape and --only leave out");
  return o;
}

BenchShape cascade_shape() {
  BenchShape c{128, 32, 32, 32768 + 256, 128};
  c.prefix = 32768;
  return c;
}

std::vector<BenchShape> bench_shapes(const BenchOptions& o) {
  if (o.cascade_only) return {cascade_shape()};
  if (o.has_shape) return {o.shape};
  if (o.quick) return {{1, 32, 8, 4096, 128}, {64, 32, 8, 8192, 128}, {1, 32, 8, 131072, 128}};
  std::vector<BenchShape> s = {
      {1, 32, 8, 4096, 128},   {8, 32, 8, 4096, 128},    {32, 32, 8, 4096, 128}, {64, 32, 8, 8192, 128},
      {128, 32, 32, 1024, 128}, {256, 32, 8, 2048, 128}, {16, 64, 8, 32768, 128}, {1, 32, 8, 131072, 128},
      {64, 32, 8, 8192, 64},   {64, 32, 8, 8192, 256},
  };
  if (!o.only_optimized) s.push_back(cascade_shape());
  return s;
}

KvPool kv_pool_of(const BenchShape& s, int elem_bytes, const BenchOptions& o) {
  KvPool p;
  const long long prefix_blocks = s.prefix / s.block_size;
  p.set_blocks = prefix_blocks;
  for (int q = 0; q < s.seqs; ++q)
    p.set_blocks += (static_cast<long long>(s.context_of(q)) + s.block_size - 1) / s.block_size - prefix_blocks;
  const double block_elems = static_cast<double>(s.kv_heads) * s.head_size * s.block_size;
  p.set_bytes = 2.0 * static_cast<double>(p.set_blocks) * block_elems * elem_bytes;
  const double wanted = std::ceil(o.pool_gb * 1e9 / p.set_bytes);
  const double cap = static_cast<double>(o.iters) + o.warmup;
  p.sets = static_cast<int>(std::max(2.0, std::min(wanted, cap)));
  p.bytes = p.sets * p.set_bytes;
  return p;
}

std::vector<SweepShape> split_sweep_shapes(int n, std::uint64_t seed, const std::vector<DType>& dtypes,
                                           const std::vector<KvDType>& kv_dtypes) {
  if (n < 0 || dtypes.empty() || kv_dtypes.empty())
    throw std::invalid_argument("split_sweep_shapes: need n >= 0 and at least one dtype and KV dtype");
  std::mt19937_64 g(seed);
  // Fixed arithmetic on the raw outputs (the library's distributions differ
  // between standard libraries).
  auto unit = [&] { return static_cast<double>(g() >> 11) * 0x1.0p-53; };  // [0, 1)
  auto pick = [&](int k) { return static_cast<int>(g() % static_cast<std::uint64_t>(k)); };
  std::vector<SweepShape> out;
  for (int i = 0; i < n; ++i) {
    SweepShape w;
    BenchShape& s = w.shape;
    s.seqs = static_cast<int>(std::lround(std::exp2(8.0 * unit())));
    s.context = static_cast<int>(std::lround(std::exp2(7.0 + 10.0 * unit())));
    const bool ragged = pick(4) != 0;
    if (pick(5) == 0) {
      static constexpr int kMqaHeads[] = {8, 16, 32, 64};
      s.kv_heads = 1;
      s.heads = kMqaHeads[pick(4)];
    } else {
      static constexpr int kKvHeads[] = {2, 4, 8, 16, 32};
      s.kv_heads = kKvHeads[pick(5)];
      s.heads = s.kv_heads * (1 + pick(8));
    }
    static constexpr int kHeads[] = {64, 128, 128, 256};
    s.head_size = kHeads[pick(4)];
    s.block_size = 16;
    s.context_lens.assign(s.seqs, s.context);
    const int lo = std::max(1, s.context / 4);
    for (int q = 1; q < s.seqs; ++q) {
      const int drawn = lo + pick(s.context - lo + 1);  // drawn for every shape: the draws stay aligned
      if (ragged) s.context_lens[q] = drawn;
    }
    auto kv_bytes = [&] {
      double t = 0;
      for (int c : s.context_lens) t += c;
      return 2.0 * 2.0 * t * s.kv_heads * s.head_size;  // K and V, 16-bit elements
    };
    while (s.seqs > 1 && kv_bytes() > 4e9) {
      s.context_lens.pop_back();
      --s.seqs;
    }
    w.dtype = dtypes[static_cast<std::size_t>(i) % dtypes.size()];
    w.kv_dtype = kv_dtypes[(static_cast<std::size_t>(i) / dtypes.size()) % kv_dtypes.size()];
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace pa::bench
