// pa-bench's results file: see bench_json.hpp.
#include "bench_json.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace pa::bench {

namespace {

// The shortest text that reads back as the same double (std::to_chars), so
// byte counts and timings survive the file exactly.
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return ec == std::errc() ? std::string(buf, end) : "null";
}
std::string num(long long v) { return std::to_string(v); }
std::string num(int v) { return std::to_string(v); }

std::string row_json(const BenchRow& r) {
  const BenchShape& s = r.shape;
  return "{\"kernel\": " + json_string(r.kernel) + ", \"dtype\": " + json_string(r.dtype) +
         ", \"kv_dtype\": " + json_string(r.kv_dtype) + ", \"layout\": " + json_string(r.layout) +
         ", \"seqs\": " + num(s.seqs) + ", \"heads\": " + num(s.heads) + ", \"kv_heads\": " + num(s.kv_heads) +
         ", \"context\": " + num(s.context) + ", \"prefix\": " + num(s.prefix) + ", \"head_size\": " +
         num(s.head_size) + ", \"block_size\": " + num(s.block_size) + ", \"kv_bytes\": " + num(r.kv_bytes) +
         ", \"pool_sets\": " + num(r.pool_sets) + ", \"pool_bytes\": " + num(r.pool_bytes) +
         ", \"status\": " + json_string(r.status) + ", \"median_us\": " + num(r.median_us) +
         ", \"min_us\": " + num(r.min_us) + ", \"p10_us\": " + num(r.p10_us) + ", \"p90_us\": " + num(r.p90_us) +
         ", \"timed\": " + num(r.timed) + ", \"warmup_launches\": " + num(r.warmup_launches) +
         ", \"gbps\": " + num(r.gbps) + ", \"pct_copy\": " + num(r.pct_copy) +
         ", \"xcheck_max_abs_vs_optimized\": " + num(r.xcheck_max_abs) + ", \"plan\": " + json_string(r.plan) +
         ", \"single_us\": " + num(r.single_us) + ", \"b2b_us\": " + num(r.b2b_us) + ", \"graph_us\": " +
         num(r.graph_us) + ", \"paged_read_us\": " + num(r.paged_read_us) + ", \"paged_bulk_us\": " +
         num(r.paged_bulk_us) + ", \"contiguous_read_us\": " + num(r.contiguous_read_us) +
         ", \"held_step_ns\": " + num(r.held_step_ns) + ", \"held_read_us\": " + num(r.held_read_us) +
         ", \"held_bulk_us\": " + num(r.held_bulk_us) + "}";
}

}  // namespace

