"""pa_lab: the paged-attention lab's decode kernels as PyTorch operators.

    import pa_lab
    cache = pa_lab.paged_kv_cache(keys, values, block_size=16)   # vLLM's layout
    out = pa_lab.paged_attention(query, cache)                   # stage 8

The operators are registered by the compiled library (python/csrc/ops.cpp) in
torch.ops.pa_lab; these functions are thin wrappers that allocate the output
and fill in defaults:
  paged_attention    decode over a paged cache, vLLM's paged_attention_v1
                     argument list plus the stage: "v1" (stage 5), "v2"
                     (stage 6) or "optimized" (stage 8, the default); the
                     cache in the query's dtype (kv_cache_dtype "auto") or
                     fp8 (vLLM's "fp8" = "fp8_e4m3", "fp8_e5m2": uint8 codes,
                     element = float(code) * k_scale / v_scale), all three stages;
  cascade_attention  stage 7: sequences that share their first
                     shared_prefix_len tokens (the same physical blocks);
                     caches in the query's dtype only (no fp8);
  merge_attn_states  two attention states (float32 outputs, natural-log lse
                     [num_seqs, num_heads]) merged into one;
  describe_plan      what paged_attention would run for a query and cache, in
                     words (stage 8: the split, head tiles, occupancy),
                     planned as the op plans, without launching.
Both attention ops take the host's copy of seq_lens (cache.seq_lens_cpu,
filled by paged_kv_cache), with which stage 8 plans its split on each
sequence's own length rather than every one at max_seq_len; it is read on
the host while planning, so it costs no synchronization and never changes
the result, only the split.
Bad arguments raise ValueError (a wrong size, stride, device or value) or
TypeError (a wrong dtype), naming the argument and what is accepted; with
every tensor on the CPU no CUDA kernel is registered, and PyTorch's dispatcher
raises NotImplementedError. Each
kernel runs on PyTorch's current CUDA stream; torch.compile traces through
the ops (pa_lab/_fake.py) and CUDA graphs capture them.

The raw op takes k_scale and v_scale as one-element float32 tensors, as vLLM
passes them. With an fp8 kv_cache_dtype it reads them on the host (the
kernels take the scales as launch arguments): for a CUDA tensor that read is
a device synchronization, and inside CUDA graph capture it fails; CPU tensors
(what these wrappers pass) cost nothing. With "auto" they are not read.
"""
from typing import Optional, Tuple

import torch

from ._library import load as _load

LIBRARY = _load()
from . import _fake  # noqa: E402,F401  (registers the fake implementations)
from .paged import KV_CACHE_DTYPES, PagedCache, paged_kv_cache  # noqa: E402

ops = torch.ops.pa_lab

__all__ = ["LIBRARY", "KV_CACHE_DTYPES", "PagedCache", "paged_kv_cache", "paged_attention", "cascade_attention",
           "merge_attn_states", "describe_plan", "tolerance", "built", "ops"]


def _scale_tensor(scale: float) -> torch.Tensor:
    # vLLM's k_scale / v_scale: one-element float32 tensors. On the CPU: the op
    # reads an fp8 cache's scales on the host, which for a CUDA tensor would be
    # a device synchronization (and is refused inside CUDA graph capture); for
    # kv_cache_dtype "auto" they are not read.
    return torch.tensor([scale], dtype=torch.float32)


