#!/usr/bin/env python3
"""The table of scripts/device/bench_compare.sh: for each row timed on every side, the base
side's median (the lowest of its runs), each other side's as time over the base's (above 1:
slower), and the largest spread between one side's own runs (the noise to read the ratios
against); then each side's ratios summed up.

    bench_compare_table.py WORKDIR BASE_SIDE [OTHER_SIDE...]

WORKDIR holds SIDE.ROUND.json (pa-bench --json) and gpu.txt; a round run as several
pa-bench calls (bench_compare.sh's SHAPES: one --shape each) is SIDE.ROUND.PART.json, its
parts' rows taken together."""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench_table import kv_dtype, layout  # noqa: E402  (what a row means in files before fp8 and layouts)


def row_key(r):
    # The dtype column names an fp8 cache and the kernel column a layout other
    # than vLLM's, so that rows of several caches and layouts stay apart (one
    # word each: the table's columns are split on spaces).
    kv = kv_dtype(r)
    dtype = r["dtype"] + ("" if kv == "auto" else "+" + kv[4:])
    kernel = r["kernel"] + ("" if layout(r) == "vllm" else "/" + layout(r))
    return (kernel, dtype, r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"])


def load_runs(workdir, side):
    """{round: {row key: row}} of one side's JSON files (a round's parts together)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(workdir, glob.escape(side) + ".*.json"))):
        m = re.fullmatch(re.escape(side) + r"\.(\d+)(\.\d+)?\.json", os.path.basename(path))
        if m:
            with open(path) as f:
                runs.setdefault(int(m.group(1)), {}).update({row_key(r): r for r in json.load(f)["rows"]})
    return runs


def table(workdir, sides):
    out = []
    gpu = os.path.join(workdir, "gpu.txt")
    out.append(open(gpu).read().strip() if os.path.exists(gpu) else "GPU unknown")
    runs = {s: load_runs(workdir, s) for s in sides}
    for s in sides:
        out.append(f"side {s}: {len(runs[s])} run(s)")
    base, others = sides[0], sides[1:]
    if not runs[base]:
        out.append(f"no run of the base side {base}: nothing to compare")
        return out
    keys = [k for k in next(iter(runs[base].values()))
            if all(runs[s] and all(k in rr for rr in runs[s].values()) for s in sides)]
    out.append(f"rows timed in every run of every side: {len(keys)}; ratios are time over {base}'s")
    head = f"{'kernel':<18}{'dtype':<10}{'shape (seqs,heads,kv,ctx,d)':<28}{base + ' us':>12}"
    head += "".join(f"{s:>12}" for s in others) + f"{'spread':>8}"
    out.append(head)
    ratios = {s: [] for s in others}
    not_ok = []
    for k in keys:
        rows = {s: list(runs[s][r][k] for r in sorted(runs[s])) for s in sides}
        bad = [f"{s} {x['status'][:60]}" for s in sides for x in rows[s] if x["status"] != "ok"]
        if bad:
            not_ok.append(f"{k[0]} {k[1]} {','.join(map(str, k[2:]))}: {bad[0]}")
            continue
        best = {s: min(x["median_us"] for x in rows[s]) for s in sides}
        spread = max(max(x["median_us"] for x in rows[s]) / best[s] for s in sides)
        line = f"{k[0]:<18}{k[1]:<10}{','.join(map(str, k[2:])):<28}{best[base]:>12.2f}"
        for s in others:
            ratios[s].append(best[s] / best[base])
            line += f"{best[s] / best[base]:>12.3f}"
        out.append(line + f"{spread:>8.3f}")
    for line in not_ok:
        out.append("not timed on every side: " + line)
    for s in others:
        r = sorted(ratios[s])
        if r:
            out.append(f"{s}/{base} over {len(r)} rows: min {r[0]:.3f}, median {r[len(r) // 2]:.3f}, max {r[-1]:.3f}")
    return out


def main(argv):
    if len(argv) < 3:
        print("usage: bench_compare_table.py WORKDIR BASE_SIDE [OTHER_SIDE...]", file=sys.stderr)
        return 2
    print("\n".join(table(argv[1], argv[2:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
