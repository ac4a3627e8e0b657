#!/usr/bin/env bash
# Stage 8 trace session on a GPU machine, one command (run from the repository root):
#   1. the NullTracer proof (tracer_overhead_optimized.sh, with cuobjdump), in the background
#   2. configure + build pa_trace_optimized_gpu_tests, pa_trace_tests, pa-lab (quick kernels)
#   3. recorded == host model (stage 8 GPU tests), the host model tests of stage 8
#   4. pa-lab trace --stage optimized --source gpu --check; pa-lab run --stage optimized (timing)
# Logs and the table land in $OUT/opt-device (copied after every step). Prints the table last.
set -uo pipefail
B="${1:-/tmp/b-opt}"
OUTD="${OUT:-$PWD/out}/opt-device"
mkdir -p "$OUTD"
export PATH=/usr/local/cuda/bin:$PATH
S="$OUTD/summary.txt"
say() { echo "$*" | tee -a "$S"; }
t0=$SECONDS
nvidia-smi -L | tee -a "$S"
trace/tools/tracer_overhead_optimized.sh 90 "$OUTD/overhead" >"$OUTD/overhead.log" 2>&1 &
ovh=$!
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DPA_QUICK_KERNELS=ON >"$OUTD/cmake.log" 2>&1 || say "configure FAILED"
ninja -C "$B" -k 0 -j16 pa_trace_optimized_gpu_tests pa_trace_tests pa-lab >"$OUTD/build.log" 2>&1 \
  && say "build ok ($((SECONDS - t0)) s)" || { grep -E "error|FAILED" "$OUTD/build.log" | head -20 | tee -a "$S"; say "build FAILED ($((SECONDS - t0)) s)"; }
timeout 150 "$B/tests/trace/pa_trace_optimized_gpu_tests" -r compact >"$OUTD/gpu_tests.log" 2>&1
say "pa_trace_optimized_gpu_tests rc=$? ($((SECONDS - t0)) s): $(grep -E 'equal|passed|failed|FAILED' "$OUTD/gpu_tests.log" | tail -12 | cut -c1-200 | tr '\n' '|')"
timeout 120 "$B/tests/trace/pa_trace_tests" "[optimized]" >"$OUTD/host_tests.log" 2>&1
say "pa_trace_tests [optimized] rc=$?: $(tail -2 "$OUTD/host_tests.log" | tr '\n' ' ')"
L="$B/cli/pa-lab"
timeout 60 "$L" trace --stage optimized --heads 8 --kv-heads 2 --context-lens 600,37 --splits 4 --select "0,0,0;0,0,3;1,4,0" \
  --source gpu --check -o "$OUTD/optimized_h100.patrace" >"$OUTD/trace_gpu.log" 2>&1
say "pa-lab trace --source gpu --check rc=$?: $(grep -E 'recorded|check|wrote' "$OUTD/trace_gpu.log" | cut -c1-160 | tr '\n' ' ')"
for i in 1 2; do
  timeout 60 "$L" run --stage optimized --dtype fp16 --head-size 128 --block-size 16 --heads 32 --kv-heads 8 \
    --seqs 8 --context-len 4096 --seed 1 --iters 200 >"$OUTD/run_$i.log" 2>&1
  say "pa-lab run --stage optimized (8 x 4096, 32/8 heads) #$i rc=$?: $(grep -E 'plan|time|traffic|check' "$OUTD/run_$i.log" | cut -c1-150 | tr '\n' ' ')"
done
wait $ovh
say "tracer overhead rc=$?"
cat "$OUTD/overhead/table.txt" >>"$S" 2>/dev/null
say "total $((SECONDS - t0)) s"
echo "===== summary"; cat "$S"
