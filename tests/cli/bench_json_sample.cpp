// Writes a pa-bench results file with the real writer (cli/bench_json.hpp) and
// made-up rows, one of each status, so that test_bench_table.py checks that
// scripts/bench_table.py reads what pa-bench writes; with a second path also a
// split-sweep file (--split-sweep): a shape whose planned split is the best, one
// 10% over it, one not built and one with an error.
// Usage: bench_json_sample OUT.json [SWEEP.json]
#include <cstdio>
#include <exception>
#include <vector>

#include "bench_json.hpp"
#include "pa/core/atomic_file.hpp"

int main(int argc, char** argv) {
  using namespace pa::bench;
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: bench_json_sample OUT.json [SWEEP.json]\n");
    return 2;
  }
  BenchRun run;
  run.gpu = "Sample GPU";
  run.sm_count = 132;
  run.l2_bytes = 52428800;
  run.copy_gbps = 3000;
  run.copy_bytes_each_way = 2147483648.0;
  run.read_gbps = 3150;
  run.read_bytes = 2147483648.0;
  run.dram_peak_gbps = 3352.32;
  const BenchShape shape{1, 32, 8, 4096, 128};
  const KvPool pool = kv_pool_of(shape, 2, run.options);
  const char* kernels[] = {"optimized", "v1", "v2"};
  const char* statuses[] = {"ok", "unsupported: shared-memory logits do not fit", "error: cudaErrorIllegalAddress"};
  for (int i = 0; i < 3; ++i) {
    BenchRow r;
    r.kernel = kernels[i];
    r.dtype = "fp16";
    r.shape = shape;
    r.status = statuses[i];
    r.kv_bytes = 16777216;
    r.pool_sets = pool.sets;
    r.pool_bytes = pool.bytes;
    if (r.status == "ok") {
      r.median_us = 15.0;
      r.gbps = r.kv_bytes / 15e-6 / 1e9;
      r.pct_copy = 100 * r.gbps / run.copy_gbps;
      r.timed = run.options.iters;
      r.single_us = 21.5;
      r.b2b_us = 16.0;
      r.graph_us = 15.2;
      r.paged_read_us = 9.9;
      r.paged_bulk_us = 10.0;
      r.contiguous_read_us = 9.1;
      r.held_step_ns = 700;
      r.held_read_us = 11.4;
      r.held_bulk_us = 11.6;
    }
    run.rows.push_back(r);
  }
  SweepRun sw;
  sw.gpu = run.gpu;
  sw.sm_count = run.sm_count;
  sw.copy_gbps = run.copy_gbps;
  sw.dram_peak_gbps = run.dram_peak_gbps;
  const std::vector<SweepShape> shapes = split_sweep_shapes(4, 7, {pa::DType::f16}, {pa::KvDType::same});
  for (int i = 0; i < 4; ++i) {
    SweepResult r;
    r.index = i;
    r.w = shapes[i];
    r.kv_bytes = 1e8 * (i + 1);
    r.units = 8;
    r.ctas_per_sm = 2;
    r.blocks_per_step = 1;
    if (i == 2) r.status = "unsupported: not built: stage 8 for this shape (head sizes 128)";
    if (i == 3) r.status = "error: cudaErrorIllegalAddress";
    if (i >= 2) {
      sw.shapes.push_back(r);
      continue;
    }
    // Points 1, 2, 4 splits: 40, 20, 22 us; shape 0 planned 2 (the best), shape 1 planned 4 (1.1x).
    const int splits[] = {1, 2, 4};
    const double us[] = {40, 20, 22};
    for (int k = 0; k < 3; ++k) {
      SweepPoint p;
      p.splits = splits[k];
      p.split_blocks = 64 / splits[k];
      p.ctas = 8LL * splits[k];
      p.median_us = us[k];
      p.xcheck_max_abs = k == 0 ? -1 : 1e-4;
      r.points.push_back(p);
    }
    r.planned_splits = i == 0 ? 2 : 4;
    r.planned_split_blocks = 64 / r.planned_splits;
    sw.shapes.push_back(r);
  }
  try {
    pa::core::write_file_atomically(argv[1], bench_json(run));
    if (argc == 3) pa::core::write_file_atomically(argv[2], split_sweep_json(sw));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_json_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
