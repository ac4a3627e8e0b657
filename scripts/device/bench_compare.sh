#!/usr/bin/env bash
# Before and after a change, in one device call on one GPU (GPU machine,
# repository root): the working tree and an older source tree (a tarball from
# `git archive --prefix=before/ REV | gzip`) each get the quick kernel build of
# pa-bench, built side by side; then the benchmark runs before, after, before,
# after (so a drift of the GPU's clocks shows up as a difference between the
# two runs of one side), and a table gives each row's median per side (the
# lower of its two runs) and after / before.
#   scripts/device/bench_compare.sh BEFORE.tgz [pa-bench options...]
# Environment: PA_BENCH_LIMIT (s per benchmark run, default 100).
set -u
tgz=${1:?usage: scripts/device/bench_compare.sh BEFORE.tgz [pa-bench options...]}; shift
FINAL_OUT=${OUT:-/tmp/pa-out}; W=/tmp/bench_compare
rm -rf "$W"; mkdir -p "$W" "$FINAL_OUT"
tar xzf "$tgz" -C "$W" || { echo "cannot unpack $tgz"; exit 1; }
nvidia-smi -L | tee "$W/gpu.txt"
build() {  # source dir, build dir
  cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON >"$2.cmake.log" 2>&1 &&
    ninja -C "$2" -j8 pa-bench >"$2.build.log" 2>&1
  echo "build $1: rc=$?"
}
t0=$SECONDS
build "$W/before" "$W/b_before" & build "$PWD" "$W/b_after" & wait
echo "builds: $((SECONDS - t0)) s"
for run in before.1 after.1 before.2 after.2; do
  side=${run%.*}
  timeout "${PA_BENCH_LIMIT:-100}" "$W/b_$side/cli/pa-bench" --json "$W/$run.json" "$@" >"$W/$run.log" 2>&1
  echo "$run rc=$? ($((SECONDS - t0)) s)"
done
tar czf "$FINAL_OUT/bench_compare.tgz" -C "$W" gpu.txt before.1.json after.1.json before.2.json after.2.json \
  before.1.log after.1.log before.2.log after.2.log 2>/dev/null
python3 - "$W" <<'PY' | tee "$FINAL_OUT/bench_compare.txt"
import json, os, sys
w = sys.argv[1]
def rows(run):
    p = os.path.join(w, run + ".json")
    if not os.path.exists(p):
        return {}
    # The dtype column names an fp8 cache too, so that rows of several caches stay apart.
    return {(r["kernel"], r["dtype"] + ("" if r.get("kv_dtype", "auto") == "auto" else "+" + r["kv_dtype"][4:]),
             r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"]): r
            for r in json.load(open(p))["rows"]}
runs = {k: rows(k) for k in ("before.1", "after.1", "before.2", "after.2")}
keys = [k for k in runs["after.1"] if all(k in r for r in runs.values())]
print(f"{open(os.path.join(w, 'gpu.txt')).read().strip()}; rows in all four runs: {len(keys)}")
print(f"{'kernel':<14}{'dtype':<10}{'shape (seqs,heads,kv,ctx,d)':<30}{'before us':>10}{'after us':>10}{'after/before':>13}"
      f"{'b1/b2':>7}{'a1/a2':>7}")
ratios, skipped = [], []
for k in keys:
    b = [runs[r][k] for r in ("before.1", "before.2")]
    a = [runs[r][k] for r in ("after.1", "after.2")]
    if any(x["status"] != "ok" for x in a + b):
        skipped.append(f"{k[0]} {k[1]} {','.join(map(str, k[2:]))}: before {b[0]['status'][:60]}; "
                       f"after {a[0]['status'][:60]}")
        continue
    bm = min(x["median_us"] for x in b); am = min(x["median_us"] for x in a)
    ratios.append(am / bm)
    print(f"{k[0]:<14}{k[1]:<10}{','.join(map(str, k[2:])):<30}{bm:>10.2f}{am:>10.2f}{am / bm:>13.3f}"
          f"{b[0]['median_us'] / b[1]['median_us']:>7.3f}{a[0]['median_us'] / a[1]['median_us']:>7.3f}")
for line in skipped:
    print("not timed on both sides:", line)
if ratios:
    ratios.sort()
    print(f"after/before over {len(ratios)} rows: min {ratios[0]:.3f}, median {ratios[len(ratios) // 2]:.3f}, "
          f"max {ratios[-1]:.3f}")
PY
