#!/usr/bin/env python3
"""scripts/device/bench_compare_table.py: known answers on synthetic pa-bench files of two
sides and two rounds (the lowest median per side, the ratio to the base, the spread of one
side's runs), rows of other layouts and caches kept apart, a round read from its parts (one
file per shape), a failed row reported, a row missing from one run left out, and its usage
errors."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "device",
                      "bench_compare_table.py")


def row(median, seqs=1, layout="vllm", kv="auto", status="ok"):
    return {"kernel": "optimized", "dtype": "fp16", "kv_dtype": kv, "layout": layout, "seqs": seqs, "heads": 32,
            "kv_heads": 8, "context": 4096, "head_size": 128, "status": status, "median_us": median}


class BenchCompareTable(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        with open(os.path.join(self.dir, "gpu.txt"), "w") as f:
            f.write("GPU 0: test\n")
        # base: 10 / 11 us; bulk: 10.5 / 10.2 us -> 10.2 / 10 = 1.020, spread max(11/10, 10.5/10.2) = 1.100.
        # seqs=8 failed in one bulk run; seqs=2 is missing from bulk.2.
        common = [row(20.0, layout="nhd"), row(30.0, kv="fp8_e4m3")]
        self.write("base.1.json", [row(10.0)] + common + [row(5.0, seqs=8), row(7.0, seqs=2)])
        self.write("base.2.json", [row(11.0)] + common + [row(5.0, seqs=8), row(7.0, seqs=2)])
        bulk = [row(19.0, layout="nhd"), row(33.0, kv="fp8_e4m3")]
        self.write("bulk.1.json", [row(10.5)] + bulk + [row(0.0, seqs=8, status="error: output differs"), row(7.0, seqs=2)])
        self.write("bulk.2.json", [row(10.2)] + bulk + [row(5.0, seqs=8)])

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, rows):
        with open(os.path.join(self.dir, name), "w") as f:
            json.dump({"gpu": "test", "rows": rows}, f)

    def table(self, *sides):
        return subprocess.run([sys.executable, SCRIPT, self.dir, *sides], capture_output=True, text=True)

    def rows_starting(self, lines, *fields):
        return [x.split()[len(fields):] for x in lines if x.split()[:len(fields)] == list(fields)]

    def test_known_answers(self):
        r = self.table("base", "bulk")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0], "GPU 0: test")
        self.assertIn("side base: 2 run(s)", lines)
        self.assertIn("side bulk: 2 run(s)", lines)
        self.assertIn("rows timed in every run of every side: 4; ratios are time over base's", lines)
        self.assertEqual(self.rows_starting(lines, "optimized", "fp16", "1,32,8,4096,128"), [["10.00", "1.020", "1.100"]])
        self.assertEqual(self.rows_starting(lines, "optimized/nhd", "fp16", "1,32,8,4096,128"),
                         [["20.00", "0.950", "1.000"]])
        self.assertEqual(self.rows_starting(lines, "optimized", "fp16+e4m3", "1,32,8,4096,128"),
                         [["30.00", "1.100", "1.000"]])
        failed = [x for x in lines if x.startswith("not timed on every side")]
        self.assertEqual(len(failed), 1)
        self.assertIn("8,32,8,4096,128", failed[0])
        self.assertIn("error: output differs", failed[0])
        self.assertEqual(lines[-1], "bulk/base over 3 rows: min 0.950, median 1.020, max 1.100")

    def test_a_round_in_parts(self):
        # bench_compare.sh's SHAPES: one file per shape and round, SIDE.ROUND.PART.json.
        self.write("parts.1.0.json", [row(9.0)])
        self.write("parts.1.1.json", [row(5.5, seqs=8)])
        self.write("parts.2.0.json", [row(9.5)])
        self.write("parts.2.1.json", [row(6.0, seqs=8)])
        r = self.table("base", "parts")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertIn("side parts: 2 run(s)", lines)
        self.assertIn("rows timed in every run of every side: 2; ratios are time over base's", lines)
        self.assertEqual(self.rows_starting(lines, "optimized", "fp16", "1,32,8,4096,128"), [["10.00", "0.900", "1.100"]])
        self.assertEqual(self.rows_starting(lines, "optimized", "fp16", "8,32,8,4096,128"), [["5.00", "1.100", "1.091"]])

    def test_usage_and_missing_base(self):
        r = self.table()
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)
        r = self.table("nothing", "bulk")
        self.assertEqual(r.returncode, 0)
        self.assertIn("no run of the base side nothing: nothing to compare", r.stdout)


if __name__ == "__main__":
    result = unittest.main(exit=False).result
    ran = result.testsRun
    if ran != 3:
        sys.exit(f"FAIL: {ran} tests ran, not 3")
    sys.exit(0 if result.wasSuccessful() else 1)
