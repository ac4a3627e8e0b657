#!/usr/bin/env bash
# Which shared-memory destinations keep the prefix's V cp.async coalesced: the V copy
# pointed at diagnostic layouts (wrong results: ncu counters only, first launch).
set -u
t0=$SECONDS
source scripts/device/quick_build.sh
W=${OUT:-/tmp/pa-out}/diag; mkdir -p $W
device_quick_build $W pa-bench
cp /tmp/q/cli/pa-bench /tmp/pb_base
for v in ident sector swap sw32 sw128; do
  patch -p1 -s < exp/d_$v.patch && ninja -C /tmp/q pa-bench > $W/b_$v.log 2>&1; echo "build $v rc=$? $((SECONDS - t0)) s"
  cp /tmp/q/cli/pa-bench /tmp/pb_$v; patch -R -p1 -s < exp/d_$v.patch
done
M=lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed_op_ldgsts.sum
printf "%-8s %12s %12s %10s %8s\n" side requests sectors us L2%
for v in base ident sector swap sw32 sw128; do
  timeout 100 ncu --clock-control none --metrics "$M" -k regex:cascade_prefix_wgmma --launch-skip 0 --launch-count 1 \
    /tmp/pb_$v --cascade-only --dtypes fp16 --iters 3 --warmup 0 --warmup-ms 0 >$W/ncu_$v.txt 2>&1
  g() { grep -E "^\s+$1" $W/ncu_$v.txt | head -1 | awk '{print $NF}'; }
  printf "%-8s %12s %12s %10s %8s\n" $v "$(g lts__t_requests)" "$(g lts__t_sectors)" "$(g gpu__time)" "$(g lts__throughput)"
done
echo "total $((SECONDS - t0)) s"
