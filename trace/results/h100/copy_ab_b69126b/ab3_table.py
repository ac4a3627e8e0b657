# The A/B table: each row's lowest median of its runs per side, as % of the copy and as time over the base's.
import json, os, sys
w = sys.argv[1]
def load(run):
    p = os.path.join(w, run + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
arms = ["base", "nohint", "bulk", "noswz"]
runs = {f"{a}.{i}": load(f"{a}.{i}") for a in arms for i in (1, 2, 3)}
ok = {k: v for k, v in runs.items() if v}
print("runs:", " ".join(f"{k}(copy {v['copy_gbps']:.0f})" for k, v in ok.items()))
def key(r): return (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"])
table = {}
for k, d in ok.items():
    for r in d["rows"]:
        if r["status"] == "ok":
            table.setdefault(key(r), {})[k] = r
print(f"{'shape':<22}" + "".join(f"{a+' %':>10}" for a in arms) + f"{'nohint/b':>8}{'bulk/b':>8}{'noswz/b':>8}{'b1/b2':>7}{'k1/k2':>7}"
      + f"{'read%':>7}{'bulkrd%':>8}")
for s, rs in table.items():
    def best(a):
        xs = [rs[f"{a}.{i}"] for i in (1, 2, 3) if f"{a}.{i}" in rs]
        return min(xs, key=lambda r: r["median_us"]) if xs else None
    b = {a: best(a) for a in arms}
    line = f"{','.join(map(str, s)):<22}" + "".join(f"{b[a]['pct_copy']:>10.1f}" if b[a] else f"{'-':>10}" for a in arms)
    for a in ("nohint", "bulk", "noswz"):
        line += f"{b[a]['median_us'] / b['base']['median_us']:>8.3f}" if b[a] and b["base"] else f"{'-':>8}"
    for a in ("base", "bulk"):
        if f"{a}.1" in rs and f"{a}.2" in rs:
            line += f"{rs[a + '.1']['median_us'] / rs[a + '.2']['median_us']:>7.3f}"
        else:
            line += "      -"
    r = b["base"]
    if r and r.get("paged_read_us"):
        gb = r["kv_bytes"] / 1e3
        cp = ok[next(k for k in ok if k.startswith("base"))]["copy_gbps"]
        line += f"{gb / r['paged_read_us'] / cp * 100:>7.1f}{gb / r['paged_bulk_us'] / cp * 100:>8.1f}"
    print(line)
for a in ("bulk",):
    d = load(f"{a}.nhd")
    if d:
        for r in d["rows"]:
            print(f"nhd {a} {r['layout']} {','.join(map(str, key(r)))} {r['status'][:40]} pct {r.get('pct_copy', 0):.1f} "
                  f"xcheck {r.get('xcheck_max_abs_vs_optimized')}")
