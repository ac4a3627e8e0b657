#!/usr/bin/env bash
# Where the cascade prefix kernel's L2 traffic comes from (kernels/NOTES.md,
# "cascade changes": the prefix was L2-bound, not DRAM-bound, until its V
# copies kept each cache line together): Nsight Compute
# memory metrics of one launch of the (wgmma) prefix kernel next to stage 8
# at (64,32,8,8192), which reaches the copy bandwidth; the requests and
# sectors the SMs ask L2 for (srcunit_tex) are the ones cascade changes 20-21
# count. A table last; logs in $OUT/l2.tgz.
set -u
source scripts/device/quick_build.sh
device_bench_setup /tmp/l2
M=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_requests_op_read.sum,\
lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,\
lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sector_op_read_hit_rate.pct,\
lts__t_sectors_op_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,\
dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
BD=--metrics=breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed
profile() {  # output, kernel regex, pa-bench arguments...
  local out=$1 k=$2; shift 2
  timeout 200 ncu --clock-control none --metrics "$M" $BD \
    -k regex:"$k" --launch-skip 3 --launch-count 1 "$P" "$@" --iters 100 --warmup 1 --warmup-ms 0 \
    --json /tmp/l2.json >"$out" 2>&1
}
profile "$W/prefix.txt" cascade_prefix_wgmma --cascade-only
if ! grep -q dram__bytes_read "$W/prefix.txt"; then BD=; profile "$W/prefix.txt" cascade_prefix_wgmma --cascade-only; fi
profile "$W/stage8.txt" opt_decode --only optimized --shape 64,32,8,8192,128 --dtypes fp16
tar czf "$FINAL_OUT/l2.tgz" -C "$W" .
for f in prefix stage8; do
  echo "==== $f"
  grep -E "^\s+(dram__|lts__|gpu__time|sm__cycles)" "$W/$f.txt" | sed -E 's/ +/ /g' | sort -u
done
