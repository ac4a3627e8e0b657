"""The lab's op (stage 8) against PyTorch's SDPA, cuDNN and flash backends, on the README's decode shapes.

    PA_LAB_LIBRARY=build/python/libpa_lab_torch.so PYTHONPATH=python \
        python3 python/benchmarks/bench_vs_sdpa.py [--dtype fp16|bf16] [--iters N]
            [--shapes "SEQS,HEADS,KV_HEADS,CONTEXT,HEAD_SIZE;..."] [--json out.json]

Each shape is (sequences, query heads, KV heads, context, head size), one
query token per sequence, fp16 (--dtype bf16 for bf16); --shapes replaces the
default list (SHAPES, the README's decode shapes). The op reads a paged
cache (shuffled 16-token blocks); SDPA reads the same keys and values
contiguous, [sequences, KV heads, context, head size], with enable_gqa. Both
are timed the same way: CUDA-event pairs around single calls, a GPU
busy-wait (torch.cuda._sleep) before each so the host's enqueueing is not
timed, and the inputs rotated over copies that together exceed 1 GiB so that
no call finds its KV in L2; the median of --iters calls. GB/s counts the KV
bytes read (every token's K and V once) and the device-to-device copy's
bandwidth is measured in the same run ((read + write) / time).

Each backend's output is checked against the op's on the same inputs with
the lab's tolerance for two outputs neither of which is exact (see
pair_tolerance). The JSON (--json, written whole or not at all) records per
row and backend a status, "ok" or "error: ..." (the backend raised, or its
output differs from the op's beyond that tolerance), and the op's own
("unsupported: ..." where this build lacks the configuration). The exit
status is 1 when an output differs or the op raised, after the JSON is
written, so that such a run does not pass for a good one.

Then the binding's cost on the host: the time per call of a loop of calls
that the GPU outruns (the GPU first busy for longer than the loop), for the
raw op, the Python wrapper, SDPA, and the replay of a CUDA graph holding one
call.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import pa_lab

SHAPES = [(1, 32, 8, 4096, 128), (8, 32, 8, 4096, 128), (32, 32, 8, 4096, 128), (64, 32, 8, 8192, 128),
          (128, 32, 32, 1024, 128), (256, 32, 8, 2048, 128), (16, 64, 8, 32768, 128), (1, 32, 8, 131072, 128),
          (64, 32, 8, 8192, 64), (64, 32, 8, 8192, 256)]
SLEEP_CYCLES = 100_000  # about 50 us at H100/H200 clocks
SHAPE_FIELDS = "seqs,heads,kv_heads,context,head_size"


def parse_shapes(text):
    """--shapes "s,h,kv,ctx,hs;...": a list of (seqs, heads, kv_heads, context, head_size) tuples.

    Raises ValueError naming the bad item. Empty items (a trailing ';') are skipped."""
    shapes = []
    for item in text.split(";"):
        item = item.strip()
        if not item:
            continue
        fields = [f.strip() for f in item.split(",")]
        if len(fields) != 5 or not all(f.isascii() and f.isdigit() for f in fields):
            raise ValueError(f"shape '{item}' (accepted: five positive integers {SHAPE_FIELDS})")
        shape = tuple(int(f) for f in fields)
        if min(shape) < 1:
            raise ValueError(f"shape '{item}': every field must be at least 1 ({SHAPE_FIELDS})")
        seqs, heads, kv_heads, ctx, hs = shape
        # Grouped-query attention: every KV head serves the same number of query heads.
        if heads % kv_heads:
            raise ValueError(f"shape '{item}': heads {heads} is not a multiple of kv_heads {kv_heads}")
        if shape in shapes:
            raise ValueError(f"shape '{item}' is given twice")
        shapes.append(shape)
    if not shapes:
        raise ValueError(f"'{text}' holds no shape (accepted: \"{SHAPE_FIELDS};...\")")
    return shapes


def pair_tolerance(abs_tol, rel_tol):
    """(abs, rel) for comparing two outputs neither of which is exact, from the tolerance of one.

    This is kernel_pair_tolerance of kernels/include/pa/core/tolerance.hpp (the lab's one
    tolerance source; pa_lab.tolerance gives its tolerance_for): each output lies within
    (a, r) of the exact value, so they differ by at most 2a / (1 - r) + 2r / (1 - r) |x|,
    x the one taken as the reference. Kept in the header's form because the binding
    exposes tolerance_for only."""
    return 2 * abs_tol / (1 - rel_tol), 2 * rel_tol / (1 - rel_tol)


def copy_gbps(nbytes=1 << 30, iters=20):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    b.copy_(a)
    ms = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return 2 * nbytes / (statistics.median(ms) * 1e-3) / 1e9


def time_calls(fn, rotations, iters, warmup=20):
    for i in range(warmup):
        fn(i % rotations)
    ms = []
    for i in range(iters):
        torch.cuda._sleep(SLEEP_CYCLES)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn(i % rotations)
        e.record()
        e.synchronize()
        ms.append(s.elapsed_time(e))
    return statistics.median(ms) * 1e3  # us


def bench_shape(shape, dtype, iters, gbps_copy, tol):
    """One shape: the op's time and each SDPA backend's, with its status and its cross-check against the op."""
    seqs, heads, kv_heads, ctx, hs = shape
    kv_bytes = 2 * seqs * ctx * kv_heads * hs * torch.finfo(dtype).bits // 8
    rot = max(1, math.ceil((1 << 30) / kv_bytes))
    g = torch.Generator().manual_seed(sum(shape))
    caches, contig, queries = [], [], []
    for _ in range(rot):
        k = torch.randn(seqs, kv_heads, ctx, hs, device="cuda", dtype=dtype)
        v = torch.randn(seqs, kv_heads, ctx, hs, device="cuda", dtype=dtype)
        caches.append(pa_lab.paged_kv_cache(list(k), list(v), 16, generator=g))
        contig.append((k, v))
        queries.append(torch.randn(seqs, heads, hs, device="cuda", dtype=dtype))
    out = torch.empty(seqs, heads, hs, device="cuda", dtype=dtype)
    row = {"shape": list(shape), "dtype": str(dtype).replace("torch.", ""), "kv_bytes": kv_bytes, "rotations": rot}
    got = None  # the op's output on the first copy: what each backend's is checked against
    if not pa_lab.built("optimized", dtype, hs, 16):
        row["pa_lab_us"] = None
        row["pa_lab_status"] = f"unsupported: stage 8 {row['dtype']} head {hs} block 16 is not in this build"
    else:
        try:
            row["pa_lab_us"] = time_calls(lambda r: pa_lab.paged_attention(queries[r], caches[r], out=out), rot,
                                          iters)
            got = pa_lab.paged_attention(queries[0], caches[0]).float()
            row["pa_lab_status"] = "ok"
        except (RuntimeError, ValueError, TypeError) as e:  # the binding's checks: ValueError, TypeError (dtype)
            row["pa_lab_us"] = None
            row["pa_lab_status"] = "error: " + first_line(e)
    abs_tol, rel_tol = tol
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                def sdpa(r):
                    q = queries[r].unsqueeze(2)  # [seqs, heads, 1, hs]
                    return F.scaled_dot_product_attention(q, contig[r][0], contig[r][1], enable_gqa=True)
                ref = sdpa(0)[:, :, 0].float()
                torch.cuda.synchronize()
                row[f"sdpa_{name}_us"] = time_calls(sdpa, rot, iters)
        except RuntimeError as e:
            row[f"sdpa_{name}_us"] = None
            row[f"sdpa_{name}_error"] = first_line(e)
            row[f"sdpa_{name}_status"] = "error: " + row[f"sdpa_{name}_error"]
            continue
        row[f"sdpa_{name}_status"] = "ok"
        if got is None:
            # Nothing to compare with: the time stands, unchecked, and says so.
            row[f"max_abs_vs_{name}"] = None
            row[f"xcheck_vs_{name}"] = "not run: the op did not run (" + row["pa_lab_status"] + ")"
            continue
        err = (got - ref).abs()
        row[f"max_abs_vs_{name}"] = err.max().item()
        # NaN compares false: an output with NaN fails here, as compare() fails it in C++.
        within = bool((err <= abs_tol + rel_tol * ref.abs()).all())
        row[f"xcheck_vs_{name}"] = "ok" if within else "fail"
        if not within:
            row[f"sdpa_{name}_status"] = (f"error: its output differs from pa_lab's by up to {err.max().item():.3g}, "
                                          f"beyond the tolerance (abs {abs_tol:.3g} + rel {rel_tol:.3g} |ref|)")
    for key in ("pa_lab", "sdpa_cudnn", "sdpa_flash"):
        us = row.get(f"{key}_us")
        row[f"{key}_pct_copy"] = None if us is None else 100 * kv_bytes / (us * 1e-6) / 1e9 / gbps_copy
    del caches, contig
    torch.cuda.empty_cache()
    return row


def first_line(e):
    """An exception's first line, short enough for a table's error list."""
    lines = str(e).splitlines()
    return (lines[0] if lines else type(e).__name__)[:160]


def host_cost_per_call(n=200):
    """Host microseconds per call while the GPU is busy (it never waits on the host)."""
    seqs, heads, kv_heads, ctx, hs = 1, 32, 8, 4096, 128
    k = torch.randn(seqs, kv_heads, ctx, hs, device="cuda", dtype=torch.float16)
    v = torch.randn_like(k)
    cache = pa_lab.paged_kv_cache(list(k), list(v), 16)
    q = torch.randn(seqs, heads, hs, device="cuda", dtype=torch.float16)
    out = torch.empty_like(q)
    one = torch.ones(1, dtype=torch.float32)
    raw = lambda: torch.ops.pa_lab.paged_attention(out, q, cache.key_cache, cache.value_cache, kv_heads, hs ** -0.5,  # noqa: E731
                                                   cache.block_tables, cache.seq_lens, 16, ctx, None, "auto", one,
                                                   one, "optimized")
    wrapper = lambda: pa_lab.paged_attention(q, cache, out=out)  # noqa: E731
    sdpa = lambda: F.scaled_dot_product_attention(q.unsqueeze(2), k, v, enable_gqa=True)  # noqa: E731
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        raw()
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        raw()
    result = {}
    for name, fn in (("raw op", raw), ("pa_lab.paged_attention", wrapper), ("SDPA (default backend)", sdpa),
                     ("CUDA graph replay", graph.replay)):
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000 * n)  # ~ n x 100 us of GPU work queued first
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        result[name] = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--shapes", default=None, metavar="S,H,KV,CTX,HS;...",
                    help=f"shapes to time, each {SHAPE_FIELDS}, ';' between them (default: "
                         + ";".join(",".join(map(str, s)) for s in SHAPES) + ")")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.iters < 1:
        ap.error(f"--iters {args.iters} (accepted: 1 or more)")
    try:
        shapes = SHAPES if args.shapes is None else parse_shapes(args.shapes)
    except ValueError as e:
        ap.error(f"--shapes: {e}")
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    tol = pair_tolerance(*pa_lab.tolerance(dtype)[:2])
    name = torch.cuda.get_device_name()
    gbps = copy_gbps()
    print(f"GPU: {name}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"D2D copy {gbps:.0f} GB/s (read + write)")
    rows = [bench_shape(s, dtype, args.iters, gbps, tol) for s in shapes]
    host = host_cost_per_call()
    print(f"| shape (seqs, heads, kv heads, context, head) | pa_lab op (stage 8) | SDPA cuDNN | SDPA flash |")
    print("|---|---|---|---|")
    for r in rows:
        cells = []
        for key in ("pa_lab", "sdpa_cudnn", "sdpa_flash"):
            us = r[f"{key}_us"]
            cells.append(f"{us:.1f} us ({r[f'{key}_pct_copy']:.1f}%)" if r[f"{key}_status"] == "ok"
                         else r[f"{key}_status"])
        print(f"| {', '.join(map(str, r['shape']))} | " + " | ".join(cells) + " |")
    print("host time per call (us), GPU busy: " + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    differ = [(r["shape"], b) for r in rows for b in ("cudnn", "flash") if r.get(f"xcheck_vs_{b}") == "fail"]
    op_failed = [r["shape"] for r in rows if r["pa_lab_status"].startswith("error")]
    if args.json:
        # Written to a temporary file, then renamed: a failed run never leaves half a file.
        with open(args.json + ".tmp", "w") as f:
            json.dump({"gpu": name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "dtype": args.dtype, "kv_layout": "contiguous", "iters": args.iters, "copy_gbps": gbps,
                       "xcheck_tolerance": {"abs": tol[0], "rel": tol[1],
                                            "rule": "|pa_lab - sdpa| <= abs + rel |sdpa|, every element"},
                       "rows": rows, "host_us_per_call": host}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)
    if differ:
        print("bench_vs_sdpa.py: outputs differ from pa_lab's beyond the tolerance (abs %.3g, rel %.3g): %s"
              % (tol[0], tol[1], ", ".join(f"{b} at {s}" for s, b in differ)), file=sys.stderr)
    if op_failed:
        print("bench_vs_sdpa.py: the op raised at " + ", ".join(map(str, op_failed)), file=sys.stderr)
    return 1 if differ or op_failed else 0


if __name__ == "__main__":
    sys.exit(main())
