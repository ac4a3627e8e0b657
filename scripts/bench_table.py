#!/usr/bin/env python3
"""Turn a pa-bench JSON file into the README results table.

Usage: scripts/bench_table.py assets/bench/<gpu>.json [--cascade assets/bench/<run>.json]
                             [--sdpa SDPA_FP16.json] [--sdpa SDPA_BF16.json]
                             [--readme README.md] [--markers NAME] [--print]
       scripts/bench_table.py assets/bench/<gpu>-layouts.json --layouts [...]
       scripts/bench_table.py assets/bench/<gpu>-latency.json --latency [...]

A file from pa-bench --multilevel (its "benchmark" says so) becomes the
multi-level cascade's table instead (write it with --markers results-multilevel);
one from pa-bench --split-sweep the split sweep's (every shape, the planned
split against the fastest one timed; --markers results-split-sweep).

--cascade: take the cascade section (rows with a shared prefix, and the
speedup) from another run's JSON (pa-bench --cascade-only), named with its
own GPU and copy bandwidth, instead of the main file's.

--sdpa: add PyTorch SDPA's cuDNN and flash backends as two more columns of
the main table, from python/benchmarks/bench_vs_sdpa.py --json files (one per
dtype: give --sdpa twice for fp16 and bf16). SDPA reads the same K and V
contiguous, [seqs, kv heads, context, head] with enable_gqa (no page table).
A main-table row (its dtype's own KV, vLLM's layout, no shared prefix) gets
SDPA's cells when an SDPA row has its seqs, heads, kv heads, context, head
size and dtype, else "—". The % is of the copy bandwidth bench_vs_sdpa.py
measured in its own process (its "copy_gbps"), not the main run's: each %
divides by a copy timed in the same process as the time it goes with. A
backend that raised (or whose output differed from the op's) is **error**,
listed under the table with its message. Refused (exit status 2): a file that cannot be read
or is not such JSON, one from another GPU than the main file's, two files of
one dtype, and --sdpa with a table that has no SDPA columns (--layouts,
--latency, the multi-level and split-sweep files, an ALiBi run).

Replaces the text between <!-- results:begin --> and <!-- results:end --> in
the README (nothing else), or prints the table with --print. The numbers are
copied from the JSON, never typed: time (median of the CUDA-event timings),
GB/s of KV read and that as % of the device-to-device copy bandwidth measured
in the same run (bytes read + written per second).

Each main-table row also states the KV pool that row's launches rotated over
(the "pool" column). pa-bench records it per row (pool_bytes); for files
written before it did, the pool is recomputed with pa-bench's own formula
(kv_pool below, cli/bench_options.hpp kv_pool_of). A cell's status:
"ok" -> time and bandwidth; "unsupported: ..." -> n/a (refused the shape) or
not built (no instance of the configuration); "missing: ..." -> missing (not
in the build); anything else, "error: ..." first, -> **error**, with the
message listed under the table: an error is never shown as n/a.
"""
import argparse
import json
import math
import pathlib
import re
import sys

# The README's generated tables sit between <!-- NAME:begin --> and
# <!-- NAME:end -->; NAME is "results" for the main table (--markers picks another).
DEFAULT_MARKERS = "results"


def markers(name):
    return f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
KERNELS = ["v1", "v2", "optimized", "cascade"]


DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def kv_dtype(row):
    """The row's KV cache element type: auto (the dtype's) or an fp8 format (files before fp8: auto)."""
    return row.get("kv_dtype", "auto")


def kv_elem_bytes(row):
    return 1 if kv_dtype(row).startswith("fp8") else DTYPE_BYTES[row["dtype"]]


def dtype_text(row):
    """The dtype column: the query dtype, and the cache's when it is fp8."""
    kv = kv_dtype(row)
    return row["dtype"] if kv == "auto" else f"{row['dtype']}, {kv} KV"