def paged_attention(query: torch.Tensor, cache: PagedCache, *, scale: Optional[float] = None,
                    stage: str = "optimized", alibi_slopes: Optional[torch.Tensor] = None,
                    out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Decode attention of query [num_seqs, num_heads, head_size] over `cache`.

    alibi_slopes (float32 [num_heads] on the query's device, optional) adds
    ALiBi's bias slope * (t - seq_len + 1) to the logit of token t.
    scale defaults to 1/sqrt(head_size); out (the query's dtype and shape,
    contiguous) is allocated when not given. Returns out. The sequence
    lengths must not exceed cache.max_seq_len (not checked: reading them would
    synchronize with the GPU; a longer one overruns stage 6's partition buffers).
    cache.seq_lens_cpu, the host's copy of the lengths (None: not known), is
    what stage 8's split planner replays; each value is checked to lie in 1 to
    max_seq_len (ValueError). It must equal cache.seq_lens for the best split;
    a copy that differs costs speed, not correctness.

    An fp8 cache (paged_kv_cache(..., kv_cache_dtype="fp8_e4m3" or "fp8_e5m2"):
    uint8 codes, x = 16) is read by every stage with cache.k_scale and
    cache.v_scale (passed to the op as CPU tensors: no device synchronization,
    and CUDA graphs capture the call with those scales fixed); it needs fp16 or
    bf16 queries, and stage "optimized" blocks of 16 or 32 tokens.
    """
    if scale is None:
        scale = query.shape[-1] ** -0.5
    if out is None:
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
    ops.paged_attention(out, query, cache.key_cache, cache.value_cache, cache.key_cache.shape[1], scale,
                        cache.block_tables, cache.seq_lens, cache.block_size, cache.max_seq_len, alibi_slopes,
                        cache.kv_cache_dtype, _scale_tensor(cache.k_scale), _scale_tensor(cache.v_scale), stage,
                        cache.seq_lens_cpu)
    return out


def describe_plan(query: torch.Tensor, cache: PagedCache, *, stage: str = "optimized") -> str:
    """What paged_attention(query, cache, stage=stage) would run, in words, planned as the op
    plans (the same checks and planner) without launching: for stage 8 its split
    ("splits=13 split_blocks=...": CTAs along each sequence), head tiles, pipeline and
    occupancy, and the device facts the planner used; for stage 6 its partitions; empty for
    v1. With cache.seq_lens_cpu None every sequence is planned at max_seq_len
    (dataclasses.replace(cache, seq_lens_cpu=None) shows that plan)."""
    return ops.describe_plan(query, cache.key_cache, cache.value_cache, cache.key_cache.shape[1], cache.block_tables,
                             cache.seq_lens, cache.block_size, cache.max_seq_len, cache.kv_cache_dtype,
                             _scale_tensor(cache.k_scale), _scale_tensor(cache.v_scale), stage, cache.seq_lens_cpu)


def cascade_attention(query: torch.Tensor, cache: PagedCache, shared_prefix_len: int, *,
                      scale: Optional[float] = None, alibi_slopes: Optional[torch.Tensor] = None,
                      out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Stage 7: like paged_attention, for sequences whose first shared_prefix_len
    tokens are the same physical blocks (paged_kv_cache(..., shared_prefix_len=P)).
    alibi_slopes as for paged_attention (each sequence's prefix gets the bias of
    its place in that sequence).
    That the tables share those blocks is the caller's promise (checking it
    would read the tables on the host). The cache must hold the query's dtype:
    stage 7 takes no fp8 cache (ValueError; paged_attention's stages do)."""
    if cache.kv_cache_dtype != "auto":
        raise ValueError(f"cache.kv_cache_dtype {cache.kv_cache_dtype!r}: cascade_attention (stage 7) takes no fp8 "
                         "cache; accepted: 'auto' (the query's dtype); paged_attention's stages 'v1', 'v2' and "
                         "'optimized' take fp8 caches")
    if scale is None:
        scale = query.shape[-1] ** -0.5
    if out is None:
        out = torch.empty(query.shape, dtype=query.dtype, device=query.device)
    ops.cascade_attention(out, query, cache.key_cache, cache.value_cache, cache.key_cache.shape[1], scale,
                          cache.block_tables, cache.seq_lens, cache.block_size, cache.max_seq_len,
                          shared_prefix_len, alibi_slopes, cache.seq_lens_cpu)
    return out


def merge_attn_states(prefix_output: torch.Tensor, prefix_lse: torch.Tensor, suffix_output: torch.Tensor,
                      suffix_lse: torch.Tensor, dtype: torch.dtype = torch.float32
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    """The state over the union of two disjoint token sets: outputs float32
    [num_seqs, num_heads, head_size], lse float32 [num_seqs, num_heads] (natural
    log; -inf for an empty set). Returns (output in `dtype`, lse)."""
    output = torch.empty(prefix_output.shape, dtype=dtype, device=prefix_output.device)
    lse = torch.empty(prefix_lse.shape, dtype=torch.float32, device=prefix_lse.device)
    ops.merge_attn_states(output, lse, prefix_output, prefix_lse, suffix_output, suffix_lse)
    return output, lse


def tolerance(dtype: torch.dtype) -> Tuple[float, float, float]:
    """The lab's one tolerance for an output stored in dtype (pa/core/tolerance.hpp):
    (abs, rel) of |got - ref| <= abs + rel |ref|, and the absolute tolerance of an lse."""
    a, r, lse = ops.tolerance(_dtype_name(dtype))
    return a, r, lse


def built(stage: str, dtype: torch.dtype, head_size: int, block_size: int, kv_cache_dtype: str = "auto") -> bool:
    """Whether this build holds the stage's kernel for the configuration: query dtype, head size,
    block size and the cache's kv_cache_dtype ("auto": the query's dtype; "fp8", "fp8_e4m3",
    "fp8_e5m2": with fp16 or bf16 queries)."""
    return ops.built(stage, _dtype_name(dtype), head_size, block_size, kv_cache_dtype)


def _dtype_name(dtype: torch.dtype) -> str:
    names = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
    if dtype not in names:
        raise TypeError(f"dtype {dtype}; accepted: torch.float16, torch.bfloat16, torch.float32")
    return names[dtype]
