#!/usr/bin/env python3
"""Summarise timelines (their Perfetto JSON exports) into one JSON file that
the lessons cite figures from.

Usage: scripts/timeline_summary.py OUT.json FILE.json...
       (FILE.json from `pa-lab timeline --from FILE.patl -o FILE.json`)

The figures are computed from the spans, never typed: per timeline, the
launch's time without and with the timing tracer (CUDA events) and the
tracer's overhead; the window from the first span's start to the last span's
end; when the warps finished (the earliest, the middle one in order of
finishing, i.e. the upper median, and the last warp's last span); per kernel
of the launch (stage 6's reduce, for example) its first start and last end; per SM
(the export's process "SM n") the blocks that ran on it, its first span's start
and its last span's end, and per timeline when the SMs finished (the first, the
upper median and the last SM). Per phase: the spans, their mean duration and the share of
all warp-time it takes. Times are microseconds from the first span's start.
The output is written to a temporary file beside OUT, then renamed.
"""
import collections
import json
import os
import pathlib
import statistics
import sys
import tempfile


def r3(x):
    return round(x, 3)


def summarise(path):
    with open(path) as f:
        d = json.load(f)
    meta = d["otherData"]
    spans = [e for e in d["traceEvents"] if e.get("ph") == "X"]
    if not spans:
        raise SystemExit(f"{path}: no spans")
    t0 = min(e["ts"] for e in spans)
    warps = collections.defaultdict(list)
    for e in spans:
        warps[(e["cat"], e["args"]["block"], e["args"]["warp"])].append(e)
    ends = sorted(max(x["ts"] + x["dur"] for x in v) - t0 for v in warps.values())
    name = pathlib.Path(path).stem
    sm_of_pid = {e["pid"]: int(e["args"]["name"].split()[-1]) for e in d["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    by_sm = collections.defaultdict(list)
    for e in spans:
        by_sm[sm_of_pid[e["pid"]]].append(e)
    sms = [{"file": name, "sm": sm, "blocks": len({(x["cat"], x["args"]["block"]) for x in v}),
            "first_start_us": r3(min(x["ts"] for x in v) - t0),
            "last_end_us": r3(max(x["ts"] + x["dur"] for x in v) - t0)}
           for sm, v in sorted(by_sm.items())]
    sm_ends = sorted(x["last_end_us"] for x in sms)
    untimed, timed = meta["untimed_ns"] / 1e3, meta["timed_ns"] / 1e3
    t = {
        "file": name,
        "stage": meta["stage"],
        "source": meta["source"],
        "revision": meta["revision"],
        "problem": meta["problem"],
        "launch": meta["launch"],
        "spans": len(spans),
        "warps": len(warps),
        "untimed_us": r3(untimed),
        "timed_us": r3(timed),
        "overhead_pct": round(100.0 * (timed / untimed - 1.0), 1),
        "window_us": r3(max(e["ts"] + e["dur"] for e in spans) - t0),
        "first_warp_end_us": r3(ends[0]),
        "median_warp_end_us": r3(ends[len(ends) // 2]),
        "last_warp_end_us": r3(ends[-1]),
        "sms": len(sms),
        "first_sm_end_us": sm_ends[0],
        "median_sm_end_us": sm_ends[len(sm_ends) // 2],
        "last_sm_end_us": sm_ends[-1],
    }
    kernels = []
    for cat in sorted({e["cat"] for e in spans}):
        ks = [e for e in spans if e["cat"] == cat]
        kernels.append({"file": name, "kernel": cat.split(",")[-1],
                        "first_start_us": r3(min(e["ts"] for e in ks) - t0),
                        "last_end_us": r3(max(e["ts"] + e["dur"] for e in ks) - t0)})
    by_phase = collections.defaultdict(list)
    for e in spans:
        by_phase[(e["cat"].split(",")[-1], e["name"])].append(e["dur"])
    total = sum(sum(v) for v in by_phase.values())
    phases = [{"file": name, "kernel": k, "phase": p, "spans": len(v), "mean_us": r3(statistics.mean(v)),
               "share_pct": round(100.0 * sum(v) / total, 1)}
              for (k, p), v in sorted(by_phase.items(), key=lambda kv: -sum(kv[1]))]
    return t, kernels, phases, sms


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(argv[1])
    res = {"note": "made by scripts/timeline_summary.py from the Perfetto exports of the .patl files beside it; "
                   "times in microseconds from the first span's start; mean_us from %globaltimer (32 ns steps "
                   "on the GPUs measured)",
           "timelines": [], "kernels": [], "phases": [], "sms": []}
    for p in argv[2:]:
        t, k, ph, sm = summarise(p)
        res["timelines"].append(t)
        res["kernels"] += k
        res["phases"] += ph
        res["sms"] += sm
    fd, tmp = tempfile.mkstemp(dir=out.parent if str(out.parent) else ".", prefix=out.name + ".")
    with os.fdopen(fd, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes it private; the summary is shipped
    os.replace(tmp, out)
    print(f"wrote {out}: {len(res['timelines'])} timelines, {len(res['phases'])} phases")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
