# Converts split-sweep JSON files (pa-bench --split-sweep) into the text
# format split_model_sim.cpp reads: one line per shape, tagged s1 or s2.
# Usage: python3 to_text.py s1=A.json s2=B.json > shapes.txt
import json, sys
for arg in sys.argv[1:]:
    tag, fn = arg.split("=", 1)
    d = json.load(open(fn))
    for s in d["shapes"]:
        if s["status"] != "ok":
            continue
        eb = 1 if "fp8" in s["kv_dtype"] else (4 if s["dtype"] == "fp32" else 2)
        pts = [(p["splits"], p["split_blocks"], p["median_us"]) for p in s["points"] if p["status"] == "ok"]
        cl = s["context_lens"]
        print(tag, s["index"], d["sm_count"], d["dram_peak_gbps"], s["units"], s["head_size"], s["block_size"], eb,
              s["blocks_per_step"], s["ctas_per_sm"], s["planned_splits"], len(cl), *cl, len(pts),
              *[x for p in pts for x in p])
