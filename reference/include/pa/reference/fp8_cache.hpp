// A problem's KV cache stored in fp8 with per-tensor scales (vLLM's
// kv_cache_dtype "fp8_e4m3" / "fp8_e5m2" with k_scale and v_scale), and the
// reference attention over it.
//
// Stored element: fp8(x / scale); read back: float(code) * scale (both in
// float, pa/core/fp8.hpp's fp8_quantize / fp8_dequantize, the functions a
// kernel uses). Queries and outputs keep the problem's dtype (fp16 or bf16).
// The reference computes in float64 from the read-back values, with exactly
// ref_output's conventions: it IS ref_output, on the problem whose cache holds
// the read-back values (dequantized_problem), so every stage's reference
// (logits, softmax, partitions, cascade) is available for an fp8 cache too.
//
// The codes are kept in the layout a kernel reads: K as
// [num_blocks, num_kv_heads, head_size/16, block_size, 16] (x = 16 one-byte
// elements per 16 bytes, where fp16 has 8), V as
// [num_blocks, num_kv_heads, head_size, block_size], same physical blocks and
// block tables as the problem, so a kernel can upload exactly these bytes.
// Every element of the pool is converted, spare blocks and NaN tails included:
// the traps of pa/core/paged_cache.hpp stay traps (NaN stays NaN; the |x| ~
// 1000 garbage saturates in e4m3 or becomes inf in e5m2 unless the scale
// covers it, which fp8_scales_for's does not, on purpose).
//
// vLLM converts a read-back element to the query dtype before its dot
// products, a second rounding (at most 2^-11 relative in fp16, 2^-8 in bf16)
// that this reference does not make; with a power-of-two scale there is
// nothing to round, since code * scale is then exact in fp16 and bf16.
#pragma once
#include <cstdint>
#include <vector>

#include "pa/core/fp8.hpp"
#include "pa/core/paged_cache.hpp"

namespace pa {

struct Fp8Scales {
  float k = 1.0f;
  float v = 1.0f;
};

struct Fp8KvCache {
  Fp8Format format = Fp8Format::e4m3;
  Fp8Scales scales;
  CacheGeometry cache;                // the problem's pool with x = 16
  std::vector<std::uint8_t> k_codes;  // [num_blocks, num_kv_heads, head_size/16, block_size, 16]
  std::vector<std::uint8_t> v_codes;  // [num_blocks, num_kv_heads, head_size, block_size]

  // The read-back value of one element (physical block, kv head, dim d, token t in the block).
  float k_value(int physical_block, int kv_head, int d, int t) const {
    return fp8_dequantize(format, k_codes[cache.k_offset(physical_block, kv_head, d, t)], scales.k);
  }
  float v_value(int physical_block, int kv_head, int d, int t) const {
    return fp8_dequantize(format, v_codes[cache.v_offset(physical_block, kv_head, d, t)], scales.v);
  }
};

// The scales that map the largest |K| and |V| the sequences read (tokens below
// each context length, through the block tables: spare blocks and NaN tails
// excluded) onto the format's largest finite value (fp8_scale_for).
Fp8Scales fp8_scales_for(const PagedProblem& p, Fp8Format f);

// The problem's cache in fp8. Throws std::invalid_argument when a scale is not
// finite and > 0, or when head_size is not a multiple of 16 (the fp8 K
// layout's x), naming the value and what is accepted.
Fp8KvCache quantize_kv_cache(const PagedProblem& p, Fp8Format f, Fp8Scales scales);
// Same, with fp8_scales_for(p, f).
Fp8KvCache quantize_kv_cache(const PagedProblem& p, Fp8Format f);

// A copy of p whose k_cache / v_cache (p's own layout) hold the read-back
// values of c. Its k_bytes and v_bytes are empty: the bytes of this cache are
// c's codes, and an fp16 encoding of the read-back values could round them.
// dense_output regenerates values from the seed and so describes p, not this
// problem. Throws std::invalid_argument when c's pool is not p's.
PagedProblem dequantized_problem(const PagedProblem& p, const Fp8KvCache& c);

// The attention output [seq][head][head_size] over the fp8 cache:
// ref_output(dequantized_problem(p, c)).
std::vector<double> ref_output_fp8(const PagedProblem& p, const Fp8KvCache& c);

// A bound on |ref_output_fp8 - ref_output(p)| for each output element: what
// storing the cache in fp8 can cost. With p_t, p'_t the softmax weights over
// the original and read-back cache, dl_t the change of token t's logit,
// R = max_t dl_t - min_t dl_t, and |v'_td - v_td| <= a + r |v_td| the element
// bound (fp8_quantization_tolerance for the V scale):
//   o'_d - o_d = sum_t p'_t (v'_td - v_td) + sum_t (p'_t - p_t)(v_td - o_d)
// (the second sum may subtract o_d because both weight sets sum to 1), and
// p'_t / p_t = exp(dl_t - c) / sum_u p_u exp(dl_u - c) lies in [e^-R, e^R]
// (c = the midpoint of the dl range), so
//   |o'_d - o_d| <= sum_t p'_t (a + r |v_td|) + (e^R - 1) sum_t p_t |v_td - o_d|.
// Exact in real arithmetic; the logit changes are measured (not bounded), so
// this isolates how logit changes move the output from how they arise.
// Throws std::invalid_argument when an element the sequences read lies beyond
// the format's range at its scale (saturated or overflowed: the element bound
// does not hold there).
std::vector<double> fp8_output_error_bound(const PagedProblem& p, const Fp8KvCache& c);

}  // namespace pa
