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
"""
from dataclasses import dataclass
from typing import List, Optional

import torch


@dataclass
class PagedCache:
    key_cache: torch.Tensor
    value_cache: torch.Tensor
    block_tables: torch.Tensor  # int32 [num_seqs, max_blocks_per_seq]
    seq_lens: torch.Tensor      # int32 [num_seqs]
    max_seq_len: int
    block_size: int


def paged_kv_cache(keys: List[torch.Tensor], values: List[torch.Tensor], block_size: int, *,
                   shared_prefix_len: int = 0, spare_blocks: int = 0, shuffle: bool = True,
                   generator: Optional[torch.Generator] = None,
                   tail_value: float = float("nan")) -> PagedCache:
    """keys[i], values[i]: sequence i's [num_kv_heads, seq_len_i, head_size].

    shared_prefix_len > 0 (a multiple of block_size): the first
    shared_prefix_len tokens of every sequence are stored once, from sequence
    0, and every sequence's table points at those blocks (the cascade's
    case; the other sequences' first tokens are not read, so they should be
    equal to sequence 0's). spare_blocks: extra physical blocks no table
    points at, filled with tail_value.
    """
    if len(keys) != len(values) or not keys:
        raise ValueError(f"keys and values: {len(keys)} and {len(values)} sequences; accepted: the same number, >= 1")
    if block_size < 1:
        raise ValueError(f"block_size {block_size}; accepted: >= 1")
    if shared_prefix_len < 0 or shared_prefix_len % block_size:
        raise ValueError(f"shared_prefix_len {shared_prefix_len}; accepted: >= 0, a multiple of block_size {block_size}")
    if spare_blocks < 0:
        raise ValueError(f"spare_blocks {spare_blocks}; accepted: >= 0")
    for i, (k, v) in enumerate(zip(keys, values)):
        if k.dim() != 3 or k.shape != v.shape or k.shape[0] != keys[0].shape[0] or k.shape[2] != keys[0].shape[2] \
                or k.dtype != keys[0].dtype or v.dtype != k.dtype:
            raise ValueError(f"sequence {i}: keys {tuple(k.shape)} {k.dtype}, values {tuple(v.shape)} {v.dtype}; "
                             "accepted: both [num_kv_heads, seq_len, head_size], one dtype, the heads and head "
                             "size of sequence 0")
    k0 = keys[0]
    kv_heads, head_size = k0.shape[0], k0.shape[2]
    x = 16 // k0.element_size()
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
    return PagedCache(key_cache, value_cache, tables.to(dev), torch.tensor(lens, dtype=torch.int32, device=dev),
                      max(lens), block_size)
