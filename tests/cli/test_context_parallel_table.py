#!/usr/bin/env python3
"""scripts/context_parallel_table.py: known answers on two rows, its errors,
and the shipped benchmark's rows.json and table.md made again from its rows.txt,
and the README's block (between its context-parallel markers) made again from
the newest of them."""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "context_parallel_table.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import context_parallel_table as cpt  # noqa: E402

ROWS = (
    "row: gpu=NVIDIA H200 dtype=fp16 seqs=1 heads=32 kv_heads=8 context=1048576 policy=contiguous devices=2 "
    "exchange=all_gather groups=2 ms=0.5393 one_ms=1.0201 speedup=1.891 exchange_ms=0.0114 merge_ms=0.0062 pct_min=96.9 "
    "pct_max=97.6 exchange_kb=16.5 pass=1\n"
    "row: gpu=NVIDIA H200 dtype=fp16 seqs=1 heads=32 kv_heads=8 context=1048576 policy=contiguous devices=1 "
    "exchange=sums ms=1.0400 one_ms=1.0201 speedup=0.981 exchange_ms=0.0080 merge_ms=0.0055 pct_min=98.8 "
    "pct_max=98.8 exchange_kb=0.0 pass=0\n")

checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        sys.exit("FAIL: " + what)


def run(args):
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    rows_path, json_path = os.path.join(d, "rows.txt"), os.path.join(d, "rows.json")
    with open(rows_path, "w") as f:
        f.write(ROWS)
    r = run([rows_path, "--json", json_path])
    check(r.returncode == 0, "exit 0, got %d: %s" % (r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    check(len(lines) == 4, "header, rule and two rows: %r" % lines)
    # Sorted by GPU count: the one-GPU row first.
    check(lines[2] == "| 1 x NVIDIA H200 | 1, 32, 8, 1048576 | fp16 | sums | 1 | 1.040 ms | 1.020 ms | 0.98x | "
          "98.8% | 8.0 us (0.8%) | FAIL |", lines[2])
    check(lines[3] == "| 2 x NVIDIA H200 | 1, 32, 8, 1048576 | fp16 | all_gather | 2 | 0.539 ms | 1.020 ms | 1.89x | "
          "96.9-97.6% | 11.4 us (2.1%) | pass |", lines[3])
    data = json.load(open(json_path))
    check(len(data["rows"]) == 2, "two JSON rows")
    first = data["rows"][0]
    check(first["gpu"] == "NVIDIA H200" and first["devices"] == 2, "the GPU name keeps its space")
    check(first["groups"] == 2 and data["rows"][1]["groups"] == 1, "groups, 1 where a row has none")
    check(first["total_ms"] == 0.5393, "ms renamed to total_ms")
    check(first["min_copy_pct"] == 96.9 and first["max_copy_pct"] == 97.6, "pct_min/max renamed to *_copy_pct")
    check(first["exchange_share_pct"] == 2.1, "share 100 * 0.0114 / 0.5393 = 2.1")
    check('"one_ms": 1.0201' in open(json_path).read(), "numbers keep pa-lab's digits")

    # Errors: a row without a field, and a file without rows.
    with open(rows_path, "w") as f:
        f.write(ROWS.replace(" pass=1", ""))
    try:
        cpt.parse_row(ROWS.splitlines()[0].replace(" pass=1", ""))
        check(False, "a row without pass= is refused")
    except ValueError as e:
        check("pass" in str(e), "the error names the missing field: %s" % e)
    with open(rows_path, "w") as f:
        f.write("\n")
    r = run([rows_path])
    check(r.returncode == 1 and "no row lines" in r.stderr, "an empty file: exit 1, 'no row lines'")
    r = run([rows_path, "--json"])
    check(r.returncode == 2 and "--json needs a file name" in r.stderr, "--json without a name: exit 2")

# The shipped results: rows.json and table.md are what the script makes of rows.txt.
shipped = sorted(glob.glob(os.path.join(ROOT, "trace", "results", "*", "context_parallel_*", "rows.txt")))
check(len(shipped) >= 1, "at least one shipped context-parallel benchmark")
for rows_txt in shipped:
    folder = os.path.dirname(rows_txt)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rows.json")
        r = run([rows_txt, "--json", out])
        check(r.returncode == 0, "shipped %s: exit 0" % rows_txt)
        check(open(out).read() == open(os.path.join(folder, "rows.json")).read(), "%s/rows.json is current" % folder)
        check(r.stdout == open(os.path.join(folder, "table.md")).read(), "%s/table.md is current" % folder)

# The README's table: the block the script writes from the shipped rows.txt its "raw data:" names.
readme = open(os.path.join(ROOT, "README.md")).read()
check(cpt.BEGIN in readme and cpt.END in readme, "README has the context-parallel markers")
block = readme[readme.find(cpt.BEGIN):readme.find(cpt.END)]
named = [r for r in shipped if "raw data: `%s/`" % os.path.relpath(os.path.dirname(r), ROOT) in block]
check(len(named) == 1, "the README's block names exactly one shipped benchmark folder: %r" % named)
with open(named[0]) as f:
    rows = [cpt.parse_row(l.strip()) for l in f if l.strip()]
check(cpt.replace_block(readme, cpt.readme_block(rows, named[0])) == readme,
      "README's context-parallel block is what the script writes (run it with --readme README.md)")

with tempfile.TemporaryDirectory() as d:
    no_markers = os.path.join(d, "README.md")
    with open(no_markers, "w") as f:
        f.write("# no markers\n")
    r = run([shipped[0], "--readme", no_markers])
    check(r.returncode == 1 and "context-parallel:begin" in r.stderr, "a README without markers: exit 1, named")
    check(open(no_markers).read() == "# no markers\n", "... and left as it was")

print("context_parallel_table.py: %d checks passed" % checks)
