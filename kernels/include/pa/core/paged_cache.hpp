// The paged KV cache on the host: a pool of physical blocks in vLLM's layouts,
// block tables that map each sequence's logical blocks to shuffled physical
// blocks, and the query, all drawn from ProblemSpec::seed.
//
// What a kernel under test can rely on, and what catches it when it cheats:
// - Physical blocks are a seeded random permutation: logical block b of a
//   sequence is almost never physical block b.
// - The pool has spec.spare_blocks extra physical blocks that no table points
//   to; they hold random garbage of large magnitude (|x| ~ 1000), so reading
//   a wrong block gives a visibly wrong result.
// - Slots past a sequence's context in its last block hold NaN when
//   spec.nan_tails (the default): a kernel must mask those tokens (K: select
//   the logit away, V: zero the value, since 0 * NaN = NaN), as vLLM's does.
// - Q row padding (extra_q_stride) holds NaN.
// - block_tables entries past a sequence's last logical block are -1: a kernel
//   that walks past the context reads out of bounds (compute-sanitizer
//   reports it) instead of silently reading a valid block.
// - With spec.shared_prefix_len > 0 the first shared_prefix_len/block_size
//   logical blocks of every sequence map to the same physical blocks (the
//   cascade case): their K/V are the same tokens for every sequence.
//
// Values: K, V ~ N(0,1); Q ~ N(0,1) * logit_spread, so scaled logits have a
// standard deviation of about logit_spread and softmax is far from uniform.
// Each value is rounded to spec.dtype; the float vectors hold exactly the
// decoded stored values, so the reference sees bit-for-bit what a kernel sees.
// With an fp8 cache (spec.kv_dtype) K and V are then stored as fp8 codes
// (k_bytes, v_bytes, x = 16) and the float cache holds their read-back values
// float(code) * scale, in the same layout: the reference attends over exactly
// what a kernel dequantizes. The traps stay traps: NaN tails stay NaN, the
// garbage of the spare blocks saturates (e4m3) or overflows (e5m2).
// Normal variates come from std::mt19937_64 and our own Box-Muller, so the
// problem is the same on every standard library.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "pa/core/fp8.hpp"
#include "pa/core/problem.hpp"
#include "pa/index/layout.hpp"

namespace pa {

// The kernels' unused block-table entry.
inline constexpr int kNoBlock = -1;

struct PagedProblem {
  ProblemSpec spec;

  CacheGeometry cache;      // num_blocks includes the spare blocks
  QueryGeometry query;      // q_stride = num_heads*head_size + extra_q_stride
  BlockTableGeometry table;
  int num_blocks = 0;
  int max_blocks_per_seq = 0;
  int q_stride = 0;

  // Storage in spec.dtype (K and V: in spec.kv_dtype), ready to upload (host byte order).
  std::vector<std::uint8_t> q_bytes;  // [num_seqs, q_stride]
  std::vector<std::uint8_t> k_bytes;  // [num_blocks, num_kv_heads, head_size/x, block_size, x]
  std::vector<std::uint8_t> v_bytes;  // [num_blocks, num_kv_heads, head_size, block_size]
  // fp8 cache: element = float(code) * scale (spec.k_scale / v_scale, or the
  // scales chosen from the data when those are 0); 1 for any other cache.
  float k_scale = 1.0f, v_scale = 1.0f;
  // The same values decoded to float, same layouts (the reference reads these).
  std::vector<float> q, k_cache, v_cache;

  std::vector<int> block_tables;  // [num_seqs, max_blocks_per_seq]; unused = kNoBlock
  std::vector<int> context_lens;  // [num_seqs]
  // ALiBi slopes, one per query head (pa/index/alibi.hpp's bias); empty: no
  // ALiBi. make_problem and problem_layout set the paper's slopes when
  // spec.alibi; a test may put others here (the kernels upload what is here).
  std::vector<float> alibi_slopes;
  bool has_alibi() const { return !alibi_slopes.empty(); }

  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int num_heads() const { return spec.num_heads; }
  int num_kv_heads() const { return spec.num_kv_heads; }
  int head_size() const { return spec.head_size; }
  int block_size() const { return spec.block_size; }
  int context_len(int seq) const { return context_lens[seq]; }
  int num_logical_blocks(int seq) const;  // ceil(context_len / block_size)
  int kv_head(int head) const { return kv_head_of(head, spec.num_heads, spec.num_kv_heads); }

