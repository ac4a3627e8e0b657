#!/usr/bin/env python3
"""The README's "last GPU check" paragraph, generated from the summary
files scripts/gpu-check.sh writes (OUT/gpu-check/summary.txt), never typed.

  gpu_check_readme.py --commit REV [--readme README.md] SUMMARY [SUMMARY...]

Several summaries (say a build-only call, then a --no-build call with the
tests and the sanitizers) are read together: the GPU and date of the last
one, every step of each. The paragraph replaces what stands between the
README's markers <!-- gpu-check:begin --> and <!-- gpu-check:end --> (written
to README.md.tmp, then renamed over it); without --readme it is printed. Exit status 2
with a message for a summary that is missing or not gpu-check's, or a README
without the markers."""
import argparse
import os
import re
import sys

BEGIN, END = "<!-- gpu-check:begin -->", "<!-- gpu-check:end -->"
# gpu-check.sh pads a step's name to 40 columns and then one space, so a name of
# 40 or more characters ("tests (all tests (no test is labelled gpu))") is followed
# by a single space: one or more.
STEP_RE = re.compile(r"^(build|tests \(.*?\)|sanitizers)\s+(\S.*)$")
HEAD_RE = re.compile(r"^gpu-check summary \((\S+), (.*)\)$")
# gpu-check.sh's ALL_STAGES: a summary's table with fewer rows ran fewer.
ALL_STAGES = ("q_to_smem", "qk", "softmax", "lv", "warp_reduce", "v2_partition", "cascade_merge", "optimized")
# gpu-check.sh's ALL_TOOLS: the header of a summary's table names those that ran.
SANITIZER_TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
CELL_RE = re.compile(r"^([\w@-]+)\s+((?:(?:PASS|FAIL|ERROR) \d+/\d+|-)\s*)+$")


class SummaryError(Exception):
    pass


def parse_summary(text, name):
    """{'date', 'gpu', 'steps': [(step, result)], 'configs', 'cells': {stage: [cells]}}"""
    lines = text.splitlines()
    head = next((HEAD_RE.match(l) for l in lines if HEAD_RE.match(l)), None)
    if head is None:
        raise SummaryError(f"{name}: no 'gpu-check summary (DATE, GPU)' line: not a gpu-check summary.txt")
    out = {"date": head.group(1), "gpu": head.group(2).split(",")[0].strip(), "steps": [], "configs": None,
           "cells": {}, "kernels": None, "tools": None}
    for l in lines:
        m = STEP_RE.match(l)
        if m:
            out["steps"].append((m.group(1), m.group(2).strip()))
        if l.startswith("kernels: "):
            out["kernels"] = l[len("kernels: "):].strip()
        if l.startswith("configurations: "):
            out["configs"] = l[len("configurations: "):].split(";")[0].strip()
        words = l.split()
        if len(words) > 1 and words[0] == "stage" and set(words[1:]) <= set(SANITIZER_TOOLS):
            out["tools"] = words[1:]  # the sanitizer table's header: the tools this run used
        m = CELL_RE.match(l)
        if m and m.group(1) != "stage":
            out["cells"][m.group(1)] = re.findall(r"(?:PASS|FAIL|ERROR) \d+/\d+|-", l[len(m.group(1)):])
    if not out["steps"]:
        raise SummaryError(f"{name}: no step lines (build / tests / sanitizers): the run did not finish")
    return out


def paragraph(summaries, commit):
    last = summaries[-1]
    steps = [s for summ in summaries for s in summ["steps"]]
    ok = all(r.startswith("PASS") for _, r in steps)
    skipped = sum(int(m) for _, r in steps for m in re.findall(r"(\d+) SKIPPED", r))
    parts = []
    for step, result in steps:
        parts.append(f"{step}: {result}")
    kernels = next((s["kernels"] for s in reversed(summaries) if s["kernels"]), None)
    kernel_text = f"kernels: {kernels}" if kernels else "kernel set not recorded in the summary"
    text = (f"The last check on the GPU (`scripts/gpu-check.sh`, {last['date']}, {last['gpu']}, "
            f"commit {commit}, {kernel_text}) "
            + ("did NOT pass every step" if not ok else
               f"passed every step, {skipped} test(s) SKIPPED" if skipped else "passed every step")
            + ": " + "; ".join(parts) + ".")
    sans = [s for s in summaries if s["cells"]]
    if sans:
        s = sans[-1]
        total = sum(int(c.split()[1].split("/")[1]) for cells in s["cells"].values() for c in cells if c != "-")
        clean = sum(int(c.split()[1].split("/")[0]) for cells in s["cells"].values() for c in cells if c != "-")
        stages = [r for r in s["cells"] if "@" not in r]
        forms = [r for r in s["cells"] if "@" in r]  # STAGE@FORM: a stage on another cache form
        which = ("every stage" if set(stages) >= set(ALL_STAGES) else
                 ("stage " if len(stages) == 1 else "stages ") + ", ".join(stages))
        if forms:
            which += f" and {len(forms)} other cache form{'s' if len(forms) > 1 else ''} ({', '.join(forms)})"
        text += (f" compute-sanitizer ({', '.join(s['tools'] or SANITIZER_TOOLS)}) ran {which} in the "
                 f"configurations {s['configs']}: {clean} of {total} runs clean.")
    return text


def replace_region(readme_text, body, path):
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1 or readme_text.index(BEGIN) > readme_text.index(END):
        raise SummaryError(f"{path}: needs exactly one {BEGIN} ... {END} region")
    a = readme_text.index(BEGIN) + len(BEGIN)
    b = readme_text.index(END)
    return readme_text[:a] + "\n" + body + "\n" + readme_text[b:]


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="the commit the GPU ran")
    ap.add_argument("--readme", help="the README to update (default: print the paragraph)")
    ap.add_argument("summaries", nargs="+")
    a = ap.parse_args(argv)
    try:
        summaries = []
        for p in a.summaries:
            try:
                with open(p, encoding="utf-8") as f:
                    summaries.append(parse_summary(f.read(), p))
            except OSError as e:
                raise SummaryError(f"{p}: cannot read: {e.strerror}")
        body = paragraph(summaries, a.commit)
        if not a.readme:
            print(body)
            return 0
        with open(a.readme, encoding="utf-8") as f:
            new = replace_region(f.read(), body, a.readme)
        tmp = a.readme + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, a.readme)
        return 0
    except SummaryError as e:
        print(f"gpu_check_readme.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
