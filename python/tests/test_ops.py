"""The lab's PyTorch ops against PyTorch's own attention, on the GPU.

The reference is torch.nn.functional.scaled_dot_product_attention over each
sequence's contiguous keys and values, in float64 on the exact stored values
(the paged cache holds the same dtype values the reference upcasts), and the
acceptance rule is the lab's one tolerance per dtype (pa_lab.tolerance,
pa/core/tolerance.hpp): |got - ref| <= abs + rel |ref|, every element.
Configurations this build does not hold (a quick kernel build has head 128 x
block 16 only) are skipped, saying so.
"""
import math

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


def require_built(stage, dtype, head_size, block_size):
    if not pa_lab.built(stage, dtype, head_size, block_size):
        pytest.skip(f"{stage} {dtype} head {head_size} block {block_size}: not in this build")


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
        (dict(kv_cache_dtype="fp8_e4m3"), ValueError, "kv_cache_dtype 'fp8_e4m3'"),
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
    ]
    checked = 0
    for over, exc, text in cases:
        with pytest.raises(exc, match=text.replace("(", r"\(").replace(")", r"\)")):
            _call(query, cache, **over)
        checked += 1
    assert checked == len(cases) == 20
    # Tensors of another device only: no CUDA kernel is dispatched to.
    cpu = dict(out=torch.empty(2, 8, 128, dtype=torch.float16), query=query.cpu(), key_cache=kc.cpu(),
               value_cache=vc.cpu(), block_tables=cache.block_tables.cpu(), seq_lens=cache.seq_lens.cpu())
    with pytest.raises(NotImplementedError, match="CPU"):
        _call(query, cache, **cpu)


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
