"""The lab's PyTorch ops against PyTorch's own attention, on the GPU.

The reference is torch.nn.functional.scaled_dot_product_attention over each
sequence's contiguous keys and values, in float64 on the exact stored values
(the paged cache holds the same dtype values the reference upcasts; an fp8
cache's reference reads its codes back through the block tables as the
kernels do, float32(code) * scale), and the acceptance rule is the lab's one
tolerance per dtype of the output (pa_lab.tolerance, pa/core/tolerance.hpp):
|got - ref| <= abs + rel |ref|, every element.
Configurations this build does not hold (a quick kernel build has block 16
only: head 128, and for stage 8 heads 64 and 256 too) are skipped, saying so.
"""
import dataclasses
import math
import re
import time

import pytest
import torch
import torch.nn.functional as F

import pa_lab

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")

DEV = "cuda"


def make_case(dtype, head_size, block_size, heads, kv_heads, lens, *, seed=0, shared_prefix_len=0,
              spare_blocks=3):
    g = torch.Generator().manual_seed(seed)
    keys, values = [], []
    prefix_k = torch.randn(kv_heads, shared_prefix_len, head_size, generator=g)
    prefix_v = torch.randn(kv_heads, shared_prefix_len, head_size, generator=g)
    for n in lens:
        k = torch.randn(kv_heads, n - shared_prefix_len, head_size, generator=g)
        v = torch.randn(kv_heads, n - shared_prefix_len, head_size, generator=g)
        keys.append(torch.cat([prefix_k, k], 1).to(DEV, dtype))
        values.append(torch.cat([prefix_v, v], 1).to(DEV, dtype))
    query = torch.randn(len(lens), heads, head_size, generator=g).to(DEV, dtype)
    cache = pa_lab.paged_kv_cache(keys, values, block_size, shared_prefix_len=shared_prefix_len,
                                  spare_blocks=spare_blocks, generator=g)
    return query, keys, values, cache


def reference(query, keys, values, scale=None, alibi_slopes=None):
    outs = []
    for i, (k, v) in enumerate(zip(keys, values)):
        q = query[i].double()[None, :, None, :]  # [1, heads, 1, head_size]
        bias = None
        if alibi_slopes is not None:  # ALiBi as SDPA's additive mask: slope * (t - n + 1), [1, heads, 1, n]
            n = k.shape[1]
            pos = torch.arange(n, device=DEV, dtype=torch.float64) - (n - 1)
            bias = (alibi_slopes.double()[:, None] * pos[None, :])[None, :, None, :]
        o = F.scaled_dot_product_attention(q, k.double()[None], v.double()[None], attn_mask=bias, scale=scale,
                                           enable_gqa=True)
        outs.append(o[0, :, 0])
    return torch.stack(outs)


def assert_close(got, ref, dtype):
    a, r, _ = pa_lab.tolerance(dtype)
    got = got.double()
    assert not torch.isnan(got).any(), "NaN in the output"
    err = (got - ref).abs()
    bound = a + r * ref.abs()
    worst = (err - bound).max().item()
    assert worst <= 0, f"max |got - ref| {err.max().item():.3g} exceeds the tolerance (abs {a}, rel {r})"


def require_built(stage, dtype, head_size, block_size, kv_cache_dtype="auto"):
    if not pa_lab.built(stage, dtype, head_size, block_size, kv_cache_dtype):
        pytest.skip(f"{stage} {dtype} head {head_size} block {block_size} kv_cache_dtype {kv_cache_dtype}: "
                    "not in this build")


# Sampled like the C++ suites: every stage x dtype x head size x block size,
# GQA ratio and lengths varying with the case.
STAGE_DTYPES = [(s, d) for s in ("v1", "v2", "optimized") for d in (torch.float16, torch.bfloat16, torch.float32)
                if not (s == "optimized" and d == torch.float32)]
GQA = [(8, 8), (8, 2), (8, 1), (16, 4)]
LENS = [[1, 17, 100, 1000], [16, 33, 512], [700], [1, 1, 2048, 5]]


