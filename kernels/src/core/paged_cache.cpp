// The host paged KV cache: seeded values, shuffled physical blocks, shared
// prefix blocks, spare garbage blocks, NaN tails.
#include "pa/core/paged_cache.hpp"

#include "pa/core/alibi.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>

#include "pa/core/dtype_convert.hpp"
#include "pa/core/parallel.hpp"

namespace pa {

// ---- random numbers ------------------------------------------------------------
NormalRng::NormalRng(std::uint64_t seed) : engine_(seed) {}

std::uint64_t NormalRng::next_u64() { return engine_(); }

double NormalRng::uniform01() {
  // 53 random bits -> [0, 1); the engine's output is specified by the
  // standard, this conversion by us (std::generate_canonical is not portable).
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double NormalRng::next() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  // Box-Muller; 1 - u is in (0, 1], so the log is finite.
  const double u1 = 1.0 - uniform01();
  const double u2 = uniform01();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double a = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(a);
  have_spare_ = true;
  return r * std::cos(a);
}

namespace {

// Independent streams from one seed (splitmix64 finalizer): every logical
// block has its own stream, so a sequence's values do not depend on the other
// sequences, the dense copy can regenerate them without the block tables, and
// blocks can be drawn in parallel.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t kind, std::uint64_t a = 0, std::uint64_t b = 0) {
  return mix(mix(mix(seed + 0x9e3779b97f4a7c15ull * (kind + 1)) + a) + 0x632be59bd9b4e019ull * b);
}
enum : std::uint64_t { kStreamPerm = 1, kStreamQ = 2, kStreamPrefix = 3, kStreamGarbage = 4, kStreamSeq = 5 };

// The stream of logical block lb of sequence seq: shared prefix blocks have
// one stream for all sequences.
std::uint64_t block_stream(const ProblemSpec& s, int seq, int lb) {
  return lb < s.shared_prefix_blocks() ? stream_seed(s.seed, kStreamPrefix, static_cast<std::uint64_t>(lb))
                                       : stream_seed(s.seed, kStreamSeq, static_cast<std::uint64_t>(seq),
                                                     static_cast<std::uint64_t>(lb));
}

// The K and V values of one logical block, in a fixed order (all K then all V;
// token, kv head, dim), rounded to the dtype. Only the block's first `valid`
// tokens are drawn. sink(is_v, t, kv_head, d, value).
template <class Sink>
void draw_block(std::uint64_t stream, const ProblemSpec& s, int valid, Sink&& sink) {
  NormalRng rng(stream);
  for (int is_v = 0; is_v < 2; ++is_v)
    for (int t = 0; t < valid; ++t)
      for (int h = 0; h < s.num_kv_heads; ++h)
        for (int d = 0; d < s.head_size; ++d)
          sink(is_v != 0, t, h, d, round_to_dtype(static_cast<float>(rng.next()), s.dtype));
}

// Valid tokens of logical block lb of a context.
int valid_in_block(int context_len, int block_size, int lb) {
  const int rest = context_len - lb * block_size;
  return rest < block_size ? rest : block_size;
}

}  // namespace

// ---- PagedProblem ----------------------------------------------------------------
int PagedProblem::num_logical_blocks(int seq) const { return ceil_div(context_lens.at(seq), spec.block_size); }

int PagedProblem::physical_block(int seq, int logical_block) const {
  if (seq < 0 || seq >= num_seqs() || logical_block < 0 || logical_block >= num_logical_blocks(seq)) {
    throw std::out_of_range("physical_block: (seq " + std::to_string(seq) + ", logical block " +
                            std::to_string(logical_block) + ") is outside the problem (" +
                            std::to_string(num_seqs()) + " sequences; this one has " +
                            (seq >= 0 && seq < num_seqs() ? std::to_string(num_logical_blocks(seq)) : "?") +
                            " logical blocks)");
  }
  return block_tables[table.offset(seq, logical_block)];
}

float PagedProblem::q_at(int seq, int head, int d) const { return q[query.q_offset(seq, head, d)]; }

