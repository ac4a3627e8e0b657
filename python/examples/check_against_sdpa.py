"""A contiguous KV cache made paged, decoded by the lab's kernels, checked against PyTorch's SDPA.

    PA_LAB_LIBRARY=build/python/libpa_lab_torch.so PYTHONPATH=python python3 python/examples/check_against_sdpa.py

Three sequences of different lengths, grouped-query attention (32 query
heads over 8 KV heads), fp16. Their keys and values start contiguous,
[num_kv_heads, seq_len, head_size] each, as a model produces them; the paged
cache stores them in shuffled 16-token blocks (pa_lab.paged_kv_cache). Stages 5
(v1), 6 (v2) and 8 (optimized), the three the op offers, decode the same
queries; SDPA over the contiguous tensors is the reference.
"""
import sys

import torch
import torch.nn.functional as F

import pa_lab


def main() -> int:
    torch.manual_seed(0)
    dtype, heads, kv_heads, head_size, lens = torch.float16, 32, 8, 128, [7, 300, 2049]
    keys = [torch.randn(kv_heads, n, head_size, device="cuda", dtype=dtype) for n in lens]
    values = [torch.randn(kv_heads, n, head_size, device="cuda", dtype=dtype) for n in lens]
    query = torch.randn(len(lens), heads, head_size, device="cuda", dtype=dtype)

    cache = pa_lab.paged_kv_cache(keys, values, block_size=16)
    print(f"paged cache: {cache.key_cache.shape[0]} blocks of 16 tokens; sequence 1's table starts "
          f"{cache.block_tables[1, :6].tolist()}")

    ref = torch.stack([
        F.scaled_dot_product_attention(query[i][None, :, None].float(), k[None].float(), v[None].float(),
                                       enable_gqa=True)[0, :, 0]
        for i, (k, v) in enumerate(zip(keys, values))])
    abs_tol, rel_tol, _ = pa_lab.tolerance(dtype)
    failures = 0
    for stage in ("v1", "v2", "optimized"):
        if not pa_lab.built(stage, dtype, head_size, 16):
            print(f"{stage:>9}: not in this build")
            continue
        out = pa_lab.paged_attention(query, cache, stage=stage)
        err = (out.float() - ref).abs()
        ok = bool((err <= abs_tol + rel_tol * ref.abs()).all())
        failures += not ok
        print(f"{stage:>9}: max |out - SDPA| = {err.max().item():.2e}  {'ok' if ok else 'FAIL'}")
    if pa_lab.built("optimized", dtype, head_size, 16):
        # What stage 8 planned: with the host's copy of the lengths (cache.seq_lens_cpu) its split
        # planner replays each sequence's own tokens; without, every sequence at the longest.
        print(f"stage 8's plan: {pa_lab.describe_plan(query, cache)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
