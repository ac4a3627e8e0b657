#!/usr/bin/env bash
# Verification of stages 1-5 on a GPU machine, in one call (device time is
# scarce): phase A, a quick build (fp32/fp16/bf16 x head 128 x block 16):
# GPU tests, the trace-hook test, compute-sanitizer memcheck + racecheck on
# every stage for one configuration per dtype, SASS of the K/V loads, a few
# pa-lab timings. Phase B, the full build (every dtype x head x block, ptxas
# -v) within the time left: the GPU tests over every configuration, register
# and spill usage, SASS for block size 32 (16-byte K vecs).
# Usage: kernels/tools/device_verify.sh OUT_DIR [TOTAL_SECONDS=400]
# Logs go to OUT_DIR; a summary table is printed last.
set -u
export PATH=/usr/local/cuda/bin:$PATH
OUT=${1:?out dir}; TOTAL=${2:-400}
START=$(date +%s)
left() { echo $((TOTAL - ($(date +%s) - START))); }
mkdir -p "$OUT"
S="$OUT/summary.txt"; : > "$S"
row() { printf '%-60s %s\n' "$1" "$2" | tee -a "$S"; }
row "gpu" "$(nvidia-smi -L | head -1)"

build() {  # dir quick timeout targets...
  local t0=$(date +%s) d=$1 q=$2 to=$3; shift 3
  cmake -S . -B "$d" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_QUICK_KERNELS=$q -DPA_PTXAS_VERBOSE=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_BUILD_VIEWER=OFF -DCMAKE_PREFIX_PATH=$PWD/.deps/catch2/usr \
    >> "$OUT/build_$q.log" 2>&1
  timeout "$to" ninja -C "$d" -j16 "$@" >> "$OUT/build_$q.log" 2>&1
  local rc=$?
  row "build QUICK=$q -j16: $*" "rc=$rc $(( $(date +%s) - t0 )) s"
  return $rc
}
sass() {  # build-dir stage tag
  cuobjdump -sass "$1/kernels/CMakeFiles/pa_kernels.dir/instances/$2_f16_h128.cu.o" 2>&1 |
    awk '/Function :/{f=$3} /LDG/{w="32"; if(/LDG.E.128/)w="128"; else if(/LDG.E.64/)w="64"; c[f" LDG."w]++}
         END{for(k in c) print k, c[k]}' | sort | c++filt | sed -E 's/pa::kernels:://g; s/pa::KernelConfig<\(pa::DType\)1, //; s/, pa::NullTracer//' |
    cut -c1-120 > "/tmp/sass_$3.txt"
  cat "/tmp/sass_$3.txt" >> "$OUT/sass.txt"
  while read -r line; do row "SASS[$3] ${line% *}" "${line##* }"; done < "/tmp/sass_$3.txt"
}

# ---------------- phase A: quick build ----------------
BQ=/tmp/pa-quick
BF=/tmp/pa-full
if build $BQ ON 240 pa-lab pa_kernels_tests pa_kernels_hook_tests; then
  L=$BQ/cli/pa-lab
  $BQ/tests/kernels/pa_kernels_tests > "$OUT/tests_quick.log" 2>&1
  row "pa_kernels_tests (quick build)" "rc=$? $(grep -E '^(test cases|All tests)' "$OUT/tests_quick.log" | tail -1)"
  $BQ/tests/kernels/pa_kernels_hook_tests >> "$OUT/tests_quick.log" 2>&1
  row "pa_kernels_hook_tests" "rc=$? $(grep -E '^(test cases|All tests)' "$OUT/tests_quick.log" | tail -1)"
  # Phase B's full build runs in the background while the sanitizers use the GPU.
  ( build $BF OFF $(( $(left) - 90 )) pa_kernels_tests; echo $? > /tmp/pa-full.rc ) &
  BPID=$!
  : > "$OUT/runs.log"
  for dt in fp32 fp16 bf16; do
    for st in q_to_smem qk softmax lv warp_reduce; do
      for tool in memcheck racecheck; do
        echo "== $tool $st $dt" >> "$OUT/runs.log"
        compute-sanitizer --tool $tool --error-exitcode 99 $L run --stage $st --dtype $dt --heads 4 --kv-heads 2 \
          --context-lens 1,15,16,17,300 --iters 0 >> "$OUT/runs.log" 2>&1
        r=$?; echo "rc=$r" >> "$OUT/runs.log"
        row "$tool $st $dt h128 b16" "$([ $r -eq 0 ] && echo clean+PASS || echo rc=$r)"
      done
    done
  done
  sass $BQ qk qk_quick; sass $BQ lv lv_quick
  for st in qk warp_reduce; do
    for dt in fp16 bf16; do
      $L run --stage $st --dtype $dt --seqs 32 --heads 32 --kv-heads 8 --context-len 4096 --iters 50 >> "$OUT/runs.log" 2>&1
      row "run $st $dt seqs32 heads32/8 ctx4096" "$(grep -E '^(time|traffic)' "$OUT/runs.log" | tail -2 | sed -E 's/.*median ([0-9.]+ ms).*/\1/; s/.*-> //' | tr '\n' ' ')$(tail -1 "$OUT/runs.log")"
    done
  done
fi

# ---------------- phase B: full build (started above) ----------------
[ -n "${BPID:-}" ] && wait $BPID
if [ "$(cat /tmp/pa-full.rc 2>/dev/null)" = 0 ]; then
  grep -E 'ptxas info|Compiling entry|spill' "$OUT/build_OFF.log" > "$OUT/ptxas.txt"
  row "ptxas: kernels with nonzero spill stores (full build)" "$(grep -c -E ' [1-9][0-9]* bytes spill stores' "$OUT/ptxas.txt")"
  sass $BF qk qk_full
  timeout $(( $(left) - 5 )) $BF/tests/kernels/pa_kernels_tests > "$OUT/tests_full.log" 2>&1
  row "pa_kernels_tests (full build: every config)" "rc=$? $(grep -E '^(test cases|All tests)' "$OUT/tests_full.log" | tail -1)"
else
  row "phase B (full build)" "failed or timed out (left $(left) s)"
fi
echo; echo "==== summary ===="; cat "$S"
