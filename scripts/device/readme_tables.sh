#!/usr/bin/env bash
# The README's tables of one GPU in one device call (GPU machine, repository
# root): a full kernel build (every head size, block size and fp8 format) of
# pa-bench and the PyTorch op for sm_90, then, on that build, the main table
# (pa-bench), PyTorch SDPA's columns (python/benchmarks/bench_vs_sdpa.py, fp16
# and bf16), the fp8 table (pa-bench --kv-dtypes auto,fp8_e4m3,fp8_e5m2), the
# split sweeps of seeds 2 and 3, and Nsight Compute on one launch of each
# shape that misses its target (the small decodes and the one-wave fp8
# shapes). $OUT/r gets the JSON files under the names scripts/bench_table.py
# expects once copied to assets/bench/ (<gpu>.json, <gpu>-fp8.json,
# <gpu>-sdpa-<dtype>.json, <gpu>-split-sweep.json for seed 2), and logs.tgz
# (every log and the ncu reports' text pages; the .ncu-rep files stay in
# /tmp). On an H100 its build (pa-bench and the op, every kernel
# configuration) took 91 s and the whole script 272 s; on an H200,
# reusing gpu-check's build-device, the runs took 177 s.
# The files are named after the GPU that ran them (nvidia-h100, nvidia-h200,
# from nvidia-smi), never after the machine kind that was asked for.
# BUILD_DIR=<dir>: reuse a full build that has pa-bench and pa_lab_torch (say
# build-device after scripts/gpu-check.sh) instead of building one.
#   PA_REV=<rev> [BUILD_DIR=build-device] bash scripts/device/readme_tables.sh
set -u
t0=$SECONDS
nvidia-smi -L
R=${OUT:-/tmp/pa-out}/r
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H100*) G=nvidia-h100 ;;
  *H200*) G=nvidia-h200 ;;
  *) G=gpu ;;
esac
echo "files named $G"
mkdir -p "$R"
if [[ -n "${BUILD_DIR:-}" ]]; then
  F=$BUILD_DIR
  echo "build: reusing $F"
else
  F=/tmp/readme_tables
  cmake -S . -B $F -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_SOURCE_REVISION="${PA_REV:-unknown}" >"$R/cmake.log" 2>&1
  timeout 420 ninja -C $F -j16 pa-bench pa_lab_torch >"$R/build.log" 2>&1
  echo "build rc=$? $((SECONDS - t0)) s"
fi
P=$F/cli/pa-bench
timeout 90 $P --json "$R/$G.json" >"$R/bench.log" 2>&1
echo "main table rc=$? $((SECONDS - t0)) s"
L=$(find $F -name 'libpa_lab_torch.so' | head -1)
for dt in fp16 bf16; do
  PA_LAB_LIBRARY=$L PYTHONPATH=python timeout 60 python3 python/benchmarks/bench_vs_sdpa.py --dtype $dt \
    --json "$R/$G-sdpa-$dt.json" >"$R/sdpa-$dt.log" 2>&1
  echo "sdpa $dt rc=$? $((SECONDS - t0)) s"
done
timeout 150 $P --kv-dtypes auto,fp8_e4m3,fp8_e5m2 --json "$R/$G-fp8.json" >"$R/fp8.log" 2>&1
echo "fp8 table rc=$? $((SECONDS - t0)) s"
for seed in 2 3; do
  out="$R/$G-split-sweep.json"; [[ $seed == 2 ]] || out="$R/sweep_seed$seed.json"
  timeout 90 $P --split-sweep 48 --seed $seed --dtypes fp16,bf16 --kv-dtypes auto,fp8_e4m3 --iters 30 \
    --warmup-ms 10 --pool-gb 2 --json "$out" >"$R/sweep_seed$seed.log" 2>&1
  echo "split sweep seed $seed rc=$? $((SECONDS - t0)) s: $(grep -o 'within 5% of the best on [0-9]* of [0-9]*' "$R/sweep_seed$seed.log")"
done
for c in "1,32,8,4096,128 auto" "8,32,8,4096,128 auto" "1,32,8,131072,128 auto" "32,32,8,4096,128 fp8_e4m3" \
         "1,32,8,131072,128 fp8_e4m3"; do
  set -- $c; n=${1//,/x}_$2
  timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats \
    --section Occupancy --section WarpStateStats --section SchedulerStats -k regex:opt_decode --launch-skip 12 \
    --launch-count 1 -f -o "/tmp/ncu_$n" $P --only optimized --dtypes fp16 --kv-dtypes $2 --shape $1 --iters 10 \
    --warmup 5 --warmup-ms 0 --pool-gb 2 >"$R/ncu_$n.log" 2>&1
  ncu -i "/tmp/ncu_$n.ncu-rep" --page details >"$R/ncu_$n.txt" 2>&1
  echo "ncu $n: $(grep -E '^ +(Duration|DRAM Throughput)' "$R/ncu_$n.txt" | sed -E 's/ +/ /g' | tr '\n' ';')"
done
(cd "$R" && tar czf logs.tgz ./*.log ncu_*.txt && rm -f ./*.log ncu_*.txt)
echo "done in $((SECONDS - t0)) s; stage 8 rows of the main table:"
python3 - "$R/$G.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"{d['gpu']}: copy {d['copy_gbps']:.0f} GB/s, read-only {d['read_gbps']:.0f} GB/s")
for r in d["rows"]:
    if r["kernel"] in ("optimized", "cascade") and r["dtype"] == "fp16":
        print(f"  {r['kernel']:<10}{r['seqs']:>4}{r['heads']:>4}{r['kv_heads']:>4}{r['context']:>8}{r['head_size']:>5}"
              f"{r['median_us']:>10.1f} us{r['pct_copy']:>7.1f}%  {r['status'][:30]}")
PY