def fmt_us(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def kv_pool(row, data):
    """(sets, bytes) of the KV pool a row's launches rotated over.

    The JSON's pool_sets / pool_bytes when pa-bench recorded them; else
    pa-bench's formula (cli/bench_options.hpp, kv_pool_of): a set is the
    physical blocks one launch reads (the shared prefix once, then each
    sequence's own blocks), K and V; sets = ceil(pool_gb * 1e9 / set bytes),
    at least 2 and at most iters + warmup.
    """
    if "pool_bytes" in row and "pool_sets" in row:
        return row["pool_sets"], row["pool_bytes"]
    bs = row["block_size"]
    blocks_per_seq = -(-row["context"] // bs)
    prefix_blocks = row["prefix"] // bs
    set_blocks = prefix_blocks + row["seqs"] * (blocks_per_seq - prefix_blocks)
    set_bytes = 2.0 * set_blocks * row["kv_heads"] * row["head_size"] * bs * kv_elem_bytes(row)
    wanted = math.ceil(data["pool_gb"] * 1e9 / set_bytes)
    sets = int(max(2, min(wanted, data["iters"] + data["warmup"])))
    return sets, sets * set_bytes


def status_kind(status):
    """ok, n/a, not built, missing or error: how a status is shown."""
    if status == "ok":
        return "ok"
    if status.startswith("missing"):
        return "missing"
    if status.startswith("unsupported"):
        if "not available" in status or "no instance" in status or "not built" in status \
                or ": configuration" in status:
            return "not built"
        return "n/a"
    return "error"  # "error: ..." and any status this script does not know


def cell(row):
    if row is None:
        return "—"
    kind = status_kind(row["status"])
    if kind == "ok":
        return f"{fmt_us(row['median_us'])}<br>{row['gbps']:.0f} GB/s ({row['pct_copy']:.0f}%)"
    if kind == "error":
        return "**error**"
    return kind


def shape_text(r):
    lay = "" if layout(r) == "vllm" else f" ({layout(r)} cache)"
    return f"{r['kernel']}{lay} {dtype_text(r)} at {r['seqs']} x {r['context']} tokens (head {r['head_size']})"


def error_lines(rows):
    """One line per row whose status is an error, with its message."""
    out = []
    for r in rows:
        if status_kind(r["status"]) == "error":
            msg = " ".join(r["status"].split())
            out.append(f"- **error**: {shape_text(r)}: `{msg[:160]}`")
    return out


class Refusal(Exception):
    """Inputs this script will not make a table from; main() prints the message and exits with 2."""


# bench_vs_sdpa.py's backends: the key in its JSON ("sdpa_<key>_us", ...) and the column's name.
SDPA_BACKENDS = [("cudnn", "SDPA cuDNN"), ("flash", "SDPA flash")]
SDPA_DTYPES = ["fp16", "bf16"]
# Its rows name the dtype as torch does (str(torch.float16) without "torch.").
TORCH_DTYPE_NAMES = {"float16": "fp16", "bfloat16": "bf16"}


def cudnn_text(version):
    """torch.backends.cudnn.version()'s integer as cuDNN's own version: cudnn.h's CUDNN_VERSION is
    major * 10000 + minor * 100 + patch from cuDNN 9 on, major * 1000 + minor * 100 + patch before."""
    if version is None:
        return "no cuDNN"
    v = int(version)
    major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
    return f"cuDNN {major}.{rest // 100}.{rest % 100}"


def row_key(r):
    """A main-table row: (seqs, heads, kv heads, context, head size, dtype_text)."""
    return (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"], dtype_text(r))


def sdpa_key(row):
    """(seqs, heads, kv heads, context, head size, dtype) of an SDPA row: row_key's form."""
    seqs, heads, kv_heads, ctx, hs = row["shape"]
    return (seqs, heads, kv_heads, ctx, hs, TORCH_DTYPE_NAMES.get(row["dtype"], row["dtype"]))


def load_sdpa(paths, data, main_name, root):
    """The --sdpa files, checked against the main file: one run per dtype, on the main file's GPU.

    Returns [{"path", "src", "data", "rows": {sdpa_key: row}}] in dtype order (fp16, then bf16);
    raises Refusal naming the file and what is wrong with it."""
    runs = []
    for p in paths:
        path = pathlib.Path(p)
        try:
            d = json.loads(path.read_text())
        except OSError as e:
            raise Refusal(f"--sdpa {p}: cannot read it ({e.strerror})")
        except (ValueError, UnicodeDecodeError) as e:
            raise Refusal(f"--sdpa {p}: not JSON ({e}); expected the file of "
                          "python/benchmarks/bench_vs_sdpa.py --json")
        need = ["gpu", "torch", "cudnn", "dtype", "copy_gbps", "rows"]
        missing = [k for k in need if not isinstance(d, dict) or k not in d]
        if missing:
            raise Refusal(f"--sdpa {p}: no {', '.join(repr(k) for k in missing)} (the file of "
                          f"python/benchmarks/bench_vs_sdpa.py --json has {', '.join(need)})")
        if d["dtype"] not in SDPA_DTYPES:
            raise Refusal(f"--sdpa {p}: dtype '{d['dtype']}' (accepted: {', '.join(SDPA_DTYPES)})")
        if d["gpu"] != data["gpu"]:
            raise Refusal(f"--sdpa {p}: measured on '{d['gpu']}', but {main_name} on '{data['gpu']}' "
                          "(SDPA's columns must come from the table's GPU)")
        # Files written before bench_vs_sdpa.py recorded the layout read contiguous K and V too.
        if d.get("kv_layout", "contiguous") != "contiguous":
            raise Refusal(f"--sdpa {p}: kv_layout '{d['kv_layout']}' (accepted: contiguous)")
        if not isinstance(d["copy_gbps"], (int, float)) or not d["copy_gbps"] > 0:
            raise Refusal(f"--sdpa {p}: copy_gbps {d['copy_gbps']!r} (accepted: a positive number)")
        twin = next((r for r in runs if r["data"]["dtype"] == d["dtype"]), None)
        if twin:
            raise Refusal(f"--sdpa: {twin['path']} and {p} are both {d['dtype']} runs "
                          f"(one file per dtype: {', '.join(SDPA_DTYPES)})")
        rows = {}
        for r in d["rows"]:
            shape = r.get("shape")
            if not (isinstance(shape, list) and len(shape) == 5 and all(isinstance(x, int) for x in shape)):
                raise Refusal(f"--sdpa {p}: a row's shape is {shape!r} (accepted: [seqs, heads, kv_heads, "
                              "context, head_size], five integers)")
            k = sdpa_key(r)
            if k[5] != d["dtype"]:
                raise Refusal(f"--sdpa {p}: a {r['dtype']} row {shape} in a {d['dtype']} run")
            if k in rows:
                raise Refusal(f"--sdpa {p}: shape {shape} ({d['dtype']}) is in the file twice")
            rows[k] = r
        try:
            src = path.resolve().relative_to(root)
        except ValueError:
            src = path
        runs.append({"path": p, "src": src, "data": d, "rows": rows})
    return sorted(runs, key=lambda r: SDPA_DTYPES.index(r["data"]["dtype"]))


def sdpa_status(row, backend):
    """"ok" or "error: ...": the row's recorded status, or, in files before statuses, a missing time
    (the backend raised; its message in sdpa_<backend>_error)."""
    us = row.get(f"sdpa_{backend}_us")
    st = row.get(f"sdpa_{backend}_status")
    if st is None:
        st = "ok" if us is not None else \
            "error: " + (row.get(f"sdpa_{backend}_error") or "no time and no error message recorded")
    if st == "ok" and us is None:
        st = "error: status ok but no time recorded"
    return st


def sdpa_cell(row, backend, run):
    """A kernel cell's format for an SDPA backend; the % is of the SDPA run's own copy bandwidth."""
    if row is None:
        return "—"
    if sdpa_status(row, backend) != "ok":
        return "**error**"
    us = row[f"sdpa_{backend}_us"]
    gbps = row["kv_bytes"] / (us * 1e-6) / 1e9
    return f"{fmt_us(us)}<br>{gbps:.0f} GB/s ({100 * gbps / run['data']['copy_gbps']:.0f}%)"


def sdpa_error_lines(matched):
    """One line per (row, backend) whose status is not ok, with its message, as error_lines does."""
    out = []
    for row, run in matched:
        for backend, label in SDPA_BACKENDS:
            st = sdpa_status(row, backend)
            if st != "ok":
                seqs, _, _, ctx, hs = row["shape"]
                msg = " ".join(st.split())
                out.append(f"- **error**: {label} {run['data']['dtype']} at {seqs} x {ctx} tokens "
                           f"(head {hs}): `{msg[:160]}`")
    return out


def sdpa_header(runs):
    """The sentence saying where the SDPA columns come from: versions, KV form, files, copy bandwidths."""
    versions = {(r["data"]["torch"], cudnn_text(r["data"]["cudnn"])) for r in runs}
    if len(versions) == 1:
        t, c = next(iter(versions))
        ver = f"torch {t}, {c}"
    else:
        ver = "; ".join(f"{r['data']['dtype']}: torch {r['data']['torch']}, {cudnn_text(r['data']['cudnn'])}"
                        for r in runs)
    iters = {r["data"].get("iters") for r in runs}
    timing = (f"median of {iters.pop()} CUDA-event timings" if len(iters) == 1 and None not in iters
              else "median of CUDA-event timings")
    files = ", ".join(f"`{r['src']}` ({r['data']['dtype']})" for r in runs)
    copies = ", ".join(f"{r['data']['dtype']}: **{r['data']['copy_gbps']:.0f} GB/s**" for r in runs)
    return (f"\"SDPA cuDNN\" and \"SDPA flash\": PyTorch's `scaled_dot_product_attention` ({ver}) with that "
            f"backend, reading the same K and V contiguous, [seqs, kv heads, context, head] with enable_gqa "
            f"(no page table), timed by `python/benchmarks/bench_vs_sdpa.py` in its own process on the same GPU "
            f"model ({timing}, a GPU busy-wait before each call); raw data: {files}. Their % is of the copy "
            f"bandwidth measured in that process ({copies}), not this run's; \"—\": the shape was not in the "
            f"SDPA run; **error**: the backend raised, or its output differed from stage 8's (listed below the "
            f"table).")


def layout(row):
    """The row's KV cache layout (files before layouts: vllm)."""
    return row.get("layout", "vllm")


def layout_table(data, src):
    """Stage 8 on each layout pa-bench --layouts timed, beside vLLM's, per shape and dtype."""
    rows = [r for r in data["rows"] if r["kernel"] == "optimized"]
    layouts = [l for l in data.get("layouts", ["vllm"]) if l != "vllm"]
    if not layouts:
        raise SystemExit("bench_table.py: --layouts: the file has no layout rows (run pa-bench --layouts nhd,hnd)")
    out = [
        f"Stage 8 on each KV cache layout, measured on **{data['gpu']}** ({data['sm_count']} SMs) by "
        f"`pa-bench --layouts {','.join(layouts)}`; raw data: `{src}`. Copy bandwidth in the same run: "
        f"**{data['copy_gbps']:.0f} GB/s**. Each layout's pool holds the same elements as vLLM's, moved on the "
        f"device, and its output was checked against the vLLM-layout run's. Ratio: time on the layout / time on "
        f"vLLM's (1.03 = 3% slower).",
        "",
        "| seqs | heads | kv heads | context | head | dtype | vllm | "
        + " | ".join(layouts) + " | " + " | ".join(f"{l} / vllm" for l in layouts) + " |",
        "|---:|---:|---:|---:|---:|---|---|" + "---|" * len(layouts) + "---:|" * len(layouts),
    ]
    keys = []
    for r in rows:
        k = (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"], dtype_text(r))
        if k not in keys:
            keys.append(k)
    for k in keys:
        by = {layout(r): r for r in rows
              if (r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"], dtype_text(r)) == k}
        base = by.get("vllm")

        def ratio(l):
            r = by.get(l)
            if not base or not r or status_kind(r["status"]) != "ok" or status_kind(base["status"]) != "ok":
                return "—"
            return f"{r['median_us'] / base['median_us']:.3f}"

        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {k[5]} | {cell(base)} | "
                   + " | ".join(cell(by.get(l)) for l in layouts) + " | "
                   + " | ".join(ratio(l) for l in layouts) + " |")
    errors = error_lines([r for r in rows if layout(r) != "vllm"])
    if errors:
        out.append("")
        out.extend(errors)
    return "\n".join(out)


def table(data, src, cdata=None, csrc=None, sdpa=None):
    """The main table (and the cascade's); sdpa: load_sdpa's runs, for the SDPA columns."""
    rows = [r for r in data["rows"] if layout(r) == "vllm"]  # other layouts: layout_table
    main_rows = [r for r in rows if not r["prefix"]]
    out = []
    spin = data.get("spin_us")
    spin_text = (f"Before each launch (warm-up and timed) a {spin:g} us GPU busy-wait kernel runs, so the host "
                 f"enqueues the launch while the GPU is busy and the event pair times the kernel alone. "
                 if spin else
                 "No busy-wait before the launches: the event pairs include the host's launch gaps. "
                 if spin == 0 else "")
    pools = [kv_pool(r, data)[1] for r in rows]
    block_sizes = sorted({r["block_size"] for r in rows})
    refused = sorted({f"{r['kernel']} at {r['context']} tokens"
                      + (": its shared memory does not fit" if "SharedMemory" in r["status"]
                         or "shared memory" in r["status"] else "")
                      for r in main_rows if status_kind(r["status"]) == "n/a"})
    out.append(
        f"Measured on **{data['gpu']}** ({data['sm_count']} SMs) by `pa-bench`; raw data: `{src}`. "
        f"Device-to-device copy bandwidth in the same run: **{data['copy_gbps']:.0f} GB/s** "
        f"(read + write)"
        + (f"; a kernel that only reads streams **{data['read_gbps']:.0f} GB/s** "
           f"({100 * data['read_gbps'] / data['copy_gbps']:.0f}% of the copy: the second ceiling)"
           if data.get("read_gbps") else "")
        + f". Each cell: median of {data['iters']} CUDA-event timings after "
        + (f"at least {data['warmup']} warm-up launches and {data['warmup_ms']:g} ms of them"
           if "warmup_ms" in data else f"{data['warmup']} warm-up launches")
        + f"; GB/s of K+V read and that as % of the copy bandwidth. {spin_text}"
        + ("Every kernel ran with ALiBi (a slope per query head, a bias on every logit). "
           if data.get("alibi") else "")
        + ("Rows marked \"fp8_e4m3 KV\" / \"fp8_e5m2 KV\" store K and V in one byte per element (random "
           "codes at scale 1), queries and output in the dtype; KV MB counts those bytes. "
           if any(kv_dtype(r) != "auto" for r in rows) else "")
        + f"Launches rotate over a pool of disjoint copies of the KV so that none finds its KV in L2: "
        f"{data['pool_gb']:g} GB asked for, but at most {data['iters'] + data['warmup']} copies "
        f"(iters + warm-up), so the pool is {min(pools) / 1e9:.2f} to {max(pools) / 1e9:.2f} GB "
        f"(\"pool\" column). Block size {', '.join(str(b) for b in block_sizes)}. "
        f"\"n/a\": the kernel refused the shape"
        + (f" ({'; '.join(refused)})" if refused else "")
        + "; \"not built\": the configuration is not instantiated in the quick build this run used; "
        "\"missing\": the kernel is not in this build; **error**: the kernel failed (listed below the "
        "table). The JSON holds each status."
        + (" " + sdpa_header(sdpa) if sdpa else "")
    )
    out.append("")
    sdpa_labels = [label for _, label in SDPA_BACKENDS] if sdpa else []
    out.append("| seqs | heads | kv heads | context | head | dtype | KV MB | pool GB | "
               + " | ".join(KERNELS[:3] + sdpa_labels) + " |")
    out.append("|---:|---:|---:|---:|---:|---|---:|---:|" + "---|" * (3 + len(sdpa_labels)))
    keys = []
    for r in main_rows:
        if row_key(r) not in keys:
            keys.append(row_key(r))
    matched = []  # (SDPA row, its run) for each table row that has one
    for k in keys:
        by = {r["kernel"]: r for r in main_rows if row_key(r) == k}
        first = next(iter(by.values()))
        kvmb = first["kv_bytes"] / 1e6
        pool_gb = kv_pool(first, data)[1] / 1e9
        sdpa_cells = []
        if sdpa:
            # An fp8 cache's key names it ("fp16, fp8_e4m3 KV"): it matches no SDPA row.
            run = next((r for r in sdpa if k in r["rows"]), None)
            srow = run["rows"][k] if run else None
            if srow is not None:
                # Both count every token's K and V once: a difference means they timed different work.
                if srow["kv_bytes"] != first["kv_bytes"]:
                    raise Refusal(f"--sdpa {run['path']}: shape {srow['shape']} ({k[5]}) has kv_bytes "
                                  f"{srow['kv_bytes']}, the table's row {first['kv_bytes']}")
                matched.append((srow, run))
            sdpa_cells = [sdpa_cell(srow, b, run) for b, _ in SDPA_BACKENDS]
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {k[5]} | {kvmb:.0f} | {pool_gb:.2f} | "
                   + " | ".join([cell(by.get(n)) for n in KERNELS[:3]] + sdpa_cells) + " |")
    errors = error_lines(main_rows) + sdpa_error_lines(matched)
    if errors:
        out.append("")
        out.extend(errors)
    cd = cdata if cdata is not None else data
    # The cascade takes no fp8 cache; stage 8 on other layouts is layout_table's.
    casc = [r for r in cd["rows"] if r["prefix"] and kv_dtype(r) == "auto" and layout(r) == "vllm"]
    if casc:
        out.append("")
        r0 = casc[0]
        origin = ""
        if cdata is not None:
            origin = (f" Measured in a separate run on **{cd['gpu']}** (raw data: `{csrc}`, copy bandwidth "
                      f"{cd['copy_gbps']:.0f} GB/s in that run, median of {cd['iters']} timings); every kernel "
                      f"in this table ran in that run.")
        sets, pool = kv_pool(r0, cd)
        out.append(
            f"Cascade: {r0['seqs']} sequences sharing a {r0['prefix']}-token prefix, "
            f"{r0['context'] - r0['prefix']} unique tokens each, {r0['heads']} heads (MHA), head size "
            f"{r0['head_size']}; the same block tables (prefix blocks shared) for every kernel, rotated over "
            f"{sets} copies ({pool / 1e9:.2f} GB in {r0['dtype']}). "
            f"GB/s counts each kernel's logical KV reads (cascade: the prefix once).{origin}"
        )
        out.append("")
        out.append("| dtype | " + " | ".join(KERNELS) + " | cascade speedup vs best other |")
        out.append("|---|" + "---|" * (len(KERNELS) + 1))
        for dt in sorted({r["dtype"] for r in casc}, key=lambda d: d != "fp16"):
            by = {r["kernel"]: r for r in casc if r["dtype"] == dt}
            sp = next((c for c in cd.get("cascade", []) if c["dtype"] == dt), None)
            sptxt = f"{sp['speedup']:.1f}x (vs {sp['best_non_cascade']})" if sp else "—"
            out.append(f"| {dt} | " + " | ".join(cell(by.get(n)) for n in KERNELS) + f" | {sptxt} |")
        errors = error_lines(casc)
        if errors:
            out.append("")
            out.extend(errors)
    return "\n".join(out)


def multilevel_table(data, src):
    """The multi-level cascade benchmark (pa-bench --multilevel): each variant's
    time and the floor it is measured against, per dtype."""
    floor = data["rows"][0]["distinct_kv_bytes"] if data["rows"] else 0
    head = (f"Multi-level cascade, measured on **{data['gpu']}** ({data['sm_count']} SMs) by `pa-bench --multilevel`; "
            f"raw data: `{src}`. Copy bandwidth in the same run: **{data['copy_gbps']:.0f} GB/s**. "
            f"{data['requests']} requests x {data['heads']} query heads ({data['kv_heads']} KV heads) of "
            f"{data['head_size']}, pages of {data['block_size']}: {data['levels']}. Medians of {data['iters']} "
            f"timings, a {data['spin_us']} us busy-wait before each, {data['sets']} sets of pages used in turn. "
            f"The floor reads every distinct KV byte once ({floor / 1e9:.2f} GB) at the copy bandwidth; "
            f"\"% of floor\" = floor time / time.\n")
    lines = [head, "| dtype | kernels | time (us) | % of floor | KV asked for (GB; a shared page once per reader) | shared levels alone (us) | "
             "last level alone (us) |", "|---|---|---|---|---|---|---|"]
    errors = []
    for r in data["rows"]:
        if r["status"] != "ok":
            lines.append(f"| {r['dtype']} | {r['variant']} | **error** | | | | |")
            errors.append(f"- {r['dtype']} {r['variant']}: {r['status']}")
            continue
        shared = f"{r['shared_us']:.1f}" if r["levels"] > 1 else "-"
        lines.append(f"| {r['dtype']} | {r['variant']} | {r['median_us']:.1f} | {r['pct_floor']:.1f}% | "
                     f"{r['kv_read_bytes'] / 1e9:.2f} | {shared} | {r['last_us']:.1f} |")
    return "\n".join(lines + ([""] + errors if errors else []))


def latency_table(data, src):
    """Stage 8's end-to-end latency on the small shapes (rows with single_us):
    the kernel alone (the busy-wait before each launch) against three ways
    with the host's launch inside."""
    rows = [r for r in data["rows"] if r["kernel"] == "optimized" and r.get("single_us", 0) > 0]
    head = (f"End-to-end latency of stage 8, measured on **{data['gpu']}** by `pa-bench` (one run); raw data: "
            f"`{src}`. \"kernel\": the row's median with a {data['spin_us']} us busy-wait before each launch, so no "
            f"launch cost is inside; the other three include the host's launch: \"single\": "
            f"one launch between an event pair with nothing before it (median of {data['iters']}); "
            f"\"back-to-back\": 64 launches enqueued together, per launch; \"graph\": the same 64 captured in "
            f"one CUDA graph and replayed, per launch (medians of 7). Shapes of at most 600 MB of KV.\n")
    lines = [head, "| seqs | heads | kv heads | context | head | dtype | kernel | single | back-to-back | graph |",
             "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['seqs']} | {r['heads']} | {r['kv_heads']} | {r['context']} | {r['head_size']} | "
                     f"{dtype_text(r)} | {fmt_us(r['median_us'])} | {fmt_us(r['single_us'])} | "
                     f"{fmt_us(r['b2b_us'])} | {fmt_us(r['graph_us'])} |")
    return "\n".join(lines)


def paged_read_table(data, src):
    """Stage 8 beside the reads of its own tiles (pa-bench --paged-read;
    rows with paged_read_us): the same bytes read in its grid with nothing
    else done, by 16-byte cp.async and by cp.async.bulk, as many contiguous
    bytes by the read-only kernel, and the paged reads with each warp held
    after every step (the bulk one only in files that have held_bulk_us)."""
    rows = [r for r in data["rows"] if r["kernel"] == "optimized" and r.get("paged_read_us", 0) > 0]
    if not rows:
        raise Refusal("--paged-read: no stage 8 row has paged_read_us (accepted: a pa-bench --paged-read file)")
    held_ns = sorted({r.get("held_step_ns", 0) for r in rows} - {0})
    held_bulk_ns = sorted({r.get("held_step_ns", 0) for r in rows if r.get("held_bulk_us", 0) > 0} - {0})
    copy = data["copy_gbps"]

    def cell(r, key):
        us = r[key]
        return f"{fmt_us(us)} ({100 * r['kv_bytes'] / (us * 1e-6) / 1e9 / copy:.1f}%)" if us > 0 else "-"
    held = (f" \"held N ns\": the {'paged reads' if held_bulk_ns else 'cp.async read'} again, each warp held N ns "
            f"(clock64 cycles at the device's maximum clock) after every step, where stage 8 does its math."
            if held_ns else "")
    head = (f"Stage 8 beside the bare read of its tiles, measured on **{data['gpu']}** by `pa-bench --paged-read` "
            f"(one run); raw data: `{src}`. Copy bandwidth in the same run: **{copy:.0f} GB/s**; the read-only "
            f"kernel streams {data['read_gbps']:.0f} GB/s over {data['read_bytes'] / 2**30:.0f} GiB. Each cell: "
            f"median of {data['iters']} CUDA-event timings (a {data['spin_us']} us busy-wait before each), "
            f"launches rotating over the same pool, and % of the copy. \"paged\": every K and V tile stage 8 "
            f"reads, through the same block tables, in stage 8's grid and per-warp pipeline, with nothing done "
            f"with them, by 16-byte cp.async (stage 8's copy) or by one cp.async.bulk per 4 KB tile; "
            f"\"contiguous\": the read-only kernel over as many contiguous bytes.{held} Head 128, block 16, "
            f"16-bit caches only.\n")
    cols = (["stage 8", "paged, cp.async", "paged, bulk", "contiguous"] + [f"paged, held {n} ns" for n in held_ns] +
            [f"paged bulk, held {n} ns" for n in held_bulk_ns])
    lines = [head, "| seqs | heads | kv heads | context | dtype | KV MB | " + " | ".join(cols) + " |",
             "|---:|---:|---:|---:|---|---:|" + "---:|" * len(cols)]
    for r in rows:
        cells = [cell(r, "median_us"), cell(r, "paged_read_us"), cell(r, "paged_bulk_us"),
                 cell(r, "contiguous_read_us")]
        cells += [cell(r, "held_read_us") if r.get("held_step_ns") == n else "-" for n in held_ns]
        cells += [cell(r, "held_bulk_us") if r.get("held_step_ns") == n and r.get("held_bulk_us", 0) > 0 else "-"
                  for n in held_bulk_ns]
        lines.append(f"| {r['seqs']} | {r['heads']} | {r['kv_heads']} | {r['context']} | {dtype_text(r)} | "
                     f"{r['kv_bytes'] / 1e6:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def split_sweep_table(data, src):
    """The split sweep (pa-bench --split-sweep): per shape, the split the
    planner chose against the fastest split count timed, and every point."""
    within = data["within"]
    ratios = sorted(r["planned_over_best"] for r in data["shapes"] if r["planned_over_best"] > 0)
    median = ratios[len(ratios) // 2] if ratios else 0
    worst = ratios[-1] if ratios else 0
    head = (f"Split sweep measured on **{data['gpu']}** ({data['sm_count']} SMs) by "
            f"`pa-bench --split-sweep {len(data['shapes'])} --seed {data['seed']}`; raw data: `{src}`. "
            f"Copy bandwidth in the same run: **{data['copy_gbps']:.0f} GB/s**; DRAM peak "
            f"{data['dram_peak_gbps']:.0f} GB/s (from the memory clock and bus width: the planner's input). "
            f"Each time: median of {data['iters']} CUDA-event timings, a {data['spin_us']} us busy-wait before "
            f"each, launches rotating over a pool of about {data['pool_gb']:g} GB (at least 2 copies). "
            f"The planned split is within {100 * (within - 1):.0f}% of the fastest split count timed on "
            f"**{data['shapes_within']} of {data['shapes_run']}** shapes (planned / best: median {median:.3f}, "
            f"worst {worst:.3f}). \"MB\": one copy of the KV; contexts: longest / mean; every point is checked "
            f"against the first one's output.\n")
    lines = [head, "| # | dtype | seqs | heads / kv | head | context | MB | CTAs/SM | planned | best | "
             "planned / best | every split timed (splits: us) |",
             "|---:|---|---:|---|---:|---|---:|---:|---|---|---:|---|"]
    errors = []
    for r in data["shapes"]:
        mean = sum(r["context_lens"]) / len(r["context_lens"])
        lead = (f"| {r['index']} | {dtype_text(r)} | {r['seqs']} | {r['heads']} / {r['kv_heads']} | {r['head_size']} | "
                f"{r['context']} / {mean:.0f} | {r['kv_bytes'] / 1e6:.0f} | ")
        kind = status_kind(r["status"])
        if kind != "ok":
            lines.append(lead + f"- | {'**error**' if kind == 'error' else kind} | | | |")
            if kind == "error":
                errors.append(f"- **error**: shape {r['index']}: `{r['status'][:160]}`")
            continue
        pts = ", ".join(f"{p['splits']}: {p['median_us']:.1f}" for p in r["points"])
        ratio = r["planned_over_best"]
        mark = "" if ratio <= within else " (**over**)"
        lines.append(lead + f"{r['ctas_per_sm']} | {r['planned_splits']}: {fmt_us(r['planned_us'])} | "
                     f"{r['best_splits']}: {fmt_us(r['best_us'])} | {ratio:.3f}{mark} | {pts} |")
    return "\n".join(lines + ([""] + errors if errors else []))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json")
    ap.add_argument("--readme", default=None)
    ap.add_argument("--cascade", default=None)
    ap.add_argument("--print", action="store_true")
    ap.add_argument("--layouts", action="store_true",
                    help="the table of stage 8 per KV cache layout (pa-bench --layouts) instead of the main one")
    ap.add_argument("--latency", action="store_true",
                    help="the table of stage 8's end-to-end latency (rows with single_us) instead of the main one")
    ap.add_argument("--paged-read", action="store_true",
                    help="the table of stage 8 beside the reads of its tiles (pa-bench --paged-read) instead of the "
                         "main one")
    ap.add_argument("--markers", default=DEFAULT_MARKERS,
                    help="write between <!-- MARKERS:begin --> and <!-- MARKERS:end --> (default: results)")
    ap.add_argument("--sdpa", action="append", default=[], metavar="FILE",
                    help="python/benchmarks/bench_vs_sdpa.py --json output: SDPA cuDNN and flash columns in the "
                         "main table (once per dtype: fp16, bf16)")
    a = ap.parse_args()
    path = pathlib.Path(a.json)
    data = json.loads(path.read_text())
    root = pathlib.Path(__file__).resolve().parent.parent
    readme = pathlib.Path(a.readme) if a.readme else root / "README.md"
    try:
        src = path.resolve().relative_to(root)
    except ValueError:
        src = path
    cdata, csrc = None, None
    if a.cascade:
        cpath = pathlib.Path(a.cascade)
        cdata = json.loads(cpath.read_text())
        try:
            csrc = cpath.resolve().relative_to(root)
        except ValueError:
            csrc = cpath
    try:
        sdpa = None
        if a.sdpa:
            # Refused rather than ignored: the command would say SDPA is in a table that has no place for it.
            kind = {"multilevel": "a pa-bench --multilevel file", "split_sweep": "a pa-bench --split-sweep file"}
            if data.get("benchmark") in kind:
                raise Refusal(f"--sdpa: {path} is {kind[data['benchmark']]}, whose table has no SDPA columns "
                              "(accepted: the main table's file, without --layouts or --latency)")
            if a.layouts or a.latency or a.paged_read:
                other = '--layouts' if a.layouts else '--latency' if a.latency else '--paged-read'
                raise Refusal(f"--sdpa with {other}: that table has no SDPA "
                              "columns (accepted: the main table, without --layouts, --latency or --paged-read)")
            if data.get("alibi"):
                raise Refusal(f"--sdpa: {path}'s kernels ran with ALiBi, bench_vs_sdpa.py's SDPA without it "
                              "(accepted: a run without --alibi)")
            sdpa = load_sdpa(a.sdpa, data, path, root)
        if data.get("benchmark") == "multilevel":
            t = multilevel_table(data, src)
        elif data.get("benchmark") == "split_sweep":
            t = split_sweep_table(data, src)
        else:
            if sum([a.layouts, a.latency, a.paged_read]) > 1:
                raise Refusal("--layouts, --latency and --paged-read each choose a table: give one")
            t = layout_table(data, src) if a.layouts else latency_table(data, src) if a.latency else \
                paged_read_table(data, src) if a.paged_read else table(data, src, cdata, csrc, sdpa)
    except Refusal as e:
        print(f"bench_table.py: {e}", file=sys.stderr)
        return 2
    for run in sdpa or []:
        # Said, not refused: an SDPA run may time more shapes than this table holds.
        keys = {row_key(r) for r in data["rows"] if layout(r) == "vllm" and not r["prefix"]}
        extra = [list(k[:5]) for k in run["rows"] if k not in keys]
        if extra:
            print(f"bench_table.py: --sdpa {run['path']}: {len(extra)} shape(s) not in the table, left out: "
                  + ", ".join(map(str, extra)), file=sys.stderr)
    if a.print:
        print(t)
        return 0
    if not re.fullmatch(r"[a-z0-9-]+", a.markers):
        print(f"bench_table.py: --markers '{a.markers}' (accepted: lower-case letters, digits and '-')",
              file=sys.stderr)
        return 2
    begin, end = markers(a.markers)
    text = readme.read_text()
    if begin not in text or end not in text:
        print(f"bench_table.py: {readme} has no {begin} ... {end} markers", file=sys.stderr)
        return 1
    new = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda m: f"{begin}\n{t}\n{end}", text, count=1,
                 flags=re.S)
    # Write, then rename: a failed write never leaves a half-written README.
    tmp = readme.with_name(readme.name + ".tmp")
    tmp.write_text(new)
    tmp.replace(readme)
    print(f"bench_table.py: wrote the results table into {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
