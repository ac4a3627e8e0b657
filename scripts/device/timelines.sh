#!/usr/bin/env bash
# Timelines in one device call (GPU machine, repository root): quick build for
# sm_90; the timeline, fp8 and one-GPU sharding GPU tests; then pa-lab timeline
# on the README's shapes (stage 8 small and medium decodes, stage 5 and stage 6
# on a medium one), each timeline file and its Perfetto JSON, the tracer's
# overhead per recording in a table last. The cascade too (its four kernels). $OUT gets timelines.tgz (every
# .patl, .json and log: the device tool returns at most 8 files) and the table.
#   scripts/device/timelines.sh   (PA_REV: the source revision for the headers;
#   PA_BUILD_DIR: an existing build with these targets, for instance the full
#   one gpu-check.sh left in build-device, used instead of the quick build)
set -u
source scripts/device/quick_build.sh
device_out_setup /tmp/timelines
if [[ -n "${PA_BUILD_DIR:-}" ]]; then
  B=$(realpath "$PA_BUILD_DIR")
  ninja -C "$B" pa-lab pa_trace_timeline_gpu_tests pa_fp8_gpu_tests pa_sharded_gpu_tests >"$OUT/build.log" 2>&1 \
    || { tail -20 "$OUT/build.log"; echo "build in $B FAILED"; }
else
  BUILD_LIMIT=${BUILD_LIMIT:-400} device_quick_build "$OUT" pa-lab pa_trace_timeline_gpu_tests pa_fp8_gpu_tests \
    pa_sharded_gpu_tests
fi
for t in trace/pa_trace_timeline_gpu_tests kernels/pa_fp8_gpu_tests kernels/pa_sharded_gpu_tests; do
  timeout 200 "$B/tests/$t" --reporter compact >"$OUT/$(basename "$t").log" 2>&1
  echo "$(basename "$t") rc=$? | $(grep -E '^(test cases|All tests|Passed)' "$OUT/$(basename "$t").log" | tail -1)"
done
record() {  # name, stage, problem flags...
  local name=$1 stage=$2; shift 2
  timeout 120 "$B/cli/pa-lab" timeline --stage "$stage" "$@" -o "$OUT/$name.patl" --json "$OUT/$name.json" \
    >"$OUT/$name.log" 2>&1
  echo "$name rc=$? | $(grep -E 'overhead' "$OUT/$name.log")"
}
record opt_1x4096 optimized --seqs 1 --context-len 4096 --heads 32 --kv-heads 8
record opt_8x4096 optimized --seqs 8 --context-len 4096 --heads 32 --kv-heads 8
record opt_8x4096_bf16 optimized --dtype bf16 --seqs 8 --context-len 4096 --heads 32 --kv-heads 8
record v1_8x4096 warp_reduce --seqs 8 --context-len 4096 --heads 32 --kv-heads 8
record v2_8x4096 v2_partition --seqs 8 --context-len 4096 --heads 32 --kv-heads 8
# The cascade: 16 requests sharing an 8192-token prefix, 256 tokens of their
# own, 32 heads (the README's cascade shape, 128 requests x 32768 + 256, needs
# more host memory for pa-lab's problem than the GPU machine has).
record cascade_16x8192 cascade_merge --seqs 16 --prefix-len 8192 --suffix-lens 256 --heads 32 --kv-heads 32
tar czf "$FINAL_OUT/timelines.tgz" -C "$OUT" .
grep -h "overhead\|recorded on" "$OUT"/*.log >"$FINAL_OUT/overhead.txt"
echo "done in $(( $(date +%s) - t0 )) s"