  // Physical block of (seq, logical block); throws std::out_of_range past the context.
  int physical_block(int seq, int logical_block) const;

  // Element accessors through the block table and pa/index/layout.hpp.
  // token is the token index within the sequence (0 <= token < context_len).
  float q_at(int seq, int head, int d) const;
  float k_at(int seq, int kv_head, int token, int d) const;
  float v_at(int seq, int kv_head, int token, int d) const;
};

// Validates the spec (std::invalid_argument) and builds the problem.
PagedProblem make_problem(const ProblemSpec& spec);

// f(physical block, kv head, d, t) for every cache element the sequences
// read: tokens below each context length, through the block tables (spare
// blocks and NaN tails never; a block two sequences share once per sequence).
template <class F>
void for_each_read_element(const PagedProblem& p, F&& f) {
  const int bs = p.spec.block_size;
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int token = 0; token < p.context_len(seq); ++token) {
      const int phys = p.physical_block(seq, token / bs);
      for (int h = 0; h < p.spec.num_kv_heads; ++h)
        for (int d = 0; d < p.spec.head_size; ++d) f(phys, h, d, token % bs);
    }
}

// The largest |K| and |V| the sequences read (for_each_read_element): what
// an fp8 scale from the data maps onto the format's largest value.
struct KvMaxAbs {
  float k = 0.0f, v = 0.0f;
};
KvMaxAbs kv_read_max_abs(const PagedProblem& p);

// The one quantization of a cache: every element of the float caches k and
// v (layout `from`) stored as fp8_quantize(f, x, scale) (pa/core/fp8.hpp) in
// the layout `to` (the same pool with x = 16).
struct Fp8CacheCodes {
  std::vector<std::uint8_t> k, v;
};
Fp8CacheCodes fp8_encode_cache(const CacheGeometry& from, const std::vector<float>& k, const std::vector<float>& v,
                               const CacheGeometry& to, Fp8Format f, float k_scale, float v_scale);

// The problem's shape without its data: the validated spec, the context
// lengths and the geometries of a pool of num_blocks physical blocks; every
// byte and float array, and the block tables, empty. For inputs that already
// live on the device (pa-bench fills GBs of KV there): the runner builds its
// launches from this and the device pointers (runner.hpp, DeviceInputViews).
PagedProblem problem_layout(const ProblemSpec& spec, int num_blocks);

// Contiguous ("dense") copy of one sequence's K and V, built independently of
// the block tables from the same seeded values: [token][kv_head][head_size].
// Used to check that paged attention equals dense attention.
struct DenseKV {
  int context_len = 0, num_kv_heads = 0, head_size = 0;
  std::vector<float> k, v;
  float k_at(int token, int kv_head, int d) const {
    return k[(static_cast<std::size_t>(token) * num_kv_heads + kv_head) * head_size + d];
  }
  float v_at(int token, int kv_head, int d) const {
    return v[(static_cast<std::size_t>(token) * num_kv_heads + kv_head) * head_size + d];
  }
};
// Regenerates the sequence's values from the seed (no block-table lookups),
// so a bug in the paging cannot cancel out. An fp8 cache needs the spec's own
// scales (k_scale, v_scale > 0; scales from the data depend on every
// sequence): each value is then quantized and read back as make_problem's.
DenseKV make_dense_kv(const ProblemSpec& spec, int seq);

// A seeded normal generator (mt19937_64 + Box-Muller), exposed for tests.
class NormalRng {
 public:
  explicit NormalRng(std::uint64_t seed);
  double next();            // N(0, 1)
  std::uint64_t next_u64();
  double uniform01();       // [0, 1)
 private:
  std::mt19937_64 engine_;
  bool have_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace pa
