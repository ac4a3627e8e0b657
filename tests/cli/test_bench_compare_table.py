#!/usr/bin/env python3
"""scripts/device/bench_compare_table.py: known answers on synthetic pa-bench files of two
sides and two rounds (the lowest median per side, the ratio to the base, the spread of one
side's runs), rows of other layouts and caches kept apart, a failed row reported, a row
missing from one run left out, and its usage errors."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "device", "bench_compare_table.py")
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        sys.exit("FAIL: " + what)


def row(median, seqs=1, layout="vllm", kv="auto", status="ok"):
    return {"kernel": "optimized", "dtype": "fp16", "kv_dtype": kv, "layout": layout, "seqs": seqs, "heads": 32,
            "kv_heads": 8, "context": 4096, "head_size": 128, "status": status, "median_us": median}


def write(d, name, rows):
    with open(os.path.join(d, name), "w") as f:
        json.dump({"gpu": "test", "rows": rows}, f)


def run(args):
    return subprocess.run([sys.executable, SCRIPT] + args, capture_output=True, text=True)


with tempfile.TemporaryDirectory() as d:
    with open(os.path.join(d, "gpu.txt"), "w") as f:
        f.write("GPU 0: test\n")
    # base: 10 / 11 us; bulk: 10.5 / 10.2 us -> 10.2 / 10 = 1.020, spread max(11/10, 10.5/10.2) = 1.100.
    write(d, "base.1.json", [row(10.0), row(20.0, layout="nhd"), row(30.0, kv="fp8_e4m3"), row(5.0, seqs=8),
                             row(7.0, seqs=2)])
    write(d, "base.2.json", [row(11.0), row(20.0, layout="nhd"), row(30.0, kv="fp8_e4m3"), row(5.0, seqs=8),
                             row(7.0, seqs=2)])
    write(d, "bulk.1.json", [row(10.5), row(19.0, layout="nhd"), row(33.0, kv="fp8_e4m3"),
                             row(0.0, seqs=8, status="error: output differs"), row(7.0, seqs=2)])
    write(d, "bulk.2.json", [row(10.2), row(19.0, layout="nhd"), row(33.0, kv="fp8_e4m3"), row(5.0, seqs=8)])
    r = run([d, "base", "bulk"])
    check(r.returncode == 0, "exit 0: " + r.stderr)
    lines = r.stdout.splitlines()
    check(lines[0] == "GPU 0: test", "the GPU line first")
    check("side base: 2 run(s)" in lines and "side bulk: 2 run(s)" in lines, "each side's runs counted")
    check(any("rows timed in every run of every side: 4" in x for x in lines),
          "four rows in all runs (seqs=2 is missing from bulk.2): " + r.stdout)
    vllm = [x for x in lines if x.split()[:3] == ["optimized", "fp16", "1,32,8,4096,128"]]
    check(len(vllm) == 1 and vllm[0].split()[3:] == ["10.00", "1.020", "1.100"], "the vllm row: " + repr(vllm))
    nhd = [x for x in lines if x.startswith("optimized/nhd")]
    check(len(nhd) == 1 and nhd[0].split()[3:] == ["20.00", "0.950", "1.000"], "the nhd row apart: " + repr(nhd))
    fp8 = [x for x in lines if x.split()[:2] == ["optimized", "fp16+e4m3"]]
    check(len(fp8) == 1 and fp8[0].split()[4] == "1.100", "the fp8 cache's row apart: " + repr(fp8))
    bad = [x for x in lines if x.startswith("not timed on every side")]
    check(len(bad) == 1 and "8,32,8,4096,128" in bad[0] and "error: output differs" in bad[0],
          "the failed row reported with its status: " + repr(bad))
    check("bulk/base over 3 rows: min 0.950, median 1.020, max 1.100" in lines, "the summary: " + r.stdout)
    r = run([d])
    check(r.returncode == 2 and "usage" in r.stderr, "no side: usage, exit 2")
    r = run([d, "nothing", "bulk"])
    check(r.returncode == 0 and "no run of the base side nothing" in r.stdout, "a base without runs said so")
if checks != 11:
    sys.exit(f"FAIL: {checks} checks ran, not 11")
print(f"{checks} checks passed")
