#!/usr/bin/env bash
# The four-way A/B of stage 8's copies as it ran on the H100 (GPU machine, repository root,
# with base.tgz, nohint.tgz, bulk.tgz, noswz.tgz: `git archive` of b69126b, without the
# assets and results, each with one patch of trace/results/h200/copy_ab_not_run/ applied;
# carry .deps). The table: python3 ab3_table.py DIR.
set -u
FO=${OUT:-/tmp/pa-out}; W=/tmp/ab3; rm -rf $W; mkdir -p $W $FO
nvidia-smi -L | tee $W/gpu.txt; cp $W/gpu.txt $FO/
T0=$SECONDS
for a in base nohint bulk noswz; do mkdir -p $W/$a; tar xzf $a.tgz -C $W/$a; done
build() {  # arm, jobs, targets...
  local a=$1 j=$2; shift 2
  cmake -S $W/$a -B $W/b_$a -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF \
    -DCMAKE_PREFIX_PATH=$PWD/.deps/catch2/usr -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON \
    >$W/$a.cmake.log 2>&1 && ninja -C $W/b_$a -j$j "$@" >$W/$a.build.log 2>&1
  echo "build $a rc=$? at $((SECONDS - T0)) s"; grep -E "error|FAILED" $W/$a.build.log | head -5
}
build base 3 pa-bench & build nohint 3 pa-bench & build noswz 3 pa-bench & build bulk 5 pa-bench & wait
# The bulk side's vLLM tiles against the nhd / hnd caches, which keep the 16-byte copies.
timeout 90 $W/b_bulk/cli/pa-bench --only optimized --dtypes fp16 --layouts nhd,hnd --iters 20 --json $W/bulk.nhd.json >$W/bulk.nhd.log 2>&1
echo "bulk nhd rc=$? at $((SECONDS - T0)) s"
for run in base.1 nohint.1 bulk.1 noswz.1 base.2 nohint.2 bulk.2 noswz.2; do
  a=${run%.*}
  pr=; [[ $a == base ]] && pr="--paged-read --paged-read-step-ns 700"
  timeout 100 $W/b_$a/cli/pa-bench --only optimized --dtypes fp16 $pr --json $W/$run.json >$W/$run.log 2>&1
  echo "$run rc=$? at $((SECONDS - T0)) s"
done
python3 ab3_table.py $W | tee $FO/table.txt
if (( SECONDS - T0 < 300 )); then
  ninja -C $W/b_bulk -j16 pa_optimized_tests pa_layouts_gpu_tests >$W/bulk.tests.build.log 2>&1
  echo "bulk tests build rc=$? at $((SECONDS - T0)) s"
  for t in pa_optimized_tests pa_layouts_gpu_tests; do
    timeout 150 $W/b_bulk/tests/kernels/$t >$W/bulk.$t.log 2>&1; echo "bulk $t rc=$? at $((SECONDS - T0)) s"; tail -3 $W/bulk.$t.log
  done
fi
(cd $W && tar czf $FO/ab3.tgz gpu.txt *.json *.log)  # the archive here was made so, in a second call
