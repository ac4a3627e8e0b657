#!/usr/bin/env bash
# Probe of stage 8 on one long sequence (1,32,8,131072): split sweep for the
# fp16 and fp8 caches, the fp16 timeline, Nsight Compute on fp8.
set -u
source scripts/device/quick_build.sh
device_bench_setup /tmp/probe
L=/tmp/q/cli/pa-lab
ninja -C /tmp/q pa-lab >"$W/build_lab.log" 2>&1 || tail -5 "$W/build_lab.log"
S=1,32,8,131072,128
nvidia-smi -L
for kv in auto fp8_e4m3; do for s in 0 8 16 24 32 33 48 64; do
  "$P" --only optimized --dtypes fp16 --kv-dtypes $kv --shape $S --splits $s --json "$W/b_${kv}_$s.json" >"$W/b_${kv}_$s.txt" 2>&1
  echo "$kv splits=$s $(grep -E 'done' "$W/b_${kv}_$s.txt" | sed 's/.*optimized//')"
done; done
timeout 120 "$L" timeline --stage optimized --seqs 1 --context-len 131072 --heads 32 --kv-heads 8 -o "$W/opt_1x131072.patl" --json "$W/opt_1x131072.json" >"$W/tl.log" 2>&1; echo "timeline rc=$?"; tail -3 "$W/tl.log"
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy \
  --metrics sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,dram__bytes_read.sum,gpc__cycles_elapsed.max \
  -k regex:opt_decode --launch-skip 20 --launch-count 1 -f -o /tmp/p8 "$P" --only optimized --dtypes fp16 --kv-dtypes fp8_e4m3 --shape $S --iters 30 >"$W/ncu.log" 2>&1
ncu -i /tmp/p8.ncu-rep --page details >"$W/ncu_fp8.txt" 2>&1
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
  --metrics sm__cycles_active.max,sm__cycles_active.min,sm__cycles_active.avg,dram__bytes_read.sum,gpc__cycles_elapsed.max \
  -k regex:opt_decode --launch-skip 20 --launch-count 1 -f -o /tmp/p16 "$P" --only optimized --dtypes fp16 --kv-dtypes auto --shape $S --iters 30 >"$W/ncu16.log" 2>&1
ncu -i /tmp/p16.ncu-rep --page details >"$W/ncu_fp16.txt" 2>&1
tar czf "$FINAL_OUT/probe.tgz" -C "$W" --exclude='*.patl' . ; cp "$W/opt_1x131072.patl" "$FINAL_OUT/" 2>/dev/null
for f in ncu_fp8 ncu_fp16; do echo "== $f"; grep -E "Duration|DRAM Throughput|Registers Per|Grid Size|Waves|sm__cycles_active|Achieved Occ|Warp Cycles Per Issued" "$W/$f.txt" | sed -E 's/ +/ /g' | head -14; done
