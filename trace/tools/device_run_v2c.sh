#!/usr/bin/env bash
# One device session for the stage 6 reduce / stage 7 trace work: quick build of
# the GPU trace tests and pa-lab, `ctest -L gpu -R record`, and (ASSETS=1, the default)
# recorded traces of q_to_smem, v2_partition and cascade_merge (checked against the host model).
# Run on the GPU machine from the repository root; logs and traces under $OUT.
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
OUTD="${OUT:-$PWD/out/device-v2c}"; mkdir -p "$OUTD/assets"
t0=$SECONDS
nvidia-smi -L
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DPA_BUILD_VIEWER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" \
  -DPA_QUICK_KERNELS=ON >"$OUTD/cmake.log" 2>&1 || { tail -20 "$OUTD/cmake.log"; echo "configure FAILED"; }
T=(pa_trace_gpu_tests pa_trace_optimized_gpu_tests); [[ "${ASSETS:-1}" == 1 ]] && T+=(pa-lab)
timeout "${BUILD_LIMIT:-200}" ninja -C /tmp/b -j16 -k 0 "${T[@]}" >"$OUTD/build.log" 2>&1
echo "build rc=$? at $((SECONDS - t0)) s"; grep -E "error|FAILED" "$OUTD/build.log" | head -10
L=/tmp/b/cli/pa-lab
if [[ "${ASSETS:-1}" == 1 ]]; then
A=(--dtype fp16 --head-size 128 --block-size 16 --heads 4 --kv-heads 2)
$L trace --stage q_to_smem "${A[@]}" --context-lens 50,20 --select 0,1 --source gpu --check \
  -o "$OUTD/assets/q_to_smem.patrace" 2>&1 | grep -E "check|wrote|rror" | cut -c1-150
$L trace --stage v2_partition "${A[@]}" --context-lens 100,20 --partition-size 32 --select 0,1,3 --source gpu --check \
  -o "$OUTD/assets/v2_partition.patrace" 2>&1 | grep -E "check|wrote|rror" | cut -c1-150
$L trace --stage cascade_merge "${A[@]}" --context-lens 96,130 --prefix-len 64 --partition-size 32 --select 1,1,1 \
  --source gpu --check -o "$OUTD/assets/cascade_merge.patrace" 2>&1 | grep -E "check|wrote|rror" | cut -c1-150
fi
timeout 100 /tmp/b/tests/trace/pa_trace_gpu_tests -r compact >"$OUTD/gpu_tests.log" 2>&1
echo "pa_trace_gpu_tests rc=$?"; grep -vE "^Randomness|^$" "$OUTD/gpu_tests.log" | tail -40 | cut -c1-300
(cd /tmp/b && timeout 150 ctest -L gpu -R record >"$OUTD/ctest.log" 2>&1; echo "ctest -L gpu -R record rc=$?"; tail -6 "$OUTD/ctest.log")
echo "total $((SECONDS - t0)) s"
