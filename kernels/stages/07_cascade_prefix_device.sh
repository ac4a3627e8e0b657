#!/usr/bin/env bash
# Stage 7 cascade on a GPU machine in one go (device tool run): build the
# quick kernels for sm_90, prefix-kernel resource usage, the [cascade] tests,
# then pa-bench on the cascade shape only (every kernel on it) plus a sweep of
# prefix variants x stream modes x chunk counts x suffix kernels (CASCADE_SWEEP,
# variant:streams:chunks[:suffix],...). TEST_FILTER picks the Catch2 tests
# (default "[cascade]"). Logs to $OUT.
set -u
OUT=${OUT:-/tmp/pa-out}
mkdir -p "$OUT"
B=${B:-/tmp/b}
t0=$(date +%s)
nvidia-smi -L
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPA_QUICK_KERNELS=ON -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
ninja -C "$B" -j16 ${TARGETS:-pa_v2_cascade_tests pa-bench} >>"$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -20; exit 1; }
echo "build done in $(( $(date +%s) - t0 )) s"
cuobjdump --dump-resource-usage "$B/kernels/libpa_kernels_v2cascade.a" 2>/dev/null | grep -A1 cascade_prefix |
  grep -oE "(Li[0-9]+ELi[0-9]+ELi128EEELi[0-9]|REG:[0-9]+|STACK:[0-9]+|SHARED:[0-9]+|LOCAL:[0-9]+)" | paste - - - - - >"$OUT/resource.txt"
if [ "${TESTS:-1}" = 1 ]; then
  timeout ${TEST_TIMEOUT:-200} "$B/tests/kernels/pa_v2_cascade_tests" "${TEST_FILTER:-[cascade]}" --reporter compact >"$OUT/tests.log" 2>&1
  echo "tests rc=$? after $(( $(date +%s) - t0 )) s"
fi
timeout ${BENCH_TIMEOUT:-200} "$B/cli/pa-bench" --cascade-only --json "$OUT/cascade.json" \
  --cascade-sweep "${CASCADE_SWEEP:-}" >"$OUT/bench.log" 2>&1
echo "bench rc=$? after $(( $(date +%s) - t0 )) s"
echo "==== prefix kernel resources (head x block, variant; fp16 then bf16)"; cat "$OUT/resource.txt"
echo "==== tests"; grep -E "FAILED|failed|passed|with expansion" "$OUT/tests.log" | head -20; tail -2 "$OUT/tests.log"
echo "==== bench"; grep -vE "^  done" "$OUT/bench.log" | tail -40
if [ "${NCU:-0}" = 1 ]; then
  for v in ${NCU_VARIANTS:-4}; do  # the prefix variant of pa-bench's cascade row (PA_CASCADE_PREFIX_VARIANT)
    echo "==== ncu: prefix kernel variant $v (first dtype, one launch)"
    PA_CASCADE_PREFIX_VARIANT=$v timeout 150 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
      --section Occupancy -k regex:"${NCU_KERNEL:-cascade_prefix_wgmma}" --launch-skip 3 --launch-count 1 \
      "$B/cli/pa-bench" --cascade-only --iters 100 --warmup 1 --json /tmp/ncu.json >"$OUT/ncu_v$v.txt" 2>&1
    grep -E "Throughput|Duration|Warp Cycles|Issued|Eligible|Active Warps|Registers|Occupancy|Elapsed" "$OUT/ncu_v$v.txt" |
      sed -E 's/ +/ /g' | head -24
    echo "==== ncu: variant $v stall reasons (warps stalled per issued instruction, largest first)"
    PA_CASCADE_PREFIX_VARIANT=$v timeout 150 ncu --clock-control none \
      --metrics "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$" \
      -k regex:"${NCU_KERNEL:-cascade_prefix_wgmma}" --launch-skip 3 --launch-count 1 \
      "$B/cli/pa-bench" --cascade-only --iters 100 --warmup 1 --json /tmp/ncu2.json >"$OUT/ncu_stalls_v$v.txt" 2>&1
    grep -E "stalled" "$OUT/ncu_stalls_v$v.txt" | sed -E 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//; s/ +/ /g' |
      sort -k3 -g -r | head -10
  done
fi
if [ "${NCU_SOURCE:-0}" = 1 ]; then
  # Per-SASS-instruction stall samples (ncu source page as CSV) and the SASS of
  # the prefix kernels, gzipped into $OUT for reading on the workstation.
  cuobjdump -sass "$B/kernels/libpa_kernels_v2cascade.a" 2>/dev/null | gzip >"$OUT/v2cascade_sass.txt.gz"
  for v in ${NCU_VARIANTS:-4}; do
    PA_CASCADE_PREFIX_VARIANT=$v timeout 200 ncu --clock-control none --section SourceCounters --section WarpStateStats \
      --import-source no -k regex:"${NCU_KERNEL:-cascade_prefix_wgmma}" --launch-skip 3 --launch-count 1 -f -o "/tmp/src_v$v" \
      "$B/cli/pa-bench" --cascade-only --iters 100 --warmup 1 --json /tmp/ncu3.json >"$OUT/ncu_src_v$v.log" 2>&1
    ncu -i "/tmp/src_v$v.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$OUT/ncu_src_v$v.csv.gz"
    echo "ncu source page v$v: $(zcat "$OUT/ncu_src_v$v.csv.gz" | wc -l) lines"
  done
fi
