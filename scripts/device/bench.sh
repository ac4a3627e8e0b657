#!/usr/bin/env bash
# The run behind the README's results table, in one device call (GPU machine,
# repository root): quick build for sm_90; stage 8's and the cascade's GPU
# tests (the whole [cascade] suite, every prefix variant); compute-sanitizer on
# two cascades with the stage 8 suffix, one whose prefix chunks span several
# tiles (variant 8's mbarrier phases wrap); the whole benchmark (JSON for
# scripts/bench_table.py); stage 8's registers. A table last; $OUT gets
# bench.json and final.tgz (every log: the device tool returns at most 8 files).
set -u
source scripts/device/quick_build.sh
device_out_setup /tmp/final
BUILD_LIMIT=${BUILD_LIMIT:-400} device_quick_build "$OUT" pa_split_kv_tests pa_optimized_tests pa-bench pa-lab
run() {  # label, timeout, command...
  local label=$1 limit=$2; shift 2
  timeout "$limit" "$@" >"$OUT/$label.log" 2>&1
  echo "$label rc=$? | $(grep -E '^(test cases|All tests)' "$OUT/$label.log" | tail -1)"
}
run opt_tests 120 "$B/tests/kernels/pa_optimized_tests" --reporter compact
run cascade_tests 240 "$B/tests/kernels/pa_split_kv_tests" "[cascade]" --reporter compact
for tool in memcheck racecheck initcheck synccheck; do
  timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 99 "$B/cli/pa-lab" run --stage cascade_merge \
    --dtype fp16 --head-size 128 --block-size 16 --heads 4 --kv-heads 4 --seed 7 --iters 0 --seqs 3 \
    --prefix-len 32 --suffix-lens 0,17,300 --baselines 0 >"$OUT/san_$tool.log" 2>&1
  echo "compute-sanitizer $tool (cascade, stage 8 lean suffix) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | head -1)"
  timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 99 "$B/cli/pa-lab" run --prefix-chunks 2 \
    --stage cascade_merge --dtype bf16 --head-size 128 --block-size 16 --heads 4 --kv-heads 4 --seed 8 --iters 0 \
    --seqs 3 --prefix-len 1040 --suffix-lens 0,5,70 --baselines 0 >"$OUT/san2_$tool.log" 2>&1
  echo "compute-sanitizer $tool (cascade, 2 chunks of 9 tiles, bf16) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san2_$tool.log" | head -1)"
done
grep -E "suffix|plan" "$OUT/san_memcheck.log" | head -3
timeout 300 "$B/cli/pa-bench" --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
echo "bench rc=$? after $(( $(date +%s) - t0 )) s"
cuobjdump --dump-resource-usage "$B/kernels/libpa_kernels_optimized.a" 2>/dev/null |
  grep -oE "(OptConfig[^,]*ELi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+EE|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+)" |
  paste - - - - >"$OUT/opt_resources.txt"
echo "==== stage 8 resources"; cat "$OUT/opt_resources.txt"
cp "$OUT/bench.json" "$FINAL_OUT/" 2>/dev/null
tar czf "$FINAL_OUT/final.tgz" -C "$OUT" .
echo "==== bench"; grep -vE "^  done" "$OUT/bench.log" | tail -45
