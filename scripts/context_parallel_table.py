#!/usr/bin/env python3
"""The context-parallel benchmark table (Markdown) from `pa-lab run --devices`'s
"row:" lines (scripts/device/context_parallel.sh collects them).

Each row: one problem, one GPU count, one exchange. Columns: the time over N
GPUs and the speedup over stage 8 on one GPU over the whole problem (both
medians of the same run), each GPU's decode bandwidth as a share of its own
copy bandwidth (the lowest and highest GPU), and the exchange's time and share.

    python3 scripts/context_parallel_table.py rows.txt > table.md
"""
import sys

KEYS = ("gpu", "dtype", "seqs", "heads", "kv_heads", "context", "policy", "devices", "exchange", "ms", "one_ms",
        "speedup", "exchange_ms", "merge_ms", "pct_min", "pct_max", "exchange_kb", "pass")


def parse_row(line):
    """One 'row: k=v k=v ...' line as a dict; the GPU name may hold spaces."""
    if not line.startswith("row:"):
        raise ValueError("not a row line: %r" % line[:40])
    body = line[len("row:"):].strip()
    out, key = {}, None
    for word in body.split(" "):
        if "=" in word and word.split("=", 1)[0] in KEYS:
            key, value = word.split("=", 1)
            out[key] = value
        elif key is not None:
            out[key] += " " + word  # a value with spaces (the GPU's name)
    missing = [k for k in KEYS if k not in out]
    if missing:
        raise ValueError("row without %s: %r" % (", ".join(missing), line[:80]))
    return out


def table(rows):
    rows = sorted(rows, key=lambda r: (r["gpu"], int(r["seqs"]), r["dtype"], int(r["devices"]), r["exchange"]))
    lines = ["| GPUs | shape (seqs, heads, kv heads, context) | dtype | exchange | time | one GPU | speedup | "
             "decode % of copy (per GPU) | exchange (share) | checks |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms, ex = float(r["ms"]), float(r["exchange_ms"])
        pct = r["pct_min"] if r["pct_min"] == r["pct_max"] else "%s-%s" % (r["pct_min"], r["pct_max"])
        lines.append("| %s x %s | %s, %s, %s, %s | %s | %s | %.3f ms | %.3f ms | %.2fx | %s%% | %.1f us (%.1f%%) | %s |" % (
            r["devices"], r["gpu"], r["seqs"], r["heads"], r["kv_heads"], r["context"], r["dtype"], r["exchange"],
            ms, float(r["one_ms"]), float(r["speedup"]), pct, ex * 1000, 100 * ex / ms,
            "pass" if r["pass"] == "1" else "FAIL"))
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: context_parallel_table.py ROWS_FILE\n")
        return 2
    with open(argv[1]) as f:
        rows = [parse_row(l.strip()) for l in f if l.strip()]
    if not rows:
        sys.stderr.write("context_parallel_table.py: %s has no row lines\n" % argv[1])
        return 1
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
