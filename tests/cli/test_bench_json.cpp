// pa-bench's results file (cli/bench_json.hpp) and its cross-check (cli/bench_check.hpp): the schema scripts/bench_table.py
// reads (the write that never loses the previous file is pa::core's, tested in
// tests/core/test_atomic_file.cpp). The Python side of
// the schema is checked by test_bench_table.py on a file this writer made
// (bench_json_sample.cpp).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "bench_check.hpp"
#include "bench_json.hpp"
#include "pa/core/tolerance.hpp"

using namespace pa;
using namespace pa::bench;
using Catch::Matchers::ContainsSubstring;

namespace {

BenchRow row(const char* kernel, const char* dtype, int prefix, const std::string& status, double us) {
  BenchRow r;
  r.kernel = kernel;
  r.dtype = dtype;
  r.shape = {128, 32, 32, 4096, 128};
  r.shape.prefix = prefix;
  r.status = status;
  r.median_us = us;
  r.kv_bytes = 16777216;
  r.pool_sets = 110;
  r.pool_bytes = 110.0 * 16777216;
  return r;
}

}  // namespace

TEST_CASE("bench JSON: every documented key, in every row", "[cli][bench]") {
  BenchRun run;
  run.gpu = "Test GPU";
  run.sm_count = 132;
  run.l2_bytes = 52428800;
  run.copy_gbps = 2985.04;
  run.copy_bytes_each_way = 2147483648.0;
  run.rows = {row("optimized", "fp16", 0, "ok", 15.3), row("v1", "fp16", 0, "unsupported: too long", 0)};
  const std::string j = bench_json(run);
  for (const char* key : {"gpu", "sm_count", "l2_bytes", "copy_gbps", "copy_bytes_each_way", "iters", "warmup",
                          "warmup_ms", "spin_us", "alibi", "kv_dtypes", "pool_gb", "kv_bytes_note", "pct_copy_note", "pool_note", "rows",
                          "cascade"}) {
    INFO(key);
    CHECK_THAT(j, ContainsSubstring("\n  \"" + std::string(key) + "\": "));
  }
  const std::vector<std::string> row_keys = {
      "kernel",   "dtype",     "kv_dtype", "seqs",   "heads",     "kv_heads", "context", "prefix",  "head_size",
      "block_size", "kv_bytes", "pool_sets", "pool_bytes", "status", "median_us", "min_us",  "p10_us",
      "p90_us",   "timed",     "warmup_launches", "gbps", "pct_copy", "xcheck_max_abs_vs_optimized", "plan"};
  // Each row line holds every key once, in the documented order.
  std::istringstream lines(j);
  int rows_seen = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("    {\"kernel\"", 0) != 0) continue;
    ++rows_seen;
    std::size_t at = 0;
    for (const std::string& k : row_keys) {
      const std::size_t p = line.find("\"" + k + "\": ", at);
      INFO(line << "\nkey " << k);
      REQUIRE(p != std::string::npos);
      at = p;
    }
  }
  CHECK(rows_seen == 2);
  // Exact numbers: the shortest text that reads back the same double.
  CHECK_THAT(j, ContainsSubstring("\"copy_bytes_each_way\": 2147483648,"));
  CHECK_THAT(j, ContainsSubstring("\"copy_gbps\": 2985.04,"));
  CHECK_THAT(j, ContainsSubstring("\"pool_sets\": 110, \"pool_bytes\": 1845493760,"));
  CHECK_THAT(j, ContainsSubstring("\"status\": \"unsupported: too long\""));
  CHECK_THAT(j, ContainsSubstring("\"spin_us\": 50,"));
  CHECK_THAT(j, ContainsSubstring("\"alibi\": false,"));
}

