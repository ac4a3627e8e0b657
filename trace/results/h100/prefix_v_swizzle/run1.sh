#!/usr/bin/env bash
# Swizzled V tiles in the wgmma prefix: full-build GPU tests of the cascade, A/B against HEAD, ncu counters.
set -u
t0=$SECONDS
F=/tmp/full; mkdir -p $OUT
cmake -S . -B $F -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DPA_SOURCE_REVISION=swz >$OUT/cmake_full.log 2>&1
timeout 280 ninja -C $F -j16 pa_split_kv_tests pa_multilevel_gpu_tests >$OUT/build_full.log 2>&1
echo "full build rc=$? $((SECONDS - t0)) s"; grep -E "^FAILED|error" $OUT/build_full.log | head -5
ROUNDS=3 PA_BENCH_LIMIT=60 bash scripts/device/bench_compare.sh exp/before.tgz --cascade-only 2>&1 | tail -14
echo "compare done $((SECONDS - t0)) s"
M=lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
for s in before after; do
  timeout 60 ncu --clock-control none --metrics "$M" -k regex:cascade_prefix_wgmma --launch-skip 3 --launch-count 1 \
    /tmp/bench_compare/b_$s/cli/pa-bench --cascade-only --dtypes fp16 --iters 10 --warmup 1 --warmup-ms 0 >$OUT/ncu_$s.txt 2>&1
  echo "== ncu $s: $(grep -E '^\s+(lts__|gpu__|dram__)' $OUT/ncu_$s.txt | awk '{print $1"="$NF}' | sed 's/.sum//; s/.avg.pct_of_peak_sustained_elapsed/%/' | tr '\n' ' ')"
done
for t in pa_split_kv_tests pa_multilevel_gpu_tests; do
  timeout 150 $F/tests/kernels/$t "[cascade],[multilevel]" >$OUT/$t.log 2>&1
  echo "$t rc=$?: $(grep -E '^test cases|^All tests passed' $OUT/$t.log | head -1) $((SECONDS - t0)) s"
done