float PagedProblem::k_at(int seq, int kv_head, int token, int d) const {
  const int bs = spec.block_size;
  return k_cache[cache.k_offset(physical_block(seq, token / bs), kv_head, d, token % bs)];
}

float PagedProblem::v_at(int seq, int kv_head, int token, int d) const {
  const int bs = spec.block_size;
  return v_cache[cache.v_offset(physical_block(seq, token / bs), kv_head, d, token % bs)];
}

PagedProblem problem_layout(const ProblemSpec& spec, int num_blocks) {
  spec.validate_shape();
  if (num_blocks < 1)
    throw std::invalid_argument("problem_layout: num_blocks " + std::to_string(num_blocks) + " (accepted: >= 1)");
  PagedProblem p;
  p.spec = spec;
  p.context_lens = spec.context_lens;
  p.num_blocks = num_blocks;
  p.max_blocks_per_seq = spec.max_blocks_per_seq();
  p.q_stride = spec.num_heads * spec.head_size + spec.extra_q_stride;
  p.cache = CacheGeometry{p.num_blocks, spec.num_kv_heads, spec.head_size, spec.block_size,
                          16 / kv_elem_bytes(spec.dtype, spec.kv_dtype)};
  p.query = QueryGeometry{spec.num_seqs(), spec.num_heads, spec.head_size, p.q_stride};
  p.table = BlockTableGeometry{p.max_blocks_per_seq};
  if (spec.alibi) p.alibi_slopes = alibi_slopes(spec.num_heads);
  // No data here to choose scales from: 0 (from the data) reads as 1.
  p.k_scale = spec.k_scale > 0.0f ? spec.k_scale : 1.0f;
  p.v_scale = spec.v_scale > 0.0f ? spec.v_scale : 1.0f;
  return p;
}