TEST_CASE("bench JSON: strings are escaped, non-finite numbers are null", "[cli][bench]") {
  CHECK(json_string("a\"b\\c") == "\"a\\\"b\\\\c\"");
  CHECK(json_string("line\nnext\ttab") == "\"line\\u000anext\\u0009tab\"");
  BenchRun run;
  run.gpu = "GPU \"quoted\"";
  run.copy_gbps = std::numeric_limits<double>::quiet_NaN();
  BenchRow r = row("v2", "bf16", 0, "error: cudaErrorIllegalAddress\nat launch", 0);
  r.xcheck_max_abs = std::numeric_limits<double>::infinity();
  run.rows = {r};
  const std::string j = bench_json(run);
  CHECK_THAT(j, ContainsSubstring("\"gpu\": \"GPU \\\"quoted\\\"\""));
  CHECK_THAT(j, ContainsSubstring("\"copy_gbps\": null,"));
  CHECK_THAT(j, ContainsSubstring("\"xcheck_max_abs_vs_optimized\": null"));
  CHECK_THAT(j, ContainsSubstring("\"status\": \"error: cudaErrorIllegalAddress\\u000aat launch\""));
  CHECK(j.find("inf") == std::string::npos);
  CHECK(j.find("nan") == std::string::npos);
}

TEST_CASE("bench JSON: the cascade speedup is over the best other kernel that ran", "[cli][bench]") {
  const std::vector<BenchRow> rows = {
      row("optimized", "fp16", 32768, "ok", 20000), row("v1", "fp16", 32768, "ok", 30000),
      row("v2", "fp16", 32768, "ok", 12000),        row("cascade", "fp16", 32768, "ok", 400),
      row("v2", "bf16", 32768, "error: x", 1),      row("optimized", "bf16", 32768, "ok", 8000),
      row("cascade", "bf16", 32768, "ok", 400),     row("v2", "fp16", 0, "ok", 1),  // not the cascade problem
  };
  const auto c = cascade_speedups(rows);
  REQUIRE(c.size() == 2);
  CHECK(c[0].dtype == "fp16");
  CHECK(c[0].best_kernel == "v2");
  CHECK(c[0].speedup == 30.0);
  CHECK(c[1].dtype == "bf16");
  CHECK(c[1].best_kernel == "optimized");  // v2's 1 us is an error, not a time
  CHECK(c[1].speedup == 20.0);
  CHECK(cascade_speedups({row("cascade", "fp16", 32768, "ok", 400)}).empty());
}

TEST_CASE("bench cross-check: agreement within the kernel pair tolerance, anything else a reason", "[cli][bench]") {
  const std::vector<float> ref = {0.5f, -1.25f, 3.0f, 0.0f};
  int cases = 0;
  for (DType dt : {DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    const Tolerance t = kernel_pair_tolerance(dt);
    CHECK(xcheck_failure(ref, ref, dt).empty());
    // Every element off by 90% of what the pair tolerance allows: agrees.
    std::vector<float> near = ref;
    for (float& v : near) v += static_cast<float>(0.9 * (t.abs + t.rel * std::fabs(v)));
    CHECK(xcheck_failure(ref, near, dt).empty());
    // One element off by 0.25 (a wrong token's worth): a reason naming it.
    std::vector<float> wrong = ref;
    wrong[2] += 0.25f;
    const std::string why = xcheck_failure(ref, wrong, dt);
    CHECK_THAT(why, ContainsSubstring("FAIL"));
    CHECK_THAT(why, ContainsSubstring("worst[2]"));
    // NaN never agrees, even where stage 8 has NaN too.
    std::vector<float> nan = ref;
    nan[1] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THAT(xcheck_failure(ref, nan, dt), ContainsSubstring("nan=1"));
    CHECK_FALSE(xcheck_failure(nan, nan, dt).empty());
    // Sizes must match; an empty output is no evidence.
    CHECK_THAT(xcheck_failure(ref, {0.5f}, dt), ContainsSubstring("1 elements against stage 8's 4"));
    CHECK_THAT(xcheck_failure({}, {}, dt), ContainsSubstring("no output"));
    ++cases;
  }
  CHECK(cases == 2);
}
