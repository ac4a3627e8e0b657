#!/usr/bin/env bash
# Stage 8 against the bare read of its tiles (GPU machine, repository root):
# quick build of pa-bench, `pa-bench --only optimized --paged-read` over the
# shape set (fp16; the held read at HELD_NS, default 700: $OUT/paged.json, the
# input of `scripts/bench_table.py --paged-read`), then Nsight Compute on one
# launch each of stage 8 and the two paged reads at one 2 GB shape (SHAPE,
# default 64,32,8,8192,128): DRAM and L2 throughput, L2 requests and sectors
# from the SMs; with STEP_NS (a
# list of ns) both paged reads again on four one-wave shapes, each warp
# held that long after every step. Everything in
# $OUT/paged_read.tgz; the paged-read lines and an ncu table last.
set -u
source scripts/device/quick_build.sh
device_bench_setup /tmp/paged
shape=${SHAPE:-64,32,8,8192,128}
timeout 300 "$P" --only optimized --paged-read --paged-read-step-ns "${HELD_NS:-700}" --dtypes fp16 --iters 50 \
  --json "$W/paged.json" >"$W/paged.txt" 2>&1
echo "pa-bench --paged-read rc=$?"
cp "$W/paged.json" "$FINAL_OUT/paged.json"
# Both paged reads holding each warp STEP_NS ns a step (stage 8's math of a
# step takes about that long), on the one-wave shapes.
for ns in ${STEP_NS:-}; do
  for sh in 1,32,8,4096,128 8,32,8,4096,128 32,32,8,4096,128 1,32,8,131072,128; do
    timeout 60 "$P" --only optimized --paged-read --paged-read-step-ns "$ns" --dtypes fp16 --iters 50 --shape "$sh" \
      --json "$W/held.json" 2>&1 | grep '^paged-read' >>"$W/held.txt"
  done
done
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_requests_srcunit_tex.sum,lts__t_sectors_srcunit_tex.sum
metrics+=,lts__t_sectors.sum,sm__warps_active.avg.pct_of_peak_sustained_active
# ncu -k regex: on demangled names, where a bool argument may read (bool)0.
for k in 'opt_decode' 'paged_read_kernel<(false|.bool.0)>' 'paged_read_kernel<(true|.bool.1)>'; do
  case $k in opt*) tag=opt_decode ;; *false*) tag=paged_cp_async ;; *) tag=paged_bulk ;; esac
  timeout 150 ncu --clock-control none --kernel-name-base demangled -k "regex:$k" --launch-skip 10 --launch-count 1 \
    --metrics "$metrics" --csv --page raw "$P" --only optimized --paged-read --dtypes fp16 --shape "$shape" \
    --iters 20 --warmup 12 --warmup-ms 0 --pool-gb 4.5 --json "$W/ncu_$tag.json" >"$W/ncu_$tag.csv" 2>"$W/ncu_$tag.err"
  echo "ncu $k rc=$?"
done
tar czf "$FINAL_OUT/paged_read.tgz" -C "$W" .
grep -E "^GPU|^paged-read" "$W/paged.txt"
[[ -f $W/held.txt ]] && sed -E 's/.*hs128 fp16 \(([0-9.]+) MB.*stage 8 ([0-9.]+) us.*paged cp.async ([0-9.]+) us \(.*paged bulk ([0-9.]+) us \(.*holding each warp ([0-9]+) ns.*: paged cp.async ([0-9.]+) us, paged bulk ([0-9.]+) us$/held \1 MB: stage 8 \2, read \3, bulk \4; held \5 ns: read \6, bulk \7 us/' "$W/held.txt"
python3 - "$W" <<'PY'
import csv, glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu_*.csv"))):
    rows = [r for r in csv.reader(open(f)) if len(r) > 5]
    if len(rows) < 3:
        print(os.path.basename(f), "no data"); continue
    head, data = rows[0], rows[2]
    want = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
            "lts__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_requests_srcunit_tex.sum",
            "lts__t_sectors_srcunit_tex.sum", "dram__bytes_read.sum"]
    vals = {h: data[i] for i, h in enumerate(head) if h in want}
    print(os.path.basename(f), " ".join(f"{w.split('.')[0].split('__')[1]}={vals.get(w, '?')}" for w in want))
PY
