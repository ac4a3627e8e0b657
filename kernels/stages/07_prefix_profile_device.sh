#!/usr/bin/env bash
# Prefix-kernel profiling round (session 5): the default build with the
# [cascade] tests, a variant sweep and per-instruction ncu stall samples of
# variants 4 and 7, then variant 7 with 3 tiles in flight (CUDAFLAGS
# -DPA_WG7_AHEAD=3, its own build). Summary last; files in $OUT.
set -u
export OUT=${OUT:-/tmp/pa-out}
TEST_TIMEOUT=240 BENCH_TIMEOUT=150 CASCADE_SWEEP="4:1:0:2,7:1:0:2,7:0:0:0" NCU=0 NCU_SOURCE=1 NCU_VARIANTS="4 7" \
  bash kernels/stages/07_cascade_prefix_device.sh > "$OUT/main.txt" 2>&1
mkdir -p "$OUT/a3"
( OUT="$OUT/a3" B=/tmp/b3 TESTS=0 BENCH_TIMEOUT=120 CASCADE_SWEEP="7:1:0:2,7:0:0:0" TARGETS=pa-bench \
  CUDAFLAGS=-DPA_WG7_AHEAD=3 bash kernels/stages/07_cascade_prefix_device.sh > "$OUT/a3/main.txt" 2>&1 )
echo "=== default build"; grep -E "build done|sweep|^cascade " "$OUT/main.txt"
echo "=== AHEAD=3"; grep -E "build done|sweep|FAILED|error" "$OUT/a3/main.txt" | head
echo "=== tests"; grep -E "FAILED|failed|passed" "$OUT/tests.log" | tail -5; tail -3 "$OUT/tests.log"
