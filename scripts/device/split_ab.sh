#!/usr/bin/env bash
# Where today's split planner picks another split than a reference table did,
# both splits timed on this GPU (GPU machine, repository root): for every
# stage 8 row of NEW (pa-bench's JSON of today's build) whose plan's split
# count differs from the same row of REF (say the README's table from before a
# planner change), pa-bench times the shape at REF's split and at NEW's, in
# alternation (REF, NEW, REF, NEW: one process each, the same pool size),
# and prints one line per row with the lower median of each and their ratio.
# Rows over a shared prefix are left out (--shape has no prefix).
#   bash scripts/device/split_ab.sh <pa-bench> <ref.json> <new.json> [iters]
set -u
P=$1 REF=$2 NEW=$3 ITERS=${4:-50}
python3 - "$REF" "$NEW" <<'PY' >/tmp/split_ab_rows.txt
import json, sys
def rows(path):
    out = {}
    for r in json.load(open(path))["rows"]:
        # --shape times distinct blocks per sequence: rows over a shared
        # prefix (the cascade's shape) are another problem, and are left out.
        if (r["kernel"] != "optimized" or r["status"] != "ok" or r.get("layout", "vllm") != "vllm"
                or r.get("prefix", 0) != 0):
            continue
        plan = dict(kv.split("=", 1) for kv in r["plan"].split() if "=" in kv)
        key = (r["dtype"], r["kv_dtype"], r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"])
        out[key] = int(plan["splits"])
    return out
ref, new = rows(sys.argv[1]), rows(sys.argv[2])
for key, s in sorted(new.items()):
    if key in ref and ref[key] != s:
        dt, kv, seqs, heads, kvh, ctx, hs = key
        print(dt, kv, f"{seqs},{heads},{kvh},{ctx},{hs}", ref[key], s)
PY
echo "rows whose split changed: $(wc -l </tmp/split_ab_rows.txt)"
printf '%-5s %-9s %-22s %6s %9s %6s %9s %7s\n' dtype cache shape ref_s ref_us new_s new_us new/ref
while read -r dt kv shape rs ns; do
  declare -A us=()
  for round in 1 2; do
    for s in "$rs" "$ns"; do
      j=/tmp/split_ab_${s}.json
      timeout 60 "$P" --only optimized --dtypes "$dt" --kv-dtypes "$kv" --shape "$shape" --splits "$s" \
        --iters "$ITERS" --warmup-ms 20 --pool-gb 2 --json "$j" >/dev/null 2>&1 || { us[$s,$round]=nan; continue; }
      us[$s,$round]=$(python3 -c "import json,sys; r=[x for x in json.load(open('$j'))['rows'] if x['kernel']=='optimized'][0]; print(r['median_us'] if r['status']=='ok' else 'nan')")
    done
  done
  python3 - "$dt" "$kv" "$shape" "$rs" "$ns" "${us[$rs,1]}" "${us[$rs,2]}" "${us[$ns,1]}" "${us[$ns,2]}" <<'PY'
import sys
dt, kv, shape, rs, ns = sys.argv[1:6]
r = [float(x) for x in sys.argv[6:8]]
n = [float(x) for x in sys.argv[8:10]]
ru, nu = min(r), min(n)
print(f"{dt:<5} {kv:<9} {shape:<22} {rs:>6} {ru:>9.1f} {ns:>6} {nu:>9.1f} {nu / ru:>7.3f}   (each the lower of two runs: {r[0]:.1f}/{r[1]:.1f}, {n[0]:.1f}/{n[1]:.1f})")
PY
  unset us
done </tmp/split_ab_rows.txt
