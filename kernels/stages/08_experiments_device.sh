#!/usr/bin/env bash
# Issue 8 experiments on a GPU machine in one device call: the quick build,
# the cascade tests with the suffix through stage 8, stage 8's tests, the
# cascade bench + suffix sweep (07_cascade_prefix_device.sh), then a split
# sweep at (1,32,8,4096). Logs to $OUT; a short table last. (Run A of kernels/NOTES.md
# "Run 5" also swept PA_OPT_DEEP=0/1, the deep pipeline since removed.)
set -u
OUT=${OUT:-/tmp/pa-out}
export B=${B:-/tmp/b}
export TARGETS="pa_v2_cascade_tests pa_optimized_tests pa-bench"
export TEST_FILTER=${TEST_FILTER:-"cascade: the suffix through stage 8,cascade equals plain attention over prefix + suffix"}
export TEST_TIMEOUT=${TEST_TIMEOUT:-200} BENCH_TIMEOUT=${BENCH_TIMEOUT:-240}
export CASCADE_SWEEP=${CASCADE_SWEEP:-"4:1:0:0,4:2:0:0,4:1:0:1,4:2:0:1,4:1:0:2,4:2:0:2"}
bash kernels/stages/07_cascade_prefix_device.sh || exit 1
timeout 120 "$B/tests/kernels/pa_optimized_tests" --reporter compact >"$OUT/opt_tests.log" 2>&1
echo "stage 8 tests rc=$?: $(tail -1 "$OUT/opt_tests.log")"
echo "==== (1,32,8,4096) sweep: splits kernel dtype ... median_us GB/s %copy"
for sp in ${SPLITS:-0 4 6 8 10 13 16 24}; do
  extra=(); [ "$sp" -gt 0 ] && extra=(--splits "$sp")
  timeout 60 "$B/cli/pa-bench" --only optimized --iters 200 --pool-gb 2 --json /tmp/sw.json \
    --shape 1,32,8,4096,128 "${extra[@]}" 2>/dev/null |
    awk -v l="splits=$sp" '$1=="optimized"{print l, $0}'
done | tee "$OUT/small_sweep.txt"
