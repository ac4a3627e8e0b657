"""Fake (meta) implementations: what each op does to shapes, without running.

torch.compile traces a model with fake tensors (shapes, dtypes and devices,
no data); an operator it cannot see into needs one of these to be traced
through. The lab's ops write into tensors the caller passes (`out`), return
nothing and change no shape, so each fake only checks what a shape can tell
and returns None; the real checks run in the CUDA implementation. The fake
of paged_attention accepts every kv_cache_dtype the op does ("auto", "fp8",
"fp8_e4m3", "fp8_e5m2"; an fp8 cache is uint8 or float8 codes, x = 16) and
never reads k_scale / v_scale (a fake tensor has no values; the CUDA
implementation reads them).
"""
import torch


@torch.library.register_fake("pa_lab::paged_attention")
def _paged_attention_fake(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens,
                          block_size, max_seq_len, alibi_slopes, kv_cache_dtype, k_scale, v_scale,
                          stage="optimized", seq_lens_cpu=None):
    torch._check(out.shape == query.shape, lambda: "out: the query's shape")
    return None


@torch.library.register_fake("pa_lab::cascade_attention")
def _cascade_attention_fake(out, query, key_cache, value_cache, num_kv_heads, scale, block_tables, seq_lens,
                            block_size, max_seq_len, shared_prefix_len, alibi_slopes=None, seq_lens_cpu=None):
    torch._check(out.shape == query.shape, lambda: "out: the query's shape")
    return None


@torch.library.register_fake("pa_lab::merge_attn_states")
def _merge_attn_states_fake(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse):
    torch._check(output.shape == prefix_output.shape, lambda: "output: the states' shape")
    return None
