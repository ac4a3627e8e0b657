"""scripts/timeline_summary.py: the figures of a hand-made timeline with known
answers, and the shipped summary (assets/timelines/<gpu>/summary.json, which
the lessons cite) made again from the shipped .patl files through pa-lab's
own export, equal to the committed file.

Usage: test_timeline_summary.py PA_LAB"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "timeline_summary.py")
PA_LAB = None


def span(name, kernel, ts, dur, block=0, warp=0, pid=1):
    return {"name": name, "cat": "cascade_merge," + kernel, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": 1,
            "args": {"block": block, "warp": warp, "iter": -1, "cycles": 1}}


# Two kernels, three warps, times in microseconds from 10.0: warp (main, 0, 0)
# ends at 12.0, (main, 0, 1) at 14.0, (reduce, 0, 0) at 20.0. Warp (main, 0, 1)
# ran on SM 5 (process 2), the others on SM 0.
FIXTURE = {
    "displayTimeUnit": "ns",
    "otherData": {"source": "test GPU", "stage": "cascade_merge", "revision": "abc1234", "problem": "p",
                  "launch": "l", "untimed_ns": 8000, "timed_ns": 10000},
    "traceEvents": [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 1, "args": {"name": "SM 0"}},
        {"name": "process_name", "ph": "M", "ts": 0, "pid": 2, "tid": 9, "args": {"name": "SM 5"}},
        span("qk", "main", 10.0, 1.0),
        span("lv", "main", 11.0, 1.0),
        span("qk", "main", 10.5, 3.5, warp=1, pid=2),
        span("merge", "reduce", 18.0, 2.0),
    ],
}


def summarise(*files):
    out = os.path.join(tempfile.mkdtemp(), "summary.json")
    r = subprocess.run([sys.executable, SCRIPT, out, *files], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    with open(out) as f:
        return json.load(f)


class Fixture(unittest.TestCase):
    def test_known_answers(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "fix.json")
        with open(path, "w") as f:
            json.dump(FIXTURE, f)
        s = summarise(path)
        (t,) = s["timelines"]
        self.assertEqual(t["file"], "fix")
        self.assertEqual((t["spans"], t["warps"]), (4, 3))
        self.assertEqual((t["untimed_us"], t["timed_us"], t["overhead_pct"]), (8.0, 10.0, 25.0))
        self.assertEqual(t["window_us"], 10.0)  # 10.0 .. 20.0
        self.assertEqual((t["first_warp_end_us"], t["median_warp_end_us"], t["last_warp_end_us"]), (2.0, 4.0, 10.0))
        # SM 0 ran block 0 of both kernels (10.0 .. 20.0), SM 5 block 0 of main (10.5 .. 14.0).
        self.assertEqual(s["sms"], [{"file": "fix", "sm": 0, "blocks": 2, "first_start_us": 0.0, "last_end_us": 10.0},
                                    {"file": "fix", "sm": 5, "blocks": 1, "first_start_us": 0.5, "last_end_us": 4.0}])
        self.assertEqual((t["sms"], t["first_sm_end_us"], t["median_sm_end_us"], t["last_sm_end_us"]),
                         (2, 4.0, 10.0, 10.0))
        kernels = {k["kernel"]: (k["first_start_us"], k["last_end_us"]) for k in s["kernels"]}
        self.assertEqual(kernels, {"main": (0.0, 4.0), "reduce": (8.0, 10.0)})
        phases = {(p["kernel"], p["phase"]): (p["spans"], p["mean_us"], p["share_pct"]) for p in s["phases"]}
        # 7.5 us of spans in all: qk 4.5 (60%), merge 2.0, lv 1.0.
        self.assertEqual(phases, {("main", "qk"): (2, 2.25, 60.0), ("reduce", "merge"): (1, 2.0, 26.7),
                                  ("main", "lv"): (1, 1.0, 13.3)})
        self.assertEqual([p["phase"] for p in s["phases"]], ["qk", "merge", "lv"])  # largest share first

    def test_no_spans_is_an_error(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "empty.json")
        with open(path, "w") as f:
            json.dump(dict(FIXTURE, traceEvents=FIXTURE["traceEvents"][:1]), f)
        r = subprocess.run([sys.executable, SCRIPT, os.path.join(d, "s.json"), path], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no spans", r.stdout + r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "s.json")))  # nothing written


class Shipped(unittest.TestCase):
    def test_summary_is_made_from_the_shipped_files(self):
        folders = sorted(glob.glob(os.path.join(ROOT, "assets", "timelines", "*", "summary.json")))
        self.assertGreaterEqual(len(folders), 1)
        checked = 0
        for summary in folders:
            with open(summary) as f:
                shipped = json.load(f)
            folder = os.path.dirname(summary)
            tmp = tempfile.mkdtemp()
            exports = []
            for t in shipped["timelines"]:  # in the summary's order
                patl = os.path.join(folder, t["file"] + ".patl")
                out = os.path.join(tmp, t["file"] + ".json")
                r = subprocess.run([PA_LAB, "timeline", "--from", patl, "-o", out], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                exports.append(out)
            # every .patl of the folder is summarised
            self.assertEqual(sorted(os.path.basename(e)[:-5] for e in exports),
                             sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(folder, "*.patl"))))
            self.assertEqual(summarise(*exports), shipped, summary)
            checked += len(exports)
        self.assertGreaterEqual(checked, 5)


if __name__ == "__main__":
    PA_LAB = sys.argv.pop(1)
    unittest.main()
