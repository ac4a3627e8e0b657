#!/usr/bin/env python3
"""The context-parallel benchmark table (Markdown) from `pa-lab run --devices`'s
"row:" lines (scripts/device/context_parallel.sh collects them).

Each row: one problem, one GPU count, one exchange. Columns: the time over N
GPUs and the speedup over stage 8 on one GPU over the whole problem (both
medians of the same run), each GPU's decode bandwidth as a share of its own
copy bandwidth (the lowest and highest GPU), and the exchange's time and share.

    python3 scripts/context_parallel_table.py rows.txt [--json rows.json] [--readme README.md] > table.md

With --json it also writes the rows as JSON ({"rows": [...]}, numbers as pa-lab
printed them, plus exchange_share_pct), the form lessons cite figures from
(lessons/README.md, "Measured figures"). With --readme it rewrites the text
between README.md's markers <!-- context-parallel:begin --> and
<!-- context-parallel:end --> with a line naming the data and the table.
Every file is written whole, then renamed over the old one.
"""
import json
import os
import sys

KEYS = ("gpu", "dtype", "seqs", "heads", "kv_heads", "context", "policy", "devices", "exchange", "groups", "ms",
        "one_ms", "speedup", "exchange_ms", "merge_ms", "pct_min", "pct_max", "exchange_kb", "pass")
# Fields that rows written before they existed lack, and their value there.
DEFAULTS = {"groups": "1"}


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
    for k, v in DEFAULTS.items():
        out.setdefault(k, v)
    missing = [k for k in KEYS if k not in out]
    if missing:
        raise ValueError("row without %s: %r" % (", ".join(missing), line[:80]))
    return out


def table(rows):
    rows = sorted(rows, key=lambda r: (r["gpu"], int(r["seqs"]), r["dtype"], int(r["devices"]), r["exchange"],
                                       int(r["groups"])))
    lines = ["| GPUs | shape (seqs, heads, kv heads, context) | dtype | exchange | sequence groups | time | one GPU | "
             "speedup | decode % of copy (per GPU) | exchange after the last decode (share) | checks |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms, ex = float(r["ms"]), float(r["exchange_ms"])
        pct = r["pct_min"] if r["pct_min"] == r["pct_max"] else "%s-%s" % (r["pct_min"], r["pct_max"])
        lines.append("| %s x %s | %s, %s, %s, %s | %s | %s | %s | %.3f ms | %.3f ms | %.2fx | %s%% | %.1f us (%.1f%%) "
                     "| %s |" % (
            r["devices"], r["gpu"], r["seqs"], r["heads"], r["kv_heads"], r["context"], r["dtype"], r["exchange"],
            r["groups"], ms, float(r["one_ms"]), float(r["speedup"]), pct, ex * 1000, 100 * ex / ms,
            "pass" if r["pass"] == "1" else "FAIL"))
    return "\n".join(lines) + "\n"


# JSON field names: the ones pa-lab prints, but named so that the lesson
# figure test knows their units (a time ends in _ms, a percent in _pct).
RENAMED = {"ms": "total_ms", "pct_min": "min_copy_pct", "pct_max": "max_copy_pct"}
NUMERIC = ("seqs", "heads", "kv_heads", "context", "devices", "groups", "ms", "one_ms", "speedup", "exchange_ms", "merge_ms",
           "pct_min", "pct_max", "exchange_kb", "pass")


def number_text(key, v):
    """A numeric field as pa-lab printed it (trailing zeros are digits a figure may quote)."""
    float(v)  # raises ValueError for anything that is not a number
    return v


def as_json(rows):
    """The rows as JSON text; numbers keep pa-lab's digits."""
    items = []
    for r in rows:
        fields = []
        for k in KEYS:
            v = number_text(k, r[k]) if k in NUMERIC else json.dumps(r[k])
            fields.append("  %s: %s" % (json.dumps(RENAMED.get(k, k)), v))
        share = 100 * float(r["exchange_ms"]) / float(r["ms"])
        fields.append('  "exchange_share_pct": %.1f' % share)
        items.append(" {\n" + ",\n".join(fields) + "\n }")
    return '{"rows": [\n' + ",\n".join(items) + "\n]}\n"


def write_whole(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


BEGIN, END = "<!-- context-parallel:begin -->", "<!-- context-parallel:end -->"


def readme_block(rows, rows_path):
    """What goes between the README's markers: the source of the data, then the table."""
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    folder = os.path.relpath(os.path.dirname(os.path.abspath(rows_path)), root)
    gpus = sorted({r["gpu"] for r in rows})
    most = max(int(r["devices"]) for r in rows)
    return ("Measured on up to %d %s GPUs of one host by `scripts/device/context_parallel.sh`; raw data: "
            "`%s/` (`rows.json`, and each run's log). Times are medians of %s; \"one GPU\" is stage 8 over the "
            "whole problem on GPU 0 in the same run.\n\n" % (most, " / ".join(gpus), folder,
                                                              "CUDA-event timings, every GPU released together")
            + table(rows))


def replace_block(text, block):
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        raise ValueError("README has no %s ... %s pair" % (BEGIN, END))
    return text[:b + len(BEGIN)] + "\n" + block + text[e:]


def take_option(args, name):
    """The value after --name (removed from args), None when absent; ValueError when it has none."""
    if name not in args:
        return None
    i = args.index(name)
    if i + 1 >= len(args):
        raise ValueError("%s needs a file name" % name)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def main(argv):
    args = argv[1:]
    try:
        json_out = take_option(args, "--json")
        readme = take_option(args, "--readme")
    except ValueError as e:
        sys.stderr.write("context_parallel_table.py: %s\n" % e)
        return 2
    if len(args) != 1:
        sys.stderr.write("usage: context_parallel_table.py ROWS_FILE [--json OUT.json] [--readme README.md]\n")
        return 2
    with open(args[0]) as f:
        rows = [parse_row(l.strip()) for l in f if l.strip()]
    if not rows:
        sys.stderr.write("context_parallel_table.py: %s has no row lines\n" % args[0])
        return 1
    if json_out:
        write_whole(json_out, as_json(rows))
    if readme:
        with open(readme) as f:
            text = f.read()
        try:
            write_whole(readme, replace_block(text, readme_block(rows, args[0])))
        except ValueError as e:
            sys.stderr.write("context_parallel_table.py: %s: %s\n" % (readme, e))
            return 1
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
