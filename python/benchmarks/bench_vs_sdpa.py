"""The lab's op (stage 8) against PyTorch's SDPA, cuDNN and flash backends, on the README's decode shapes.

    PA_LAB_LIBRARY=build/python/libpa_lab_torch.so PYTHONPATH=python \
        python3 python/benchmarks/bench_vs_sdpa.py --json out.json

Each shape is (sequences, query heads, KV heads, context, head size), one
query token per sequence, fp16 (--dtype bf16 for bf16). The op reads a paged
cache (shuffled 16-token blocks); SDPA reads the same keys and values
contiguous, [sequences, KV heads, context, head size], with enable_gqa. Both
are timed the same way: CUDA-event pairs around single calls, a GPU
busy-wait (torch.cuda._sleep) before each so the host's enqueueing is not
timed, and the inputs rotated over copies that together exceed 1 GiB so that
no call finds its KV in L2; the median of --iters calls. GB/s counts the KV
bytes read (every token's K and V once) and the device-to-device copy's
bandwidth is measured in the same run ((read + write) / time).

Then the binding's cost on the host: the time per call of a loop of calls
that the GPU outruns (the GPU first busy for longer than the loop), for the
raw op, the Python wrapper, SDPA, and the replay of a CUDA graph holding one
call.
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import pa_lab

SHAPES = [(1, 32, 8, 4096, 128), (8, 32, 8, 4096, 128), (32, 32, 8, 4096, 128), (64, 32, 8, 8192, 128),
          (128, 32, 32, 1024, 128), (256, 32, 8, 2048, 128), (16, 64, 8, 32768, 128), (1, 32, 8, 131072, 128)]
SLEEP_CYCLES = 100_000  # about 50 us at H100/H200 clocks


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


def bench_shape(shape, dtype, iters, gbps_copy):
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
    row["pa_lab_us"] = time_calls(lambda r: pa_lab.paged_attention(queries[r], caches[r], out=out), rot, iters)
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                def sdpa(r):
                    q = queries[r].unsqueeze(2)  # [seqs, heads, 1, hs]
                    return F.scaled_dot_product_attention(q, contig[r][0], contig[r][1], enable_gqa=True)
                ref = sdpa(0)
                torch.cuda.synchronize()
                row[f"sdpa_{name}_us"] = time_calls(sdpa, rot, iters)
                got = pa_lab.paged_attention(queries[0], caches[0])
                row[f"max_abs_vs_{name}"] = (got.float() - ref[:, :, 0].float()).abs().max().item()
        except RuntimeError as e:
            row[f"sdpa_{name}_us"] = None
            row[f"sdpa_{name}_error"] = str(e).splitlines()[0][:160]
    for key in ("pa_lab", "sdpa_cudnn", "sdpa_flash"):
        us = row.get(f"{key}_us")
        row[f"{key}_pct_copy"] = None if us is None else 100 * kv_bytes / (us * 1e-6) / 1e9 / gbps_copy
    del caches, contig
    torch.cuda.empty_cache()
    return row


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
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    name = torch.cuda.get_device_name()
    gbps = copy_gbps()
    print(f"GPU: {name}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"D2D copy {gbps:.0f} GB/s (read + write)")
    rows = [bench_shape(s, dtype, args.iters, gbps) for s in SHAPES]
    host = host_cost_per_call()
    print(f"| shape (seqs, heads, kv heads, context), head 128 | pa_lab op (stage 8) | SDPA cuDNN | SDPA flash |")
    print("|---|---|---|---|")
    for r in rows:
        cells = []
        for key in ("pa_lab", "sdpa_cudnn", "sdpa_flash"):
            us = r[f"{key}_us"]
            cells.append("n/a" if us is None else f"{us:.1f} us ({r[f'{key}_pct_copy']:.1f}%)")
        print(f"| {', '.join(map(str, r['shape'][:4]))} | " + " | ".join(cells) + " |")
    print("host time per call (us), GPU busy: " + ", ".join(f"{k} {v:.1f}" for k, v in host.items()))
    if args.json:
        with open(args.json + ".tmp", "w") as f:
            json.dump({"gpu": name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                       "dtype": args.dtype, "copy_gbps": gbps, "rows": rows, "host_us_per_call": host}, f, indent=1)
        import os
        os.replace(args.json + ".tmp", args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