PagedProblem make_problem(const ProblemSpec& spec) {
  spec.validate();
  const int ns = spec.num_seqs(), bs = spec.block_size, hs = spec.head_size;
  const int prefix_blocks = spec.shared_prefix_blocks();

  // Physical blocks needed: the shared prefix once, then each sequence's own.
  std::int64_t needed = prefix_blocks;
  for (int c : spec.context_lens) needed += ceil_div(c, bs) - prefix_blocks;
  PagedProblem p = problem_layout(spec, static_cast<int>(needed + spec.spare_blocks));  // validated again
  // Values are drawn in the dtype's own layout (so an fp8 problem holds the
  // same values, garbage included, as the problem in its dtype); an fp8 cache
  // is re-laid out with x = 16 at the end.
  p.cache.x = 16 / dtype_bytes(spec.dtype);

  // Seeded shuffle of the physical block ids (Fisher-Yates with our own
  // index draw: std::uniform_int_distribution differs between libraries).
  std::vector<int> perm(p.num_blocks);
  for (int i = 0; i < p.num_blocks; ++i) perm[i] = i;
  {
    NormalRng rng(stream_seed(spec.seed, kStreamPerm));
    for (int i = p.num_blocks - 1; i > 0; --i) {
      const int j = static_cast<int>(rng.next_u64() % static_cast<std::uint64_t>(i + 1));
      std::swap(perm[i], perm[j]);
    }
  }
  p.block_tables.assign(static_cast<std::size_t>(ns) * p.max_blocks_per_seq, kNoBlock);
  int next = 0;
  std::vector<int> prefix_phys(prefix_blocks);
  for (int lb = 0; lb < prefix_blocks; ++lb) prefix_phys[lb] = perm[next++];
  for (int s = 0; s < ns; ++s) {
    const int nb = ceil_div(spec.context_lens[s], bs);
    for (int lb = 0; lb < nb; ++lb) {
      p.block_tables[p.table.offset(s, lb)] = lb < prefix_blocks ? prefix_phys[lb] : perm[next++];
    }
  }

  // Pool: NaN (or 0) everywhere, then garbage in the spare blocks, then the
  // real tokens; what stays NaN is exactly the tails of last blocks.
  const float tail = spec.nan_tails ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  p.k_cache.assign(static_cast<std::size_t>(p.cache.total_elems()), tail);
  p.v_cache.assign(static_cast<std::size_t>(p.cache.total_elems()), tail);
  const int first_spare = next;
  detail::parallel_for(p.num_blocks - first_spare, [&](std::int64_t i) {
    const int phys = perm[first_spare + i];
    NormalRng rng(stream_seed(spec.seed, kStreamGarbage, static_cast<std::uint64_t>(i)));
    const std::int64_t base = static_cast<std::int64_t>(phys) * p.cache.block_elems();
    for (std::int64_t e = 0; e < p.cache.block_elems(); ++e) {
      p.k_cache[base + e] = round_to_dtype(static_cast<float>(1000.0 * rng.next()), spec.dtype);
      p.v_cache[base + e] = round_to_dtype(static_cast<float>(1000.0 * rng.next()), spec.dtype);
    }
  });
  // Every physical block that holds tokens, once (shared blocks from seq 0).
  struct Job {
    int seq, lb;
  };
  std::vector<Job> jobs;
  for (int s = 0; s < ns; ++s)
    for (int lb = (s == 0 ? 0 : prefix_blocks); lb < ceil_div(spec.context_lens[s], bs); ++lb) jobs.push_back({s, lb});
  detail::parallel_for(static_cast<std::int64_t>(jobs.size()), [&](std::int64_t j) {
    const Job job = jobs[j];
    const int phys = p.block_tables[p.table.offset(job.seq, job.lb)];
    draw_block(block_stream(spec, job.seq, job.lb), spec, valid_in_block(spec.context_lens[job.seq], bs, job.lb),
               [&](bool is_v, int t, int h, int d, float v) {
                 if (is_v) p.v_cache[p.cache.v_offset(phys, h, d, t)] = v;
                 else p.k_cache[p.cache.k_offset(phys, h, d, t)] = v;
               });
  });

  // Q: N(0,1) * logit_spread, one stream per sequence; row padding NaN.
  p.q.assign(static_cast<std::size_t>(ns) * p.q_stride, std::numeric_limits<float>::quiet_NaN());
  for (int s = 0; s < ns; ++s) {
    NormalRng rng(stream_seed(spec.seed, kStreamQ, static_cast<std::uint64_t>(s)));
    for (int h = 0; h < spec.num_heads; ++h)
      for (int d = 0; d < hs; ++d)
        p.q[p.query.q_offset(s, h, d)] = round_to_dtype(static_cast<float>(rng.next() * spec.logit_spread), spec.dtype);
  }

  p.q_bytes = encode(spec.dtype, p.q);
  if (!is_fp8(spec.kv_dtype)) {
    p.k_bytes = encode(spec.dtype, p.k_cache);
    p.v_bytes = encode(spec.dtype, p.v_cache);
    p.k_scale = p.v_scale = 1.0f;  // no scales without fp8
    return p;
  }
  // fp8: the codes, then the float cache replaced by their read-back values
  // in the fp8 layout (x = 16).
  const Fp8Format f = fp8_format_of(spec.kv_dtype);
  const KvMaxAbs mx = kv_read_max_abs(p);
  p.k_scale = spec.k_scale > 0.0f ? spec.k_scale : fp8_scale_for(mx.k, f);
  p.v_scale = spec.v_scale > 0.0f ? spec.v_scale : fp8_scale_for(mx.v, f);
  CacheGeometry g8 = p.cache;
  g8.x = 16;
  Fp8CacheCodes codes = fp8_encode_cache(p.cache, p.k_cache, p.v_cache, g8, f, p.k_scale, p.v_scale);
  detail::parallel_for(static_cast<std::int64_t>(codes.k.size()), [&](std::int64_t i) {
    p.k_cache[i] = fp8_dequantize(f, codes.k[i], p.k_scale);
    p.v_cache[i] = fp8_dequantize(f, codes.v[i], p.v_scale);
  });
  p.k_bytes = std::move(codes.k);
  p.v_bytes = std::move(codes.v);
  p.cache = g8;
  return p;
}

