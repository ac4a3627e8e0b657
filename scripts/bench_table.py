#!/usr/bin/env python3
"""Turn a pa-bench JSON file into the README results table.

Usage: scripts/bench_table.py assets/bench/<gpu>.json [--cascade assets/bench/<run>.json]
                             [--readme README.md] [--print]

--cascade: take the cascade section (rows with a shared prefix, and the
speedup) from another run's JSON (pa-bench --cascade-only), named with its
own GPU and copy bandwidth, instead of the main file's.

Replaces the text between <!-- results:begin --> and <!-- results:end --> in
the README (nothing else), or prints the table with --print. The numbers are
copied from the JSON, never typed: time (median of the CUDA-event timings),
GB/s of KV read and that as % of the device-to-device copy bandwidth measured
in the same run (bytes read + written per second).
"""
import argparse
import json
import pathlib
import re
import sys

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
KERNELS = ["v1", "v2", "optimized", "cascade"]


def fmt_us(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def cell(row):
    if row is None:
        return "—"
    st = row["status"]
    if st != "ok":
        if st.startswith("missing"):
            return "missing"
        if "not available" in st or "no instance" in st or ": configuration" in st:
            return "not built"
        return "n/a"
    return f"{fmt_us(row['median_us'])}<br>{row['gbps']:.0f} GB/s ({row['pct_copy']:.0f}%)"


def table(data, src, cdata=None, csrc=None):
    rows = data["rows"]
    out = []
    out.append(
        f"Measured on **{data['gpu']}** ({data['sm_count']} SMs) by `pa-bench`; raw data: `{src}`. "
        f"Device-to-device copy bandwidth in the same run: **{data['copy_gbps']:.0f} GB/s** "
        f"(read + write). Each cell: median of {data['iters']} CUDA-event timings after "
        + (f"at least {data['warmup']} warm-up launches and {data['warmup_ms']:g} ms of them"
           if "warmup_ms" in data else f"{data['warmup']} warm-up launches")
        + f", KV rotated over a {data['pool_gb']:g} GB pool; GB/s of K+V read "
        f"and that as % of the copy bandwidth. Block size 16. "
        f"\"n/a\": the kernel refused the shape (v1 at 131072 tokens: its shared-memory logits do not fit); "
        f"\"not built\": the configuration is not instantiated in the quick build this run used; "
        f"\"missing\": the kernel is not in this build. The JSON holds each status."
    )
    out.append("")
    out.append("| seqs | heads | kv heads | context | head | dtype | KV MB | " + " | ".join(KERNELS[:3]) + " |")
    out.append("|---:|---:|---:|---:|---:|---|---:|" + "---|" * 3)
    keys = []
    for r in rows:
        if r["prefix"]:
            continue
        k = (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"], r["dtype"])
        if k not in keys:
            keys.append(k)
    for k in keys:
        by = {r["kernel"]: r for r in rows if not r["prefix"] and
              (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"], r["dtype"]) == k}
        kvmb = next(iter(by.values()))["kv_bytes"] / 1e6
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {k[5]} | {kvmb:.0f} | "
                   + " | ".join(cell(by.get(n)) for n in KERNELS[:3]) + " |")
    cd = cdata if cdata is not None else data
    casc = [r for r in cd["rows"] if r["prefix"]]
    if casc:
        out.append("")
        r0 = casc[0]
        origin = ""
        if cdata is not None:
            origin = (f" Measured in a separate run on **{cd['gpu']}** (raw data: `{csrc}`, copy bandwidth "
                      f"{cd['copy_gbps']:.0f} GB/s in that run, median of {cd['iters']} timings); every kernel "
                      f"in this table ran in that run.")
        out.append(
            f"Cascade: {r0['seqs']} sequences sharing a {r0['prefix']}-token prefix, "
            f"{r0['context'] - r0['prefix']} unique tokens each, {r0['heads']} heads (MHA), head size "
            f"{r0['head_size']}; the same block tables (prefix blocks shared) for every kernel. "
            f"GB/s counts each kernel's logical KV reads (cascade: the prefix once).{origin}"
        )
        out.append("")
        out.append("| dtype | " + " | ".join(KERNELS) + " | cascade speedup vs best other |")
        out.append("|---|" + "---|" * (len(KERNELS) + 1))
        for dt in sorted({r["dtype"] for r in casc}, key=lambda d: d != "fp16"):
            by = {r["kernel"]: r for r in casc if r["dtype"] == dt}
            sp = next((c for c in cd.get("cascade", []) if c["dtype"] == dt), None)
            sptxt = f"{sp['speedup']:.1f}x (vs {sp['best_non_cascade']})" if sp else "—"
            out.append(f"| {dt} | " + " | ".join(cell(by.get(n)) for n in KERNELS) + f" | {sptxt} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--readme", default=None)
    ap.add_argument("--cascade", default=None)
    ap.add_argument("--print", action="store_true")
    a = ap.parse_args()
    path = pathlib.Path(a.json)
    data = json.loads(path.read_text())
    root = pathlib.Path(__file__).resolve().parent.parent
    readme = pathlib.Path(a.readme) if a.readme else root / "README.md"
    try:
        src = path.resolve().relative_to(root)
    except ValueError:
        src = path
    cdata, csrc = None, None
    if a.cascade:
        cpath = pathlib.Path(a.cascade)
        cdata = json.loads(cpath.read_text())
        try:
            csrc = cpath.resolve().relative_to(root)
        except ValueError:
            csrc = cpath
    t = table(data, src, cdata, csrc)
    if a.print:
        print(t)
        return 0
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        print(f"bench_table.py: {readme} has no {BEGIN} ... {END} markers", file=sys.stderr)
        return 1
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda m: f"{BEGIN}\n{t}\n{END}", text, count=1,
                 flags=re.S)
    readme.write_text(new)
    print(f"bench_table.py: wrote the results table into {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