@pytest.mark.parametrize("stage,dtype", STAGE_DTYPES)
@pytest.mark.parametrize("head_size", [64, 128, 256])
@pytest.mark.parametrize("block_size", [16, 32])
def test_matches_sdpa(stage, dtype, head_size, block_size):
    require_built(stage, dtype, head_size, block_size)
    # Mixed so that every stage x dtype meets every GQA ratio and length set
    # across the head and block sizes.
    k = 7 * STAGE_DTYPES.index((stage, dtype)) + 3 * (head_size // 64) + block_size // 16
    heads, kv_heads = GQA[k % len(GQA)]
    lens = LENS[k % len(LENS)]
    query, keys, values, cache = make_case(dtype, head_size, block_size, heads, kv_heads, lens, seed=k)
    out = pa_lab.paged_attention(query, cache, stage=stage)
    assert_close(out, reference(query, keys, values), dtype)


@pytest.mark.parametrize("stage", ["v1", "v2", "optimized"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_alibi_matches_sdpa_with_the_bias(stage, dtype):
    require_built(stage, dtype, 128, 16)
    heads, kv_heads = 16, 4
    query, keys, values, cache = make_case(dtype, 128, 16, heads, kv_heads, [1, 17, 600, 2100], seed=31)
    # The paper's slopes for 16 heads (2^-0.5 .. 2^-8), then slopes so steep
    # that the last token takes nearly all the weight.
    paper = torch.tensor([2.0 ** (-0.5 * (h + 1)) for h in range(heads)], dtype=torch.float32, device=DEV)
    checked = 0
    for slopes in (paper, torch.full((heads,), 30.0, device=DEV)):
        out = pa_lab.paged_attention(query, cache, stage=stage, alibi_slopes=slopes)
        assert_close(out, reference(query, keys, values, alibi_slopes=slopes), dtype)
        checked += 1
    assert checked == 2


@pytest.mark.parametrize("stage", ["v2", "optimized"])
def test_long_ragged_contexts(stage):
    require_built(stage, torch.float16, 128, 16)
    query, keys, values, cache = make_case(torch.float16, 128, 16, 32, 8, [1, 4097, 20000, 513], seed=7)
    assert_close(pa_lab.paged_attention(query, cache, stage=stage), reference(query, keys, values), torch.float16)


def test_padded_query_rows_and_explicit_scale():
    require_built("optimized", torch.bfloat16, 128, 16)
    query, keys, values, cache = make_case(torch.bfloat16, 128, 16, 8, 2, [5, 300], seed=3)
    padded = torch.full((2, 8 * 128 + 64), float("nan"), dtype=torch.bfloat16, device=DEV)
    padded[:, :8 * 128] = query.reshape(2, -1)
    q = padded[:, :8 * 128].view(2, 8, 128)  # row stride 8*128 + 64
    assert q.stride(0) == 8 * 128 + 64
    out = pa_lab.paged_attention(q, cache, scale=0.05)
    assert_close(out, reference(query, keys, values, scale=0.05), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cascade_with_shared_blocks(dtype):
    require_built("optimized", dtype, 128, 16)
    lens = [256 + n for n in (1, 17, 100, 64, 3)]
    query, keys, values, cache = make_case(dtype, 128, 16, 8, 8, lens, seed=11, shared_prefix_len=256)
    prefix_blocks = 256 // 16
    assert (cache.block_tables[:, :prefix_blocks] == cache.block_tables[0, :prefix_blocks]).all()
    ref = reference(query, keys, values)
    assert_close(pa_lab.cascade_attention(query, cache, 256), ref, dtype)
    assert_close(pa_lab.paged_attention(query, cache), ref, dtype)  # the shared blocks read once per sequence
    # With ALiBi: the shared prefix's tokens get a different bias in each sequence.
    slopes = torch.tensor([2.0 ** -(h + 1) for h in range(8)], dtype=torch.float32, device=DEV)
    assert_close(pa_lab.cascade_attention(query, cache, 256, alibi_slopes=slopes),
                 reference(query, keys, values, alibi_slopes=slopes), dtype)


def test_merge_attn_states_formula_and_empty_states():
    g = torch.Generator().manual_seed(5)
    ns, nh, hs = 3, 4, 64
    po = torch.randn(ns, nh, hs, generator=g).to(DEV)
    so = torch.randn(ns, nh, hs, generator=g).to(DEV)
    pl = (torch.randn(ns, nh, generator=g) * 3).to(DEV)
    sl = (torch.randn(ns, nh, generator=g) * 3).to(DEV)
    pl[0, 0] = -math.inf   # an empty prefix: the suffix's state
    sl[1, 1] = -math.inf   # an empty suffix
    pl[2, 2] = sl[2, 2] = -math.inf  # both empty: out 0, lse -inf
    po[0, 0] = float("nan")  # an empty state's output is never read
    out, lse = pa_lab.merge_attn_states(po, pl, so, sl, torch.float32)
    m = torch.maximum(pl, sl).double()
    wa = torch.where(pl == -math.inf, 0.0, torch.exp(pl.double() - m))
    wb = torch.where(sl == -math.inf, 0.0, torch.exp(sl.double() - m))
    s = wa + wb
    ref = (wa[..., None] * torch.nan_to_num(po.double()) + wb[..., None] * so.double()) / s.clamp_min(1e-300)[..., None]
    ref[2, 2] = 0
    ref_lse = torch.where(s > 0, m + torch.log(s), torch.tensor(-math.inf, dtype=torch.float64, device=DEV))
    assert_close(out, ref, torch.float32)
    _, _, lse_tol = pa_lab.tolerance(torch.float32)
    finite = torch.isfinite(ref_lse)
    assert (lse[~finite] == -math.inf).all()
    assert ((lse.double() - ref_lse)[finite].abs() <= lse_tol).all()


def test_runs_on_the_current_stream():
    require_built("optimized", torch.float16, 128, 16)
    query, keys, values, cache = make_case(torch.float16, 128, 16, 8, 2, [100, 2000], seed=2)
    new_q = torch.randn(query.shape, generator=torch.Generator().manual_seed(12)).to(DEV, torch.float16)
    side = torch.cuda.Stream()  # PyTorch's streams do not wait for the legacy default stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)  # tens of ms: a launch on another stream would run first
        query.copy_(new_q)
        out = pa_lab.paged_attention(query, cache)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    assert_close(out, reference(new_q, keys, values), torch.float16)


@pytest.mark.parametrize("stage", ["v2", "optimized"])
def test_torch_compile_fullgraph(stage):
    require_built(stage, torch.float16, 128, 16)
    query, keys, values, cache = make_case(torch.float16, 128, 16, 8, 2, [33, 1500], seed=4)

    def decode(q, key_cache, value_cache, block_tables, seq_lens):
        out = torch.empty_like(q)
        one = torch.ones(1, dtype=torch.float32)
        torch.ops.pa_lab.paged_attention(out, q, key_cache, value_cache, key_cache.shape[1], q.shape[-1] ** -0.5,
                                         block_tables, seq_lens, 16, cache.max_seq_len, None, "auto", one, one, stage)
        return out * 2  # something after the op, in the same graph

    compiled = torch.compile(decode, fullgraph=True)
    got = compiled(query, cache.key_cache, cache.value_cache, cache.block_tables, cache.seq_lens)
    assert_close(got / 2, reference(query, keys, values), torch.float16)


@pytest.mark.parametrize("stage", ["v1", "v2", "optimized"])
def test_cuda_graph_capture_and_replay(stage):
    require_built(stage, torch.float16, 128, 16)
    query, keys, values, cache = make_case(torch.float16, 128, 16, 8, 2, [17, 900, 64], seed=9)
    static_q = query.clone()
    out = torch.empty_like(query)
    side = torch.cuda.Stream()  # warm-up off the capturing stream, as PyTorch's docs ask
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pa_lab.paged_attention(static_q, cache, stage=stage, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        pa_lab.paged_attention(static_q, cache, stage=stage, out=out)
    replays = 0
    for seed in (21, 22):
        new_q = torch.randn(query.shape, generator=torch.Generator().manual_seed(seed)).to(DEV, torch.float16)
        static_q.copy_(new_q)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(new_q, keys, values), torch.float16)
        replays += 1
    assert replays == 2


def _call(q0, cache, **over):
    """torch.ops.pa_lab.paged_attention with vLLM's argument list, any argument replaced."""
    one = torch.ones(1, dtype=torch.float32)
    a = dict(out=torch.empty_like(q0), query=q0, key_cache=cache.key_cache, value_cache=cache.value_cache,
             num_kv_heads=cache.key_cache.shape[1], scale=0.1, block_tables=cache.block_tables,
             seq_lens=cache.seq_lens, block_size=cache.block_size, max_seq_len=cache.max_seq_len,
             alibi_slopes=None, kv_cache_dtype="auto", k_scale=one, v_scale=one, stage="optimized")
    a.update(over)
    torch.ops.pa_lab.paged_attention(**a)


def test_bad_inputs_raise_the_documented_errors():
    require_built("optimized", torch.float16, 128, 16)
    query, _, _, cache = make_case(torch.float16, 128, 16, 8, 2, [40, 70], seed=1)
    kc, vc = cache.key_cache, cache.value_cache
    cases = [
        (dict(key_cache=kc.to(torch.bfloat16)), TypeError, "key_cache: dtype"),
        (dict(value_cache=vc[:, :, :, :8]), ValueError, "value_cache: sizes"),
        (dict(key_cache=kc.transpose(3, 4).contiguous().transpose(3, 4)), ValueError, "key_cache: not contiguous"),
        (dict(block_tables=cache.block_tables.long()), TypeError, "block_tables: dtype"),
        (dict(seq_lens=cache.seq_lens[:1]), ValueError, "seq_lens: sizes"),
        (dict(num_kv_heads=3), ValueError, "num_kv_heads 3"),
        (dict(block_size=24), ValueError, "block_size 24"),
        (dict(max_seq_len=10 ** 6), ValueError, "max_seq_len 1000000"),
        (dict(scale=float("nan")), ValueError, "scale nan"),
        (dict(alibi_slopes=torch.ones(7, device=DEV)), ValueError, "alibi_slopes: sizes"),
        (dict(alibi_slopes=torch.ones(8, device=DEV, dtype=torch.float16)), TypeError, "alibi_slopes: dtype"),
        (dict(kv_cache_dtype="int8"), ValueError, "kv_cache_dtype 'int8'; accepted: auto"),
        (dict(kv_cache_dtype="fp8_e4m3"), TypeError, "key_cache: dtype Half; accepted with kv_cache_dtype 'fp8_e4m3'"),
        (dict(k_scale=torch.ones(2)), ValueError, "k_scale: 2 elements"),
        (dict(stage="v3"), ValueError, "stage 'v3'"),
        (dict(out=torch.empty(2, 8, 64, dtype=torch.float16, device=DEV)), ValueError, "out: sizes"),
        (dict(query=query.float(), out=torch.empty_like(query.float()), key_cache=kc.float().reshape(
            kc.shape[0], kc.shape[1], 32, kc.shape[3], 4), value_cache=vc.float()), TypeError, "accepted by stage 'optimized'"),
        (dict(query=torch.empty(2, 8, 48, dtype=torch.float16, device=DEV),
              out=torch.empty(2, 8, 48, dtype=torch.float16, device=DEV)), ValueError, "head size 48"),
        (dict(query=query.cpu()), ValueError, "query: a CUDA tensor is needed"),
        (dict(query=torch.empty(2 * 8 * 128 + 1, dtype=torch.float16, device=DEV)[1:].view(2, 8, 128)),
         ValueError, "query: data at an address not a multiple of 16 bytes"),
        (dict(query=torch.empty(2, 8 * 128 + 1, dtype=torch.float16, device=DEV)[:, :8 * 128].view(2, 8, 128)),
         ValueError, "query: row stride 1025"),
        (dict(seq_lens_cpu=cache.seq_lens), ValueError, "seq_lens_cpu: on cuda"),
        (dict(seq_lens_cpu=cache.seq_lens_cpu.long()), TypeError, "seq_lens_cpu: dtype Long; accepted: torch.int32"),
        (dict(seq_lens_cpu=cache.seq_lens_cpu[:1]), ValueError, "seq_lens_cpu: sizes [1]; accepted: [2]"),
        (dict(seq_lens_cpu=torch.tensor([40, 0, 70, 0], dtype=torch.int32)[::2]), ValueError,
         "seq_lens_cpu: not contiguous"),
        (dict(seq_lens_cpu=torch.tensor([40, 71], dtype=torch.int32)), ValueError,
         "seq_lens_cpu[1] 71; accepted: 1 to max_seq_len (70)"),
        (dict(seq_lens_cpu=torch.tensor([0, 70], dtype=torch.int32)), ValueError, "seq_lens_cpu[0] 0"),
    ]
    checked = 0
    for over, exc, text in cases:
        with pytest.raises(exc, match=re.escape(text)):  # the message's own words: brackets and dots literal
            _call(query, cache, **over)
        checked += 1
    assert checked == len(cases) == 27
    # Tensors of another device only: no CUDA kernel is dispatched to.
    cpu = dict(out=torch.empty(2, 8, 128, dtype=torch.float16), query=query.cpu(), key_cache=kc.cpu(),
               value_cache=vc.cpu(), block_tables=cache.block_tables.cpu(), seq_lens=cache.seq_lens.cpu())
    with pytest.raises(NotImplementedError, match="CPU"):
        _call(query, cache, **cpu)


def test_host_lengths_steer_the_split_not_the_result():
    """One long sequence among 63 short ones. With the host's copy of the lengths
    (cache.seq_lens_cpu) stage 8's planner sees 8 long units and splits them;
    planned at max_seq_len, 512 CTAs of 32768 tokens fill the GPU twice over and
    it does not split. Both plans give the right output: the lengths steer the
    split only (the CPU test of the planner, tests/kernels/test_split_plan.cpp,
    has the same case)."""
    require_built("optimized", torch.float16, 128, 16)
    lens = [32768] + [16] * 63
    query, keys, values, cache = make_case(torch.float16, 128, 16, 32, 8, lens, seed=31, spare_blocks=0)
    without = dataclasses.replace(cache, seq_lens_cpu=None)
    plans = {name: pa_lab.describe_plan(query, c) for name, c in (("with", cache), ("without", without))}
    splits = {name: int(re.search(r"\bsplits=(\d+)", p).group(1)) for name, p in plans.items()}
    assert splits["without"] == 1 and splits["with"] >= 8, plans
    ref = reference(query, keys, values)
    checked = 0
    for c in (cache, without):
        out = torch.full_like(query, float("nan"))
        pa_lab.paged_attention(query, c, out=out)
        assert_close(out, ref, torch.float16)
        checked += 1
    assert checked == 2
    # Stage 6 plans its partitions at max_seq_len (512 tokens each); v1 has no plan to describe.
    assert pa_lab.describe_plan(query, cache, stage="v2").startswith("V2: up to 64 partitions of 512 tokens")
    assert pa_lab.describe_plan(query, cache, stage="v1") == ""


def test_v1_refuses_a_context_past_its_shared_memory():
    require_built("v1", torch.float32, 128, 16)
    query, _, _, cache = make_case(torch.float32, 128, 16, 4, 4, [200000], seed=6, spare_blocks=0)
    with pytest.raises(ValueError, match="stage 'v1' holds a whole context"):
        pa_lab.paged_attention(query, cache, stage="v1")


def test_example_runs():
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "examples", "check_against_sdpa.py")
    spec = importlib.util.spec_from_file_location("check_against_sdpa", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main() == 0


# ---- fp8 KV caches ---------------------------------------------------------------------------
# vLLM's kv_cache_dtype names and the torch dtype of their codes ("fp8" is e4m3).
FP8_TORCH = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}
FP8_FORMATS = ["fp8_e4m3", "fp8_e5m2"]
FP8_STAGES = ["v1", "v2", "optimized"]
FP8_QUERY_DTYPES = [torch.float16, torch.bfloat16]
FP8_LENS = [[1, 17, 600, 2100], [16, 33, 512], [1, 1, 2048, 5]]


def fp8_quantize(x, kv_cache_dtype, scale):
    """vLLM's fp8 store, in PyTorch: the codes of (x / scale), computed in float32, as torch.uint8."""
    s = torch.tensor(scale, dtype=torch.float32, device=x.device)
    return (x.float() / s).to(FP8_TORCH[kv_cache_dtype]).view(torch.uint8)


def fp8_dequantize(codes, kv_cache_dtype, scale):
    """What the kernels read from an fp8 cache: float32(code) * scale, in float32."""
    s = torch.tensor(scale, dtype=torch.float32, device=codes.device)
    return codes.contiguous().view(FP8_TORCH[kv_cache_dtype]).to(torch.float32) * s


def f32(v):
    """v rounded to float32, the precision the op reads a scale in."""
    return float(torch.tensor(v, dtype=torch.float32))


def fp8_cache_of(cache, kv_cache_dtype, k_scale, v_scale):
    """An fp16 / bf16 PagedCache stored in fp8: the same blocks, tables and NaN tails; K re-laid from
    x = 8 (16 bytes of 2-byte elements) to x = 16 (16 one-byte codes), V in its own layout; uint8 codes."""
    kc, vc = cache.key_cache, cache.value_cache
    nb, kvh, _, bs, _ = kc.shape
    hs = vc.shape[2]
    by_token = kc.permute(0, 1, 3, 2, 4).reshape(nb, kvh, bs, hs)  # [block, kv head, token, dim]
    k16 = by_token.reshape(nb, kvh, bs, hs // 16, 16).permute(0, 1, 3, 2, 4).contiguous()
    k_scale, v_scale = f32(k_scale), f32(v_scale)
    return dataclasses.replace(cache, key_cache=fp8_quantize(k16, kv_cache_dtype, k_scale),
                               value_cache=fp8_quantize(vc, kv_cache_dtype, v_scale), kv_cache_dtype=kv_cache_dtype,
                               k_scale=k_scale, v_scale=v_scale)


def unpage(cache, i, n):
    """Sequence i's first n tokens as the paged cache holds them (through its block table), dense:
    K and V [kv_heads, n, head_size] in the cache's element type."""
    bs = cache.block_size
    nblk = -(-n // bs)
    idx = cache.block_tables[i, :nblk].long()
    kc, vc = cache.key_cache[idx], cache.value_cache[idx]  # [nblk, kvh, hs/x, bs, x], [nblk, kvh, hs, bs]
    kvh, hs = vc.shape[1], vc.shape[2]
    k = kc.permute(1, 0, 3, 2, 4).reshape(kvh, nblk * bs, hs)[:, :n]
    v = vc.permute(1, 0, 3, 2).reshape(kvh, nblk * bs, hs)[:, :n]
    return k, v


def fp8_read_back(cache, lens):
    """Each sequence's K and V as the kernels read the fp8 cache: float32 [kv_heads, n, head_size]."""
    keys, values = [], []
    for i, n in enumerate(lens):
        k, v = unpage(cache, i, n)
        keys.append(fp8_dequantize(k, cache.kv_cache_dtype, cache.k_scale))
        values.append(fp8_dequantize(v, cache.kv_cache_dtype, cache.v_scale))
    return keys, values


def check_fp8_codes(cache, keys, values):
    """The cache holds each sequence's own codes (the test's quantization, through the tables) and
    nothing beyond the format's range (torch's conversion gives NaN / inf there, not a number)."""
    lens = [k.shape[1] for k in keys]
    rk, rv = fp8_read_back(cache, lens)
    for i, n in enumerate(lens):
        k_codes, v_codes = unpage(cache, i, n)
        assert torch.equal(k_codes, fp8_quantize(keys[i], cache.kv_cache_dtype, cache.k_scale)), f"K of sequence {i}"
        assert torch.equal(v_codes, fp8_quantize(values[i], cache.kv_cache_dtype, cache.v_scale)), f"V of sequence {i}"
        assert torch.isfinite(rk[i]).all() and torch.isfinite(rv[i]).all(), f"sequence {i}: codes out of range"
    return rk, rv


@pytest.mark.parametrize("stage", FP8_STAGES)
@pytest.mark.parametrize("dtype", FP8_QUERY_DTYPES)
@pytest.mark.parametrize("kv_cache_dtype", FP8_FORMATS)
@pytest.mark.parametrize("block_size", [16, 32])
def test_fp8_cache_matches_sdpa_on_the_read_back_values(stage, dtype, kv_cache_dtype, block_size):
    require_built(stage, dtype, 128, block_size, kv_cache_dtype)
    i = 8 * FP8_STAGES.index(stage) + 4 * FP8_QUERY_DTYPES.index(dtype) + 2 * FP8_FORMATS.index(kv_cache_dtype) \
        + block_size // 32
    heads, kv_heads = GQA[(i // 2 + i // 8) % len(GQA)]  # MHA, GQA 4 and 8, MQA across the cases
    lens = FP8_LENS[i % len(FP8_LENS)]
    query, keys, values, cache = make_case(dtype, 128, block_size, heads, kv_heads, lens, seed=50 + i)
    # Scales other than 1 and not powers of two (code * scale rounds in float32, as in the kernels);
    # make_case's |K|, |V| stay below 6, so |x / scale| < 300, inside e4m3's 448.
    fp8 = fp8_cache_of(cache, kv_cache_dtype, 0.021, 0.037)
    assert fp8.key_cache.dtype == fp8.value_cache.dtype == torch.uint8
    assert fp8.key_cache.shape[2:] == (128 // 16, block_size, 16)
    rk, rv = check_fp8_codes(fp8, keys, values)
    out = pa_lab.paged_attention(query, fp8, stage=stage)
    assert_close(out, reference(query, rk, rv), dtype)


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", "fp8_e4m3", "fp8_e5m2"])
def test_fp8_paged_kv_cache_float8_dtypes_and_cuda_scales(kv_cache_dtype):
    fmt = "fp8_e4m3" if kv_cache_dtype == "fp8" else kv_cache_dtype
    stages = [s for s in FP8_STAGES if pa_lab.built(s, torch.bfloat16, 128, 16, fmt)]
    if not stages:
        pytest.skip(f"bf16 head 128 block 16 kv_cache_dtype {fmt}: not in this build")
    lens = [3, 250, 1100]
    query, keys, values, _ = make_case(torch.bfloat16, 128, 16, 16, 4, lens, seed=60)
    # pa_lab.paged_kv_cache stores fp8 itself, scales from the data: the same blocks (same generator
    # seed) and the same codes as quantizing its bf16 cache.
    direct = pa_lab.paged_kv_cache(keys, values, 16, spare_blocks=3, generator=torch.Generator().manual_seed(61),
                                   kv_cache_dtype=kv_cache_dtype)
    plain = pa_lab.paged_kv_cache(keys, values, 16, spare_blocks=3, generator=torch.Generator().manual_seed(61))
    fmax = torch.finfo(FP8_TORCH[fmt]).max
    assert direct.kv_cache_dtype == kv_cache_dtype
    assert direct.k_scale == f32(max(k.abs().max().item() for k in keys) / fmax)
    assert direct.v_scale == f32(max(v.abs().max().item() for v in values) / fmax)
    assert direct.k_scale != 1.0 and direct.v_scale != 1.0
    expect = fp8_cache_of(plain, fmt, direct.k_scale, direct.v_scale)
    assert torch.equal(direct.key_cache, expect.key_cache) and torch.equal(direct.value_cache, expect.value_cache)
    assert torch.equal(direct.block_tables, expect.block_tables)
    rk, rv = check_fp8_codes(expect, keys, values)
    ref = reference(query, rk, rv)
    f8 = FP8_TORCH[fmt]
    checked = 0
    for stage in stages:
        # The wrapper: the cache's uint8 codes, its scales as CPU tensors.
        assert_close(pa_lab.paged_attention(query, direct, stage=stage), ref, torch.bfloat16)
        # The raw op as vLLM calls it, scales as one-element CUDA tensors (read with a device
        # synchronization), and the caches in the format's own torch dtype instead of uint8.
        out = torch.full_like(query, float("nan"))
        torch.ops.pa_lab.paged_attention(out, query, direct.key_cache.view(f8), direct.value_cache.view(f8), 4,
                                         128 ** -0.5, direct.block_tables, direct.seq_lens, 16, direct.max_seq_len,
                                         None, kv_cache_dtype, torch.tensor([direct.k_scale], device=DEV),
                                         torch.tensor([direct.v_scale], device=DEV), stage)
        assert_close(out, ref, torch.bfloat16)
        checked += 2
    assert checked == 2 * len(stages)


@pytest.mark.parametrize("stage", FP8_STAGES)
def test_fp8_with_alibi_and_an_explicit_scale(stage):
    require_built(stage, torch.float16, 128, 16, "fp8_e5m2")
    heads, kv_heads = 8, 2
    query, keys, values, cache = make_case(torch.float16, 128, 16, heads, kv_heads, [9, 300, 1500], seed=64)
    fp8 = fp8_cache_of(cache, "fp8_e5m2", 0.125, 0.0625)  # powers of two: code * scale is exact
    rk, rv = check_fp8_codes(fp8, keys, values)
    slopes = torch.tensor([2.0 ** -(h + 1) for h in range(heads)], dtype=torch.float32, device=DEV)
    out = pa_lab.paged_attention(query, fp8, stage=stage, scale=0.05, alibi_slopes=slopes)
    assert_close(out, reference(query, rk, rv, scale=0.05, alibi_slopes=slopes), torch.float16)


@pytest.mark.parametrize("stage", FP8_STAGES)
def test_fp8_cuda_graph_capture_and_replay(stage):
    require_built(stage, torch.float16, 128, 16, "fp8_e4m3")
    query, keys, values, cache = make_case(torch.float16, 128, 16, 8, 2, [17, 900, 64], seed=65)
    fp8 = fp8_cache_of(cache, "fp8_e4m3", 0.03, 0.02)
    rk, rv = check_fp8_codes(fp8, keys, values)
    static_q = query.clone()
    out = torch.empty_like(query)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        pa_lab.paged_attention(static_q, fp8, stage=stage, out=out)  # scales as CPU tensors: no sync to capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        pa_lab.paged_attention(static_q, fp8, stage=stage, out=out)
    replays = 0
    for seed in (23, 24):
        new_q = torch.randn(query.shape, generator=torch.Generator().manual_seed(seed)).to(DEV, torch.float16)
        static_q.copy_(new_q)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_close(out, reference(new_q, rk, rv), torch.float16)
        replays += 1
    assert replays == 2


def test_fp8_torch_compile_fullgraph():
    require_built("optimized", torch.float16, 128, 16, "fp8_e5m2")
    query, keys, values, cache = make_case(torch.float16, 128, 16, 8, 2, [33, 1500], seed=66)
    fp8 = fp8_cache_of(cache, "fp8_e5m2", 0.05, 0.04)
    rk, rv = check_fp8_codes(fp8, keys, values)

    def decode(q, key_cache, value_cache, block_tables, seq_lens, k_scale, v_scale):
        out = torch.empty_like(q)
        torch.ops.pa_lab.paged_attention(out, q, key_cache, value_cache, key_cache.shape[1], q.shape[-1] ** -0.5,
                                         block_tables, seq_lens, 16, fp8.max_seq_len, None, "fp8_e5m2", k_scale,
                                         v_scale, "optimized")
        return out * 2

    compiled = torch.compile(decode, fullgraph=True)
    scales = (torch.tensor([fp8.k_scale], device=DEV), torch.tensor([fp8.v_scale], device=DEV))
    got = compiled(query, fp8.key_cache, fp8.value_cache, fp8.block_tables, fp8.seq_lens, *scales)
    assert_close(got / 2, reference(query, rk, rv), torch.float16)


def test_fp8_bad_inputs_raise_the_documented_errors():
    require_built("optimized", torch.float16, 128, 16, "fp8_e4m3")
    query, _, _, cache = make_case(torch.float16, 128, 16, 8, 2, [40, 70], seed=1)
    fp8 = fp8_cache_of(cache, "fp8_e4m3", 0.05, 0.05)
    kc, vc = fp8.key_cache, fp8.value_cache
    nb = kc.shape[0]
    f8 = dict(kv_cache_dtype="fp8_e4m3", key_cache=kc, value_cache=vc)
    _, _, _, cache8 = make_case(torch.float16, 128, 8, 8, 2, [40, 70], seed=1)
    fp8_blocks_of_8 = fp8_cache_of(cache8, "fp8_e4m3", 0.05, 0.05)
    cases = [
        # (arguments replaced, the cache to call with, exception, literal text of the message)
        (dict(kv_cache_dtype="fp8_e3m4"), cache, ValueError,
         "kv_cache_dtype 'fp8_e3m4'; accepted: auto (the query's dtype), fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2"),
        (dict(kv_cache_dtype="FP8"), cache, ValueError, "kv_cache_dtype 'FP8'; accepted: auto"),
        # fp8 asked for, the fp16 cache given.
        (dict(kv_cache_dtype="fp8"), cache, TypeError,
         "key_cache: dtype Half; accepted with kv_cache_dtype 'fp8': torch.uint8 or torch.float8_e4m3fn"),
        (dict(f8, value_cache=cache.value_cache), cache, TypeError,
         "value_cache: dtype Half; accepted with kv_cache_dtype 'fp8_e4m3': torch.uint8 or torch.float8_e4m3fn"),
        # The other format's torch dtype.
        (dict(f8, key_cache=kc.view(torch.float8_e5m2)), cache, TypeError,
         "key_cache: dtype Float8_e5m2; accepted with kv_cache_dtype 'fp8_e4m3'"),
        (dict(f8, kv_cache_dtype="fp8_e5m2", key_cache=kc.view(torch.float8_e4m3fn)), cache, TypeError,
         "key_cache: dtype Float8_e4m3fn; accepted with kv_cache_dtype 'fp8_e5m2': torch.uint8 or torch.float8_e5m2"),
        # An fp8 cache with kv_cache_dtype "auto".
        (dict(key_cache=kc, value_cache=vc), cache, TypeError,
         "key_cache: dtype Byte; accepted: the query's, Half (an fp8 cache needs kv_cache_dtype"),
        # x = 8 (fp16's) where an fp8 K cache has x = 16.
        (dict(f8, key_cache=kc.reshape(nb, 2, 16, 16, 8)), cache, ValueError,
         f"key_cache: sizes [{nb}, 2, 16, 16, 8]; accepted: [{nb}, 2, 8, 16, 16]"),
        (dict(f8, k_scale=torch.tensor([-0.5])), cache, ValueError, "k_scale -0.5; accepted: finite and > 0"),
        (dict(f8, v_scale=torch.tensor([0.0], device=DEV)), cache, ValueError, "v_scale 0; accepted: finite and > 0"),
        (dict(f8, v_scale=torch.tensor([float("inf")])), cache, ValueError, "v_scale inf; accepted: finite and > 0"),
        (dict(f8, k_scale=torch.ones(2)), cache, ValueError, "k_scale: 2 elements"),
        (dict(f8, k_scale=torch.ones(1, dtype=torch.float64)), cache, TypeError, "k_scale: dtype Double"),
        (dict(f8, query=query.float(), out=torch.empty_like(query.float())), cache, TypeError,
         "query: dtype Float; accepted with kv_cache_dtype 'fp8_e4m3': torch.float16, torch.bfloat16"),
        # Stage 8 reads an fp8 cache in blocks of 16 or 32 tokens only.
        (dict(kv_cache_dtype="fp8_e4m3", key_cache=fp8_blocks_of_8.key_cache,
              value_cache=fp8_blocks_of_8.value_cache), fp8_blocks_of_8, ValueError,
         "stage 'optimized': no kernel for query dtype fp16, kv_cache_dtype 'fp8_e4m3', head size 128, block_size 8"),
    ]
    checked = 0
    for over, c, exc, text in cases:
        with pytest.raises(exc, match=re.escape(text)):
            _call(query, c, **over)
        checked += 1
    assert checked == len(cases) == 15
    # With "auto" the scales are not read: a negative one is not an error there.
    _call(query, cache, k_scale=torch.tensor([-1.0]))
    # Whether a stage is built is asked with the cache dtype too; stage 8 never has fp8 blocks of 8.
    assert not pa_lab.built("optimized", torch.float16, 128, 8, "fp8_e4m3")
    assert not pa_lab.built("v1", torch.float32, 128, 16, "fp8_e5m2")  # an fp8 cache takes fp16 / bf16 queries
    assert pa_lab.built("optimized", torch.float16, 128, 16, "fp8")  # "fp8" is e4m3, which this test required
    with pytest.raises(ValueError, match=re.escape("kv_cache_dtype 'fp4'; accepted: auto")):
        pa_lab.built("v1", torch.float16, 128, 16, "fp4")


def test_fp8_cascade_is_refused_by_name():
    require_built("optimized", torch.float16, 128, 16)
    query, keys, values, _ = make_case(torch.float16, 128, 16, 8, 8, [32 + 5, 32 + 40], seed=67, shared_prefix_len=32)
    fp8 = pa_lab.paged_kv_cache(keys, values, 16, shared_prefix_len=32, kv_cache_dtype="fp8_e4m3")
    with pytest.raises(ValueError, match=re.escape("cache.kv_cache_dtype 'fp8_e4m3': cascade_attention (stage 7) "
                                                   "takes no fp8 cache")):
        pa_lab.cascade_attention(query, fp8, 32)
    # The raw op has no kv_cache_dtype: fp8 codes are refused by their dtype, naming the stages that take them.
    one = torch.empty_like(query)
    for key_cache, value_cache, name, dt in ((fp8.key_cache, fp8.value_cache, "key_cache", "Byte"),
                                             (fp8.key_cache.view(torch.float8_e4m3fn),
                                              fp8.value_cache.view(torch.float8_e4m3fn), "key_cache", "Float8_e4m3fn")):
        with pytest.raises(TypeError, match=re.escape(f"{name}: dtype {dt} (an fp8 cache?); accepted by "
                                                      "cascade_attention: the query's dtype, Half")):
            torch.ops.pa_lab.cascade_attention(one, query, key_cache, value_cache, 8, 0.1, fp8.block_tables,
                                               fp8.seq_lens, 16, fp8.max_seq_len, 32)


@pytest.mark.parametrize("stage", ["optimized", "v2", "v1"])
def test_host_cost_per_call_is_microseconds(stage):
    """A call costs the host tens of microseconds, not driver queries.

    Each call plans its launch; stage 8's SM count, memory clock and bus
    width, asked of the driver on every plan, cost ~550 us of host time a
    call on an H200, more than the kernel at small shapes (v1 asked for the
    whole property struct on every call). Timed while the GPU is busy, so
    the host never waits on it; 200 us bounds it well above the ~25 us a
    call takes and well below those queries."""
    if not pa_lab.built(stage, torch.float16, 128, 16):
        pytest.skip(f"stage {stage} fp16 head 128 block 16 is not in this build")
    q, _, _, cache = make_case(torch.float16, 128, 16, 32, 8, [4096])
    out = torch.empty_like(q)
    for _ in range(20):
        pa_lab.paged_attention(q, cache, out=out, stage=stage)
    torch.cuda.synchronize()
    n = 100
    torch.cuda._sleep(200_000 * n)  # about n x 100 us of GPU work queued first
    t0 = time.perf_counter()
    for _ in range(n):
        pa_lab.paged_attention(q, cache, out=out, stage=stage)
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    assert per_call_us < 200, f"stage {stage}: {per_call_us:.1f} us of host time per call"