KvMaxAbs kv_read_max_abs(const PagedProblem& p) {
  KvMaxAbs m;
  for_each_read_element(p, [&](int phys, int h, int d, int t) {
    m.k = std::max(m.k, std::fabs(p.k_cache[p.cache.k_offset(phys, h, d, t)]));
    m.v = std::max(m.v, std::fabs(p.v_cache[p.cache.v_offset(phys, h, d, t)]));
  });
  return m;
}

Fp8CacheCodes fp8_encode_cache(const CacheGeometry& from, const std::vector<float>& k, const std::vector<float>& v,
                               const CacheGeometry& to, Fp8Format f, float k_scale, float v_scale) {
  if (from.num_blocks != to.num_blocks || from.num_kv_heads != to.num_kv_heads || from.head_size != to.head_size ||
      from.block_size != to.block_size || to.x != 16 || to.head_size % 16 != 0 ||
      k.size() != static_cast<std::size_t>(from.total_elems()) || v.size() != k.size()) {
    throw std::invalid_argument("fp8_encode_cache: the target layout (x " + std::to_string(to.x) + ", head size " +
                                std::to_string(to.head_size) +
                                ") is not the source pool with x = 16, or the caches' sizes are not the pool's; "
                                "accepted: the same pool, head size a multiple of 16");
  }
  Fp8CacheCodes c;
  c.k.assign(static_cast<std::size_t>(to.total_elems()), 0);
  c.v.assign(static_cast<std::size_t>(to.total_elems()), 0);
  detail::parallel_for(from.num_blocks, [&](std::int64_t b64) {
    const int b = static_cast<int>(b64);
    for (int h = 0; h < from.num_kv_heads; ++h)
      for (int d = 0; d < from.head_size; ++d)
        for (int t = 0; t < from.block_size; ++t) {
          c.k[to.k_offset(b, h, d, t)] = fp8_quantize(f, k[from.k_offset(b, h, d, t)], k_scale);
          c.v[to.v_offset(b, h, d, t)] = fp8_quantize(f, v[from.v_offset(b, h, d, t)], v_scale);
        }
  });
  return c;
}

DenseKV make_dense_kv(const ProblemSpec& spec, int seq) {
  spec.validate();
  if (seq < 0 || seq >= spec.num_seqs()) {
    throw std::out_of_range("make_dense_kv: seq " + std::to_string(seq) + "; accepted: 0.." +
                            std::to_string(spec.num_seqs() - 1));
  }
  const bool fp8 = is_fp8(spec.kv_dtype);
  if (fp8 && !(spec.k_scale > 0.0f && spec.v_scale > 0.0f)) {
    throw std::invalid_argument(std::string("make_dense_kv: an ") + kv_dtype_name(spec.kv_dtype) +
                                " cache with scales from the data (k_scale " + std::to_string(spec.k_scale) +
                                ", v_scale " + std::to_string(spec.v_scale) +
                                "); accepted: the spec's own scales, both > 0");
  }
  const Fp8Format f = fp8_format_of(spec.kv_dtype);
  DenseKV kv;
  kv.context_len = spec.context_lens[seq];
  kv.num_kv_heads = spec.num_kv_heads;
  kv.head_size = spec.head_size;
  const std::size_t n = static_cast<std::size_t>(kv.context_len) * kv.num_kv_heads * kv.head_size;
  kv.k.assign(n, 0.0f);
  kv.v.assign(n, 0.0f);
  const int bs = spec.block_size;
  detail::parallel_for(ceil_div(kv.context_len, bs), [&](std::int64_t lb64) {
    const int lb = static_cast<int>(lb64);
    draw_block(block_stream(spec, seq, lb), spec, valid_in_block(kv.context_len, bs, lb),
               [&](bool is_v, int t, int h, int d, float v) {
                 const std::size_t i =
                     (static_cast<std::size_t>(lb * bs + t) * kv.num_kv_heads + h) * kv.head_size + d;
                 (is_v ? kv.v : kv.k)[i] =
                     fp8 ? fp8_dequantize(f, fp8_quantize(f, v, is_v ? spec.v_scale : spec.k_scale),
                                          is_v ? spec.v_scale : spec.k_scale)
                         : v;
               });
  });
  return kv;
}

}  // namespace pa
