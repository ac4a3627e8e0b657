"""A contiguous KV cache turned into vLLM's paged layout, the one the lab's kernels read.

Each sequence's keys and values, [num_kv_heads, seq_len, head_size], are cut
into blocks of block_size tokens and stored in physical blocks of a pool:
  key_cache   [num_blocks, num_kv_heads, head_size / x, block_size, x]
              (x = 16 bytes / element size: one 16-byte vector per (token, x dims))
  value_cache [num_blocks, num_kv_heads, head_size, block_size]
  block_tables[seq, b] = the physical block of the sequence's logical block b
                         (-1 past its last block).
With shuffle (the default) the physical blocks are a random permutation, so
a kernel that ignores the table reads the wrong tokens; the unused slots of
each last block hold NaN (tail_value), so a kernel that does not mask them
returns NaN.

An fp8 cache (kv_cache_dtype "fp8" = "fp8_e4m3", or "fp8_e5m2", vLLM's names)
stores one byte per element, as vLLM does: torch.uint8 codes, x = 16, each
element x stored as fp8(x / scale) (torch.float8_e4m3fn / torch.float8_e5m2,
round to nearest even) with one scale for K and one for V, and read back by
the kernels as float(code) * scale. The queries and the output keep their
fp16 / bf16 dtype.
"""
import math
from dataclasses import dataclass
from typing import List, Optional

import torch

# vLLM's kv_cache_dtype names of an fp8 cache and the torch dtype of its codes
# ("fp8" is e4m3, as in vLLM); "auto" is a cache in the keys' own dtype.
FP8_KV_CACHE_DTYPES = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
KV_CACHE_DTYPES = ("auto",) + tuple(FP8_KV_CACHE_DTYPES)


@dataclass
class PagedCache:
    key_cache: torch.Tensor     # the keys' dtype, or torch.uint8 fp8 codes (x = 16)
    value_cache: torch.Tensor   # the keys' dtype, or torch.uint8 fp8 codes
    block_tables: torch.Tensor  # int32 [num_seqs, max_blocks_per_seq]
    seq_lens: torch.Tensor      # int32 [num_seqs]
    max_seq_len: int
    block_size: int
    kv_cache_dtype: str = "auto"  # "auto", or the fp8 format of the codes (KV_CACHE_DTYPES)
    k_scale: float = 1.0          # fp8: element = float(code) * scale (float32 values); 1.0 for "auto"
    v_scale: float = 1.0
    # The host's copy of seq_lens (CPU int32 [num_seqs]), as vLLM's attention
    # metadata keeps one: the ops plan stage 8's split (and the cascade's
    # suffix) on each sequence's own length. None: every sequence is planned
    # at max_seq_len. Only the plan reads it, so it changes speed, not results.
    seq_lens_cpu: Optional[torch.Tensor] = None


