// pa-bench's results file: the rows it measured, as JSON (written with
// pa::core::write_file_atomically, so a failed write never loses the previous
// file). Plain C++ (no CUDA), tested in
// tests/cli/test_bench_json.cpp; scripts/bench_table.py reads the file.
//
// Schema (every key always present; numbers are JSON numbers):
//   gpu, sm_count, l2_bytes, copy_gbps, copy_bytes_each_way   the device and its copy bandwidth
//   read_gbps, read_bytes                 a read-only streaming kernel's bandwidth over read_bytes (the
//                                         second ceiling: a kernel that only reads can pass the copy's rate)
//   dram_peak_gbps                        the device's DRAM peak from its memory clock and bus width
//                                         (what stage 8's split planner assumes)
//   iters, warmup, warmup_ms, spin_us, alibi, kv_dtypes, layouts, pool_gb   the options of the run (alibi: a
//                                      boolean, kv_dtypes: a list of auto, fp8_e4m3, fp8_e5m2, layouts: of vllm,
//                                      nhd, hnd)
//   kv_bytes_note, pct_copy_note, pool_note                    what the derived numbers mean
//   rows: [{kernel, dtype, kv_dtype, layout, seqs, heads, kv_heads, context, prefix, head_size, block_size,
//           kv_bytes, pool_sets, pool_bytes, status, median_us, min_us, p10_us, p90_us, timed,
//           warmup_launches, gbps, pct_copy, xcheck_max_abs_vs_optimized, plan, single_us, b2b_us,
//           graph_us, paged_read_us, paged_bulk_us, contiguous_read_us, held_step_ns, held_read_us,
//           held_bulk_us}]
//           (single_us .. graph_us: stage 8's end-to-end latency; paged_read_us .. held_bulk_us: the
//           reads of its tiles with nothing else done, pa-bench --paged-read; 0 where not measured)
//   cascade: [{dtype, cascade_us, best_non_cascade, best_non_cascade_us, speedup}]
// status is "ok", "error: ..." (the kernel failed where it should run, or its
// output disagreed with stage 8's: bench_check.hpp),
// "unsupported: ..." (it refused the shape) or "missing: ..." (not in this build).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "bench_options.hpp"

namespace pa::bench {

struct BenchRow {
  std::string kernel, dtype, kv_dtype = "auto", status = "ok", plan;
  std::string layout = "vllm";  // the KV cache layout (pa/index/kv_layout.hpp); only stage 8 reads others
  BenchShape shape;
  double kv_bytes = 0;         // K+V of every context token, each read once (cascade: the prefix once)
  int pool_sets = 0;           // kv_pool_of: the sets launches rotate over
  double pool_bytes = 0;       // and their K+V bytes
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0;
  int timed = 0, warmup_launches = 0;
  double gbps = 0, pct_copy = 0;
  double xcheck_max_abs = -1;  // |optimized - this kernel| on one set, where both ran; -1: not compared
  // Stage 8 on shapes of at most 600 MB of KV: end-to-end latency with the
  // launch inside (bench.cu time_latency); 0 where not measured.
  double single_us = 0, b2b_us = 0, graph_us = 0;
  // Stage 8's rows with --paged-read (cli/bench_paged_read.cuh): its tiles read
  // in its grid with nothing else done, by 16-byte cp.async and by
  // cp.async.bulk; as many contiguous bytes by the read-only kernel; and the
  // two paged reads again with each warp held held_step_ns after every step
  // (0: not asked for). 0 where not measured.
  double paged_read_us = 0, paged_bulk_us = 0, contiguous_read_us = 0, held_read_us = 0, held_bulk_us = 0;
  int held_step_ns = 0;
};

struct CascadeSpeedup {
  std::string dtype, best_kernel;
  double cascade_us = 0, best_us = 0, speedup = 0;
};

struct BenchRun {
  std::string gpu;
  int sm_count = 0;
  long long l2_bytes = 0;
  double copy_gbps = 0, copy_bytes_each_way = 0;
  double read_gbps = 0, read_bytes = 0;
  double dram_peak_gbps = 0;
  BenchOptions options;
  std::vector<BenchRow> rows;
  std::vector<CascadeSpeedup> cascade;
};

// The cascade rows' speedup over the best other kernel on the same problem,
// per dtype (fp16 first), where the cascade and at least one other ran.
std::vector<CascadeSpeedup> cascade_speedups(const std::vector<BenchRow>& rows);

// ---- the split sweep (--split-sweep) ---------------------------------------------
// Its own file. Schema:
//   benchmark "split_sweep", gpu, sm_count, copy_gbps, dram_peak_gbps, seed, iters, warmup, warmup_ms,
//   spin_us, pool_gb, within (the tolerance the summary counts: 1.05), shapes_run, shapes_within
//   shapes: [{index, dtype, kv_dtype, seqs, heads, kv_heads, head_size, block_size, context (the longest),
//             context_lens [...], kv_bytes, pool_sets, pool_bytes, units, ctas_per_sm, blocks_per_step,
//             planned_splits, planned_split_blocks, planned_us, best_splits, best_us, planned_over_best,
//             status, points: [{splits, split_blocks, ctas, median_us, xcheck_max_abs, status}]}]
// A shape's status is "ok" when every point ran and agreed with the first
// (one split, or the fewest the grid has); points are in increasing splits.
struct SweepPoint {
  int splits = 0, split_blocks = 0;
  long long ctas = 0;
  double median_us = 0;
  double xcheck_max_abs = -1;  // against the shape's first point; -1 for the first
  std::string status = "ok";
};
struct SweepResult {
  int index = 0;
  SweepShape w;
  double kv_bytes = 0, pool_bytes = 0;
  int pool_sets = 0;
  int units = 0, ctas_per_sm = 0, blocks_per_step = 0;
  int planned_splits = 0, planned_split_blocks = 0;
  std::vector<SweepPoint> points;
  std::string status = "ok";
  // From the points: the planned split's time, the fastest point's, their ratio (0 where not ok).
  double planned_us() const;
  const SweepPoint* best() const;
  double planned_over_best() const;
};
struct SweepRun {
  std::string gpu;
  int sm_count = 0;
  double copy_gbps = 0, dram_peak_gbps = 0;
  BenchOptions options;
  std::vector<SweepResult> shapes;
};
inline constexpr double kSweepWithin = 1.05;  // the planned split counts as good within 5% of the best
// Shapes whose planned split was timed against a best (ran) and those within kSweepWithin of it.
struct SweepSummary {
  int ran = 0, within = 0;
};
SweepSummary sweep_summary(const SweepRun& run);
std::string split_sweep_json(const SweepRun& run);

// A JSON string literal: quotes and backslashes escaped, control bytes as \u00XX.
std::string json_string(std::string_view s);
// The whole file (the schema above). Non-finite numbers are written as null.
std::string bench_json(const BenchRun& run);

}  // namespace pa::bench
