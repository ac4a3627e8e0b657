#!/usr/bin/env bash
# Stage 8 on a GPU machine in one go (the optimized helper's device run):
# build (quick kernels, sm_90), resource usage + SASS opcode census, the
# stage 8 tests, the benchmark (JSON), Nsight Compute DRAM bytes for three
# shapes, compute-sanitizer on a small test. Logs go to $OUT (8 files at most).
#   OUT=/tmp/out scripts/bench_optimized_device.sh
set -u
OUT=${OUT:-/tmp/pa-out}
mkdir -p "$OUT"
B=${B:-build-dev}
cfg() {
  cmake -S . -B "$B" -G Ninja -DPA_QUICK_KERNELS=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_BUILD_VIEWER=OFF \
    -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DCMAKE_BUILD_TYPE=Release "$@" >>"$OUT/build.log" 2>&1
}
t0=$(date +%s)
nvidia-smi -L
cfg || { tail -30 "$OUT/build.log"; exit 1; }
if ! ninja -C "$B" -j16 pa_optimized_tests pa-bench >>"$OUT/build.log" 2>&1; then
  echo "full build failed (other stages?); retrying pa-bench without v1/v2/cascade"
  grep -E "error" "$OUT/build.log" | head -10
  cfg -DPA_BENCH_V1=OFF -DPA_BENCH_V2CASCADE=OFF
  ninja -C "$B" -j16 pa_optimized_tests pa-bench >>"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | tail -20; exit 1; }
fi
echo "build done in $(( $(date +%s) - t0 )) s"
LIB="$B/kernels/libpa_kernels_optimized.a"
cuobjdump --dump-resource-usage "$LIB" >"$OUT/resource.txt" 2>&1
cuobjdump -sass "$LIB" 2>/dev/null | grep -oE "(LDGSTS|LDSM|HMMA|LDL|STL|LDG|STG|LDS|STS)[.A-Z0-9]*" | sort | uniq -c >"$OUT/sass_ops.txt"

timeout 170 "$B/tests/kernels/pa_optimized_tests" --reporter compact >"$OUT/tests.log" 2>&1
echo "tests rc=$? after $(( $(date +%s) - t0 )) s"

timeout 200 "$B/cli/pa-bench" --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1
echo "bench rc=$? after $(( $(date +%s) - t0 )) s"

# ncu: --only optimized --quick runs 3 shapes x 2 dtypes, 101 launches each
# (100 timed + 1); skip 10 / 210 / 410 lands on fp16 (1,32,8,4096),
# (64,32,8,8192) and (1,32,8,131072).
for skip in 10 210 410; do
  timeout 60 ncu --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
    -k regex:opt_decode --launch-skip $skip --launch-count 1 \
    "$B/cli/pa-bench" --only optimized --quick --iters 100 --warmup 0 --pool-gb 2 --json /tmp/ncu.json >>"$OUT/ncu.txt" 2>&1
done
echo "ncu done after $(( $(date +%s) - t0 )) s"

timeout 60 compute-sanitizer --tool memcheck "$B/tests/kernels/pa_optimized_tests" "stage 8: GQA ratios incl. MQA and groups over 16" >"$OUT/sanitizer.txt" 2>&1
echo "memcheck rc=$?" >>"$OUT/sanitizer.txt"
timeout 60 compute-sanitizer --tool racecheck "$B/tests/kernels/pa_optimized_tests" "stage 8: split counts and long ragged contexts" >>"$OUT/sanitizer.txt" 2>&1
echo "racecheck rc=$?" >>"$OUT/sanitizer.txt"

echo "==== resource usage (registers / stack / smem)"
grep -E "Function|REG" "$OUT/resource.txt" | sed -E 's/^ +//' | paste - - | sed -E 's/Function (_Z[^:]*OptConfig[^:]*):/\1/' | cut -c1-200 | head -${RES_LINES:-14}
echo "==== SASS opcodes"; cat "$OUT/sass_ops.txt"
echo "==== sanitizer"; grep -E "ERROR SUMMARY|rc=|RACECHECK SUMMARY" "$OUT/sanitizer.txt"
echo "==== ncu"; grep -E "dram__bytes|gpu__time_duration|opt_decode_kernel" "$OUT/ncu.txt" | sed -E 's/ +/ /g' | cut -c1-160
echo "==== tests"; grep -vE "^$" "$OUT/tests.log" | grep -E "FAILED|failed|passed|skipped|with expansion|REQUIRE|CHECK|plan:|PASS|FAIL" | head -40; tail -3 "$OUT/tests.log"
echo "==== bench"; tail -80 "$OUT/bench.log"

# Experiments (issue 8 notes): split sweeps on the two latency-bound shapes and
# the effect of the busy-wait before each timed launch.
if [ "${SWEEP:-0}" = 1 ]; then
  echo "==== sweeps (optimized, fp16/bf16 median us)"
  sweep() {  # label, args...
    local label=$1; shift
    "$B/cli/pa-bench" --only optimized --iters 100 --pool-gb 2 --json /tmp/sw.json "$@" 2>/dev/null |
      awk -v l="$label" '$1=="optimized"{printf "%s %s %s us %s%%\n", l, $2, $8, $10}'
  }
  for sp in 4 8 16 32 64; do sweep "ctx4096 splits=$sp" --shape 1,32,8,4096,128 --splits $sp; done
  sweep "ctx4096 heuristic spin=0" --shape 1,32,8,4096,128 --spin-us 0
  for sp in 16 24 33 66; do sweep "ctx131072 splits=$sp" --shape 1,32,8,131072,128 --splits $sp; done
  for sp in 2 4 8; do sweep "8x4096 splits=$sp" --shape 8,32,8,4096,128 --splits $sp; done
fi
