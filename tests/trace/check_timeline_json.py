#!/usr/bin/env python3
"""A Perfetto export of pa-lab timeline, checked by Python's own JSON reader.

Usage: check_timeline_json.py FILE.json SPANS

An independent check of the C++ tests' reader (tests/support/strict_json.hpp):
the file is UTF-8 JSON that Python reads with NaN, Infinity and duplicate keys
refused; it holds exactly SPANS complete events ("ph": "X"), each with the
fields the trace-event format and Perfetto need, on a process and a thread
that metadata events name; no pid or tid is 0. Run by ctest (test
timeline_json_py) on a file made by timeline_sample and pa-lab timeline.
"""
import json
import sys


def refuse_constant(name):
    raise ValueError(f"non-JSON constant {name}")


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def main():
    path, spans = sys.argv[1], int(sys.argv[2])
    with open(path, encoding="utf-8", errors="strict") as f:
        doc = json.load(f, parse_constant=refuse_constant, object_pairs_hook=no_duplicates)
    assert doc["displayTimeUnit"] == "ns", doc["displayTimeUnit"]
    assert doc["otherData"]["spans"] == spans, doc["otherData"]
    events = doc["traceEvents"]
    assert isinstance(events, list)
    process_names, thread_names = {}, {}
    for e in events:
        if e["ph"] != "M":
            continue
        assert e["pid"] >= 1 and e["tid"] >= 1, e
        if e["name"] == "process_name":
            assert e["pid"] not in process_names, e
            process_names[e["pid"]] = e["args"]["name"]
        elif e["name"] == "thread_name":
            assert (e["pid"], e["tid"]) not in thread_names, e
            thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
        else:
            assert e["name"] in ("process_sort_index", "thread_sort_index"), e
            assert isinstance(e["args"]["sort_index"], int), e
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == spans, f"{len(complete)} complete events for {spans} spans"
    assert len(events) == spans + 2 * len(process_names) + 2 * len(thread_names), "unexpected event kinds"
    for e in complete:
        assert set(e) == {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}, sorted(e)
        assert isinstance(e["name"], str) and e["name"], e
        assert len(e["cat"].split(",")) == 2, e
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
        assert e["pid"] in process_names, e
        assert (e["pid"], e["tid"]) in thread_names, e
        assert process_names[e["pid"]] == f"SM {e['pid'] - 1}", e
        assert set(e["args"]) == {"block", "warp", "iter", "cycles"}, e
        assert thread_names[(e["pid"], e["tid"])].endswith(
            f"block {e['args']['block']} warp {e['args']['warp']}"), e
    print(f"{path}: valid JSON, {spans} complete events on {len(thread_names)} threads of "
          f"{len(process_names)} processes")


if __name__ == "__main__":
    main()
