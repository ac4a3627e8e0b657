#!/usr/bin/env bash
# Stage 8 on a small decode, (1,32,8,4096) by default (SHAPE=seqs,heads,kv_heads,
# context,head for another), where fixed costs dominate: quick build of
# pa-bench, the shape timed alone three times, then Nsight Compute on one of
# its launches (speed of light, warp states, launch stats, per-instruction
# stall samples as CSV). Everything in $OUT/small.tgz; a summary last.
set -u
source scripts/device/quick_build.sh
device_bench_setup /tmp/small
for i in 1 2 3; do "$P" --only optimized --shape "${SHAPE:-1,32,8,4096,128}" >>"$W/alone.txt" 2>&1; done
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats \
  --section Occupancy --section SourceCounters --import-source no -k regex:opt_decode --launch-skip 30 --launch-count 1 \
  -f -o /tmp/s8 "$P" --only optimized --shape "${SHAPE:-1,32,8,4096,128}" --iters 100 >"$W/ncu.log" 2>&1
ncu -i /tmp/s8.ncu-rep --page details >"$W/ncu_details.txt" 2>&1
ncu -i /tmp/s8.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip >"$W/ncu_src_s8.csv.gz"
tar czf "$FINAL_OUT/small.tgz" -C "$W" .
grep -E "^optimized|GPU" "$W/alone.txt"
grep -E "Duration|Elapsed Cycles|DRAM Throughput|Registers|Grid Size|Block Size|Warp Cycles Per Issued|Achieved Active|Theoretical Occ|Waves" "$W/ncu_details.txt" | sed -E 's/ +/ /g' | head -20