def paged_kv_cache(keys: List[torch.Tensor], values: List[torch.Tensor], block_size: int, *,
                   shared_prefix_len: int = 0, spare_blocks: int = 0, shuffle: bool = True,
                   generator: Optional[torch.Generator] = None,
                   tail_value: float = float("nan"), kv_cache_dtype: str = "auto",
                   k_scale: Optional[float] = None, v_scale: Optional[float] = None) -> PagedCache:
    """keys[i], values[i]: sequence i's [num_kv_heads, seq_len_i, head_size].

    shared_prefix_len > 0 (a multiple of block_size): the first
    shared_prefix_len tokens of every sequence are stored once, from sequence
    0, and every sequence's table points at those blocks (the cascade's
    case; the other sequences' first tokens are not read, so they should be
    equal to sequence 0's). spare_blocks: extra physical blocks no table
    points at, filled with tail_value.

    kv_cache_dtype "auto" (the default): the cache holds the keys' dtype and
    k_scale / v_scale must be None. "fp8", "fp8_e4m3" or "fp8_e5m2": the cache
    holds torch.uint8 codes of (x / scale) in that format, x = 16 (head_size a
    multiple of 16); k_scale / v_scale (finite, > 0) default to the scale that
    maps the largest |K| (|V|) of the sequences onto the format's largest
    finite value (448 for e4m3, 57344 for e5m2). The scales are kept rounded
    to float32, as the kernels read them. A NaN tail_value stays NaN (a NaN
    code); the format has no room for much else beyond its range (torch's
    conversion gives NaN or inf there).
    """
    if len(keys) != len(values) or not keys:
        raise ValueError(f"keys and values: {len(keys)} and {len(values)} sequences; accepted: the same number, >= 1")
    if block_size < 1:
        raise ValueError(f"block_size {block_size}; accepted: >= 1")
    if shared_prefix_len < 0 or shared_prefix_len % block_size:
        raise ValueError(f"shared_prefix_len {shared_prefix_len}; accepted: >= 0, a multiple of block_size {block_size}")
    if spare_blocks < 0:
        raise ValueError(f"spare_blocks {spare_blocks}; accepted: >= 0")
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"kv_cache_dtype {kv_cache_dtype!r}; accepted: " + ", ".join(KV_CACHE_DTYPES))
    fp8 = FP8_KV_CACHE_DTYPES.get(kv_cache_dtype)
    if fp8 is None and (k_scale is not None or v_scale is not None):
        raise ValueError(f"k_scale {k_scale}, v_scale {v_scale} with kv_cache_dtype 'auto'; accepted: None "
                         "(scales belong to an fp8 cache)")
    for i, (k, v) in enumerate(zip(keys, values)):
        if k.dim() != 3 or k.shape != v.shape or k.shape[0] != keys[0].shape[0] or k.shape[2] != keys[0].shape[2] \
                or k.dtype != keys[0].dtype or v.dtype != k.dtype:
            raise ValueError(f"sequence {i}: keys {tuple(k.shape)} {k.dtype}, values {tuple(v.shape)} {v.dtype}; "
                             "accepted: both [num_kv_heads, seq_len, head_size], one dtype, the heads and head "
                             "size of sequence 0")
    k0 = keys[0]
    kv_heads, head_size = k0.shape[0], k0.shape[2]
    x = 16 if fp8 is not None else 16 // k0.element_size()  # an fp8 code is one byte
    if fp8 is not None and head_size % x:
        raise ValueError(f"head_size {head_size} with kv_cache_dtype {kv_cache_dtype!r}; accepted: a multiple of 16")
    lens = [k.shape[1] for k in keys]
    if min(lens) < max(1, shared_prefix_len):
        raise ValueError(f"sequence lengths {lens}; accepted: each >= 1 and >= shared_prefix_len {shared_prefix_len}")
    nb = [-(-n // block_size) for n in lens]
    prefix_blocks = shared_prefix_len // block_size
    needed = prefix_blocks + sum(b - prefix_blocks for b in nb)
    num_blocks = needed + spare_blocks
    perm = (torch.randperm(num_blocks, generator=generator) if shuffle else torch.arange(num_blocks)).tolist()
    dev, dt = k0.device, k0.dtype
    key_cache = torch.full((num_blocks, kv_heads, head_size // x, block_size, x), tail_value, dtype=dt, device=dev)
    value_cache = torch.full((num_blocks, kv_heads, head_size, block_size), tail_value, dtype=dt, device=dev)
    tables = torch.full((len(keys), max(nb)), -1, dtype=torch.int32)
    prefix_phys = perm[:prefix_blocks]
    nxt = prefix_blocks
    for i, (k, v) in enumerate(zip(keys, values)):
        first = 0 if i == 0 else prefix_blocks  # blocks this sequence stores itself
        phys = prefix_phys[:min(prefix_blocks, nb[i])] + perm[nxt:nxt + nb[i] - prefix_blocks]
        nxt += nb[i] - prefix_blocks
        tables[i, :nb[i]] = torch.tensor(phys, dtype=torch.int32)
        pad = nb[i] * block_size - lens[i]
        kp = torch.nn.functional.pad(k, (0, 0, 0, pad), value=tail_value)  # [kv, nb*bs, hs]
        vp = torch.nn.functional.pad(v, (0, 0, 0, pad), value=tail_value)
        kb = kp.reshape(kv_heads, nb[i], block_size, head_size // x, x).permute(1, 0, 3, 2, 4)
        vb = vp.reshape(kv_heads, nb[i], block_size, head_size).permute(1, 0, 3, 2)
        idx = torch.tensor(phys[first:], dtype=torch.long, device=dev)
        key_cache[idx] = kb[first:].to(dt)
        value_cache[idx] = vb[first:].to(dt)
    seq_lens_cpu = torch.tensor(lens, dtype=torch.int32)
    seq_lens = seq_lens_cpu.to(dev)
    if fp8 is None:
        return PagedCache(key_cache, value_cache, tables.to(dev), seq_lens, max(lens), block_size,
                          seq_lens_cpu=seq_lens_cpu)
    ks = _fp8_scale("k_scale", k_scale, keys, fp8)
    vs = _fp8_scale("v_scale", v_scale, values, fp8)
    return PagedCache(_fp8_codes(key_cache, fp8, ks), _fp8_codes(value_cache, fp8, vs), tables.to(dev), seq_lens,
                      max(lens), block_size, kv_cache_dtype, ks, vs, seq_lens_cpu)


def _fp8_codes(x: torch.Tensor, fp8: torch.dtype, scale: float) -> torch.Tensor:
    """vLLM's fp8 store: fp8(x / scale), computed in float32, as torch.uint8 codes."""
    return (x.float() / torch.tensor(scale, dtype=torch.float32, device=x.device)).to(fp8).view(torch.uint8)


def _fp8_scale(name: str, given: Optional[float], xs: List[torch.Tensor], fp8: torch.dtype) -> float:
    """The scale given (finite, > 0), or the one mapping max |x| onto the format's largest finite value;
    rounded to float32, the precision the kernels read it in."""
    if given is not None:
        if not (math.isfinite(given) and given > 0):
            raise ValueError(f"{name} {given}; accepted: finite and > 0, or None for the scale chosen from the data")
        scale = float(given)
    else:
        amax = max(float(x.abs().max()) if x.numel() else 0.0 for x in xs)
        if not math.isfinite(amax):
            raise ValueError(f"{name}: the data holds inf or NaN; accepted: finite data, or {name} given")
        scale = amax / torch.finfo(fp8).max if amax > 0 else 1.0
    wanted = scale
    scale = float(torch.tensor(scale, dtype=torch.float32))
    if not scale > 0:  # a positive double below float32's smallest subnormal
        source = "given" if given is not None else "chosen from the data (max |x| / the format's largest value)"
        raise ValueError(f"{name} {wanted!r} ({source}) is 0 in float32; accepted: at least float32's smallest "
                         f"positive value, about 1.4e-45")
    return scale