std::vector<CascadeSpeedup> cascade_speedups(const std::vector<BenchRow>& rows) {
  std::vector<CascadeSpeedup> out;
  for (const DType dt : {DType::f16, DType::bf16}) {
    CascadeSpeedup c;
    c.dtype = dtype_name(dt);
    for (const BenchRow& r : rows) {
      if (r.shape.prefix <= 0 || r.dtype != c.dtype || r.status != "ok" || r.layout != "vllm") continue;
      if (r.kernel == "cascade") c.cascade_us = r.median_us;
      else if (c.best_us == 0 || r.median_us < c.best_us) {
        c.best_us = r.median_us;
        c.best_kernel = r.kernel;
      }
    }
    if (c.best_us > 0 && c.cascade_us > 0) {
      c.speedup = c.best_us / c.cascade_us;
      out.push_back(c);
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  std::string r = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (u < 0x20) {
      static const char* hex = "0123456789abcdef";
      r += "\\u00";
      r += hex[u >> 4];
      r += hex[u & 15];
    } else {
      r += c;
    }
  }
  return r + "\"";
}

std::string bench_json(const BenchRun& run) {
  const BenchOptions& o = run.options;
  std::string j = "{\n";
  j += "  \"gpu\": " + json_string(run.gpu) + ",\n";
  j += "  \"sm_count\": " + num(run.sm_count) + ",\n";
  j += "  \"l2_bytes\": " + num(run.l2_bytes) + ",\n";
  j += "  \"copy_gbps\": " + num(run.copy_gbps) + ",\n";
  j += "  \"copy_bytes_each_way\": " + num(run.copy_bytes_each_way) + ",\n";
  j += "  \"read_gbps\": " + num(run.read_gbps) + ",\n";
  j += "  \"read_bytes\": " + num(run.read_bytes) + ",\n";
  j += "  \"dram_peak_gbps\": " + num(run.dram_peak_gbps) + ",\n";
  j += "  \"iters\": " + num(o.iters) + ",\n";
  j += "  \"warmup\": " + num(o.warmup) + ",\n";
  j += "  \"warmup_ms\": " + num(o.warmup_ms) + ",\n";
  j += "  \"spin_us\": " + num(o.spin_us) + ",\n";
  j += "  \"alibi\": " + std::string(o.alibi ? "true" : "false") + ",\n";
  j += "  \"kv_dtypes\": [";
  for (std::size_t i = 0; i < o.kv_dtypes.size(); ++i) j += (i ? ", " : "") + json_string(kv_dtype_name(o.kv_dtypes[i]));
  j += "],\n";
  j += "  \"layouts\": [";
  for (std::size_t i = 0; i < o.layouts.size(); ++i) j += (i ? ", " : "") + json_string(kv_layout_name(o.layouts[i]));
  j += "],\n";
  j += "  \"pool_gb\": " + num(o.pool_gb) + ",\n";
  j += "  \"kv_bytes_note\": \"K+V bytes of every context token, each read once (cascade: the shared prefix "
       "once)\",\n";
  j += "  \"pct_copy_note\": \"GB/s of KV read / (copy bytes read + written per second)\",\n";
  j += "  \"pool_note\": \"launches rotate over pool_sets disjoint copies of the KV (pool_bytes in all): "
       "ceil(pool_gb * 1e9 / set bytes) of them, at least 2 and at most iters + warmup\",\n";
  j += "  \"rows\": [\n";
  for (std::size_t i = 0; i < run.rows.size(); ++i)
    j += "    " + row_json(run.rows[i]) + (i + 1 < run.rows.size() ? ",\n" : "\n");
  j += "  ],\n  \"cascade\": [";
  for (std::size_t i = 0; i < run.cascade.size(); ++i) {
    const CascadeSpeedup& c = run.cascade[i];
    j += (i ? ", " : "") + std::string("{\"dtype\": ") + json_string(c.dtype) + ", \"cascade_us\": " +
         num(c.cascade_us) + ", \"best_non_cascade\": " + json_string(c.best_kernel) +
         ", \"best_non_cascade_us\": " + num(c.best_us) + ", \"speedup\": " + num(c.speedup) + "}";
  }
  j += "]\n}\n";
  return j;
}

double SweepResult::planned_us() const {
  for (const SweepPoint& p : points)
    if (p.splits == planned_splits && p.status == "ok") return p.median_us;
  return 0;
}

const SweepPoint* SweepResult::best() const {
  const SweepPoint* b = nullptr;
  for (const SweepPoint& p : points)
    if (p.status == "ok" && p.median_us > 0 && (b == nullptr || p.median_us < b->median_us)) b = &p;
  return b;
}

double SweepResult::planned_over_best() const {
  const SweepPoint* b = best();
  return status == "ok" && b != nullptr && planned_us() > 0 ? planned_us() / b->median_us : 0;
}

SweepSummary sweep_summary(const SweepRun& run) {
  SweepSummary s;
  for (const SweepResult& r : run.shapes) {
    const double ratio = r.planned_over_best();
    if (ratio <= 0) continue;
    ++s.ran;
    s.within += ratio <= kSweepWithin;
  }
  return s;
}

std::string split_sweep_json(const SweepRun& run) {
  const BenchOptions& o = run.options;
  const SweepSummary sum = sweep_summary(run);
  std::string j = "{\n  \"benchmark\": \"split_sweep\",\n";
  j += "  \"gpu\": " + json_string(run.gpu) + ",\n";
  j += "  \"sm_count\": " + num(run.sm_count) + ",\n";
  j += "  \"copy_gbps\": " + num(run.copy_gbps) + ",\n";
  j += "  \"dram_peak_gbps\": " + num(run.dram_peak_gbps) + ",\n";
  j += "  \"seed\": " + std::to_string(o.seed) + ",\n";
  j += "  \"iters\": " + num(o.iters) + ",\n";
  j += "  \"warmup\": " + num(o.warmup) + ",\n";
  j += "  \"warmup_ms\": " + num(o.warmup_ms) + ",\n";
  j += "  \"spin_us\": " + num(o.spin_us) + ",\n";
  j += "  \"pool_gb\": " + num(o.pool_gb) + ",\n";
  j += "  \"within\": " + num(kSweepWithin) + ",\n";
  j += "  \"shapes_run\": " + num(sum.ran) + ",\n";
  j += "  \"shapes_within\": " + num(sum.within) + ",\n";
  j += "  \"shapes\": [\n";
  for (std::size_t i = 0; i < run.shapes.size(); ++i) {
    const SweepResult& r = run.shapes[i];
    const BenchShape& s = r.w.shape;
    const SweepPoint* b = r.best();
    std::string lens;
    for (int q = 0; q < s.seqs; ++q) lens += (q ? ", " : "") + num(s.context_of(q));
    j += "    {\"index\": " + num(r.index) + ", \"dtype\": " + json_string(dtype_name(r.w.dtype)) +
         ", \"kv_dtype\": " + json_string(kv_dtype_name(r.w.kv_dtype)) + ", \"seqs\": " + num(s.seqs) +
         ", \"heads\": " + num(s.heads) + ", \"kv_heads\": " + num(s.kv_heads) + ", \"head_size\": " +
         num(s.head_size) + ", \"block_size\": " + num(s.block_size) + ", \"context\": " + num(s.context) +
         ",\n     \"context_lens\": [" + lens + "],\n     \"kv_bytes\": " + num(r.kv_bytes) +
         ", \"pool_sets\": " + num(r.pool_sets) + ", \"pool_bytes\": " + num(r.pool_bytes) + ", \"units\": " +
         num(r.units) + ", \"ctas_per_sm\": " + num(r.ctas_per_sm) + ", \"blocks_per_step\": " +
         num(r.blocks_per_step) + ", \"planned_splits\": " + num(r.planned_splits) +
         ", \"planned_split_blocks\": " + num(r.planned_split_blocks) + ", \"planned_us\": " +
         num(r.planned_us()) + ", \"best_splits\": " + num(b ? b->splits : 0) + ", \"best_us\": " +
         num(b ? b->median_us : 0.0) + ", \"planned_over_best\": " + num(r.planned_over_best()) +
         ", \"status\": " + json_string(r.status) + ",\n     \"points\": [";
    for (std::size_t k = 0; k < r.points.size(); ++k) {
      const SweepPoint& p = r.points[k];
      j += std::string(k ? ", " : "") + "{\"splits\": " + num(p.splits) + ", \"split_blocks\": " +
           num(p.split_blocks) + ", \"ctas\": " + num(p.ctas) + ", \"median_us\": " + num(p.median_us) +
           ", \"xcheck_max_abs\": " + num(p.xcheck_max_abs) + ", \"status\": " + json_string(p.status) + "}";
    }
    j += "]}" + std::string(i + 1 < run.shapes.size() ? ",\n" : "\n");
  }
  j += "  ]\n}\n";
  return j;
}

}  // namespace pa::bench
