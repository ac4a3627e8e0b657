// Writes a pa-bench results file with the real writer (cli/bench_json.hpp) and
// made-up rows, one of each status, so that test_bench_table.py checks that
// scripts/bench_table.py reads what pa-bench writes. Usage: bench_json_sample OUT.json
#include <cstdio>
#include <exception>

#include "bench_json.hpp"
#include "pa/core/atomic_file.hpp"

int main(int argc, char** argv) {
  using namespace pa::bench;
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_json_sample OUT.json\n");
    return 2;
  }
  BenchRun run;
  run.gpu = "Sample GPU";
  run.sm_count = 132;
  run.l2_bytes = 52428800;
  run.copy_gbps = 3000;
  run.copy_bytes_each_way = 2147483648.0;
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
    }
    run.rows.push_back(r);
  }
  try {
    pa::core::write_file_atomically(argv[1], bench_json(run));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_json_sample: %s\n", e.what());
    return 1;
  }
  return 0;
}
