#!/usr/bin/env bash
# One device call (GPU machine, repository root; logs under $OUT):
#  1. finishes the full build in build-device in the background (setsid, so it
#     outlives a call), if one was started (the full recording instances take
#     minutes each on one core);
#  2. a quick build in /tmp/q (head 128 x block 16 kernels + recording) of
#     pa-lab and the GPU trace tests;
#     (the cascade_merge traces it also recorded at 3b1a2f8 are now made by
#     device_run_stage_times.sh, with the prefix kernel's block selected);
#  3. pa_trace_gpu_tests and pa_trace_cascade_prefix_gpu_tests (recorded ==
#     host model, the prefix kernel included);
#  4. the compute-sanitizer matrix (scripts/gpu-check.sh) with the full build's
#     pa-lab when it is done by then (default configurations fp32:8, fp16:16,
#     bf16:32), else the quick one (block 16 only).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
OUTD="${OUT:-$PWD/out/device-prefix}"; mkdir -p "$OUTD/assets"
t0=$SECONDS
if [[ -f build-device/build.ninja ]] && ! pgrep -x ninja >/dev/null; then
  setsid nohup ninja -C build-device -j8 -k 0 >"$OUTD/build_full.log" 2>&1 &
fi
source "$(dirname "${BASH_SOURCE[0]}")/device_quick_build.sh"
device_quick_build "$OUTD" pa-lab pa_trace_gpu_tests pa_trace_cascade_prefix_gpu_tests
for t in pa_trace_gpu_tests pa_trace_cascade_prefix_gpu_tests; do
  timeout 150 /tmp/q/tests/trace/$t -r compact >"$OUTD/$t.log" 2>&1
  echo "$t rc=$?"; grep -vE "^Randomness|^$|^Filters" "$OUTD/$t.log" | tail -4 | cut -c1-300
done
echo "at $((SECONDS - t0)) s; full build: $(tail -1 "$OUTD/build_full.log" 2>/dev/null | cut -c1-120)"
# Wait for the full build while there is time left for the sanitizers.
while pgrep -x ninja >/dev/null && (( SECONDS - t0 < ${FULL_WAIT:-300} )); do sleep 5; done
if [[ -x build-device/cli/pa-lab ]] && ! pgrep -x ninja >/dev/null; then
  echo "sanitizers: full build (fp32:8, fp16:16, bf16:32)"
  timeout "${SAN_LIMIT:-200}" bash scripts/gpu-check.sh --no-build --no-tests --build-dir build-device --jobs 8 --timeout 120
else
  echo "sanitizers: full build not ready; quick build (fp32:16, fp16:16, bf16:16)"
  timeout "${SAN_LIMIT:-200}" bash scripts/gpu-check.sh --no-build --no-tests --build-dir /tmp/q --jobs 8 --timeout 120 \
    --configs fp32:16,fp16:16,bf16:16
fi
echo "total $((SECONDS - t0)) s"
