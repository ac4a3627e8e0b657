// The reference attention: paged == dense, every stage's intermediate
// consistent with the others, V2 partitions, attention-state merge, cascade.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <cstdlib>

#include "pa/index/mapping.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/dtype_convert.hpp"
#include "require_close.hpp"
#include "naive_attention.hpp"
#include "spec_of.hpp"
#include "states.hpp"

using namespace pa;

namespace {
const Tolerance kRef = reference_tolerance();

// Fresh random values on every run (the seed is printed on failure).
ProblemSpec spec_of(DType t, int head, int block, int heads, int kv_heads, std::vector<int> ctx, std::uint64_t salt) {
  return test::fresh_spec_of(t, head, block, heads, kv_heads, std::move(ctx), salt);
}

using test::flat_lse;
using test::flat_out;

}  // namespace

TEST_CASE("paged attention equals dense attention (shuffled tables, all dtypes, GQA/MQA)", "[reference][attention]") {
  const auto dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  // GQA ratios 1, 4, 8 and MQA.
  const auto heads = GENERATE(std::pair{4, 4}, std::pair{8, 2}, std::pair{16, 2}, std::pair{8, 1}, std::pair{1, 1});
  const int block = GENERATE(8, 16, 32);
  ProblemSpec s = spec_of(dt, 64, block, heads.first, heads.second, {1, block - 1, block, block + 1, 3 * block + 5},
                          1000 + heads.first * 10 + heads.second);
  s.spare_blocks = 4;
  s.extra_q_stride = 16;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  REQUIRE(p.kv_head(heads.first - 1) == heads.second - 1);
  const auto paged = ref_output(p);
  const auto dense = dense_output(p);
  // Same arithmetic in the same order from the same values: bit for bit.
  REQUIRE(paged == dense);
  for (double x : paged) REQUIRE(std::isfinite(x));
  test::require_close(test::naive_output(p), paged, kRef);
}

TEST_CASE("context edge cases: length 1, ragged, exactly one block, many blocks", "[reference][attention]") {
  const int block = GENERATE(8, 16, 32);
  const int head = GENERATE(64, 80, 128, 256);
  ProblemSpec s = spec_of(DType::f16, head, block, 2, 1, {1, block - 1, block, block + 1, 2 * block, 200}, 2000 + head);
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const auto out = ref_output(p);
  REQUIRE(out == dense_output(p));
  // Context 1: the output is that token's V exactly (p = 1).
  for (int h = 0; h < 2; ++h)
    for (int d = 0; d < head; ++d) REQUIRE(out[p.query.out_offset(0, h, d)] == double(p.v_at(0, 0, 0, d)));
}

TEST_CASE("stage 1: Q in the kernel's shared-memory order", "[reference][stages]") {
  // config.hpp's worked example: fp16, head 128, block 16: thread group of 2,
  // K vec 4 elements, 16 vecs per thread; slot [g][i] = dims (g + 2i) * 4 ...
  ProblemSpec s = spec_of(DType::f16, 128, 16, 2, 2, {5, 9}, 3000);
  const PagedProblem p = make_problem(s);
  const auto order = q_smem_dim_order(s);
  for (int g = 0; g < 2; ++g)
    for (int i = 0; i < 16; ++i)
      for (int e = 0; e < 4; ++e) REQUIRE(order[(g * 16 + i) * 4 + e] == (g + 2 * i) * 4 + e);
  const auto q = ref_q_smem(p);
  for (int seq = 0; seq < 2; ++seq)
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 128; ++j) REQUIRE(q[p.query.out_offset(seq, h, j)] == p.q_at(seq, h, order[j]));
  // Every configuration's order is a permutation of the head dims (checked inside).
  for (DType t : kAllDTypes)
    for (int hs : kSupportedHeadSizes)
      for (int b : kSupportedBlockSizes) {
        ProblemSpec c = s;
        c.dtype = t;
        c.head_size = hs;
        c.block_size = b;
        REQUIRE(q_smem_dim_order(c).size() == static_cast<std::size_t>(hs));
      }
}

TEST_CASE("stages 2-5 are consistent with each other", "[reference][stages]") {
  const auto dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  const int block = GENERATE(8, 16, 32);
  ProblemSpec s = spec_of(dt, 96, block, 4, 2, {1, block + 3, 7 * block, 300}, 4000 + block);
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const TokenTensor logits = ref_logits(p);
  const SoftmaxRef sm = ref_softmax(p);
  const WarpPartials wp = ref_warp_partials(p);
  const auto out = ref_output(p);
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < s.num_heads; ++h) {
      const int c = p.context_len(seq), sh = seq * s.num_heads + h;
      // Stage 2: logits through the accessors.
      double mx = -INFINITY;
      for (int t = 0; t < c; ++t) {
        double acc = 0;
        for (int d = 0; d < s.head_size; ++d) acc += double(p.q_at(seq, h, d)) * p.k_at(seq, p.kv_head(h), t, d);
        const double l = acc * double(s.scale());
        REQUIRE(std::fabs(logits.at(seq, h, t) - l) <= kRef.abs + kRef.rel * std::fabs(l));
        mx = std::max(mx, logits.at(seq, h, t));
      }
      // Stage 3: max exact, probabilities sum to 1 and follow the logits.
      REQUIRE(sm.max_logit[sh] == mx);
      double psum = 0, esum = 0;
      for (int t = 0; t < c; ++t) {
        psum += sm.probs.at(seq, h, t);
        esum += std::exp(logits.at(seq, h, t) - mx);
        REQUIRE(sm.probs.at(seq, h, t) >= 0.0);
      }
      REQUIRE(within(1.0, psum, kRef));
      REQUIRE(within(esum, sm.exp_sum[sh], kRef));
      REQUIRE(sm.exp_sum[sh] >= 1.0);
      // Stage 4: warp partials sum to the output; warps without blocks are 0.
      const int nb = p.num_logical_blocks(seq);
      for (int d = 0; d < s.head_size; ++d) {
        double acc = 0;
        for (int w = 0; w < wp.num_warps; ++w) {
          const double v = wp.values[wp.index(seq, h, w, d)];
          if (w >= nb) REQUIRE(v == 0.0);
          acc += v;
        }
        const double o = out[p.query.out_offset(seq, h, d)];
        REQUIRE(std::fabs(acc - o) <= kRef.abs + kRef.rel * std::fabs(o));
      }
    }
}

TEST_CASE("stage 4: warp w owns the blocks the mapping assigns it", "[reference][stages]") {
  ProblemSpec s = spec_of(DType::f16, 64, 16, 1, 1, {16 * 9}, 4500);
  using Cfg = KernelConfig<DType::f16, 64, 16, 128>;
  const auto warp_of = warp_of_logical_block(s, 9);
  for (int b = 0; b < 9; ++b) {
    const int w = warp_of[b];
    bool found = false;
    for (int it = 0; it < 3; ++it) found |= ThreadMapping<Cfg>::warp_block(0, w, it) == b;
    REQUIRE(found);
  }
  // Block b of a 4-warp kernel: warp b % 4.
  for (int b = 0; b < 9; ++b) REQUIRE(warp_of[b] == b % 4);
  // The partial of warp w is the probability-weighted V over exactly its blocks.
  const PagedProblem p = make_problem(s);
  const SoftmaxRef sm = ref_softmax(p);
  const WarpPartials wp = ref_warp_partials(p);
  for (int w = 0; w < 4; ++w)
    for (int d = 0; d < 64; d += 9) {
      double acc = 0;
      for (int t = 0; t < 16 * 9; ++t)
        if ((t / 16) % 4 == w) acc += sm.probs.at(0, 0, t) * p.v_at(0, 0, t, d);
      REQUIRE(within(acc, wp.values[wp.index(0, 0, w, d)], kRef));
    }
}

TEST_CASE("softmax is far from uniform with the default logit spread", "[reference][attention]") {
  ProblemSpec s = spec_of(DType::f16, 128, 16, 8, 8, {512}, 5000);
  const PagedProblem p = make_problem(s);
  const SoftmaxRef sm = ref_softmax(p);
  double mean_max_p = 0;
  for (int h = 0; h < 8; ++h) {
    double mx = 0;
    for (int t = 0; t < 512; ++t) mx = std::max(mx, sm.probs.at(0, h, t));
    mean_max_p += mx / 8;
  }
  CHECK(mean_max_p > 20.0 / 512);  // uniform would be 1/512
}

TEST_CASE("V2: partitions reduce to the unpartitioned output", "[reference][v2]") {
  const int block = GENERATE(8, 16, 32);
  const auto dt = GENERATE(DType::f16, DType::bf16, DType::f32);
  // Partition sizes: one block (single-token last partitions), a few blocks,
  // and 512 (contexts shorter than one partition, and many partitions).
  const int psize = GENERATE_COPY(block, 4 * block, 512);
  ProblemSpec s = spec_of(dt, 64, block, 4, 2,
                          {1, psize + 1, 3 * psize + 1, psize - block + 3, 100, 1200}, 6000 + psize);
  const PagedProblem p = make_problem(s);
  INFO(s.describe() << " partition " << psize);
  const V2Ref v2 = ref_v2(p, psize);
  REQUIRE(v2.max_partitions == ceil_div(s.max_context_len(), psize));
  test::require_close(ref_output(p), v2.out, kRef);
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const int c = p.context_len(seq), np = num_partitions(c, psize);
    for (int h = 0; h < s.num_heads; ++h)
      for (int pi = 0; pi < v2.max_partitions; ++pi) {
        const auto si = v2.geom.stat_offset(seq, h, pi);
        if (pi >= np) {  // past this sequence's context: the empty partition
          REQUIRE(v2.part_max[si] == -INFINITY);
          REQUIRE(v2.part_sum[si] == 0.0);
          for (int d = 0; d < s.head_size; ++d) REQUIRE(v2.part_out[v2.geom.out_offset(seq, h, pi, d)] == 0.0);
          continue;
        }
        const PartitionRange r = partition_range(c, s.block_size, psize, pi);
        REQUIRE(!r.empty());
        REQUIRE(std::isfinite(v2.part_max[si]));
        REQUIRE(v2.part_sum[si] >= 1.0);
        REQUIRE(v2.part_sum[si] <= r.token_end - r.token_begin);
        if (r.token_end - r.token_begin == 1) {  // a single-token partition outputs that token's V
          REQUIRE(v2.part_sum[si] == 1.0);
          for (int d = 0; d < s.head_size; ++d)
            REQUIRE(v2.part_out[v2.geom.out_offset(seq, h, pi, d)] == double(p.v_at(seq, p.kv_head(h), r.token_begin, d)));
        }
      }
  }
  // Partition 0 of a context shorter than one partition is v1.
  if (psize == 512) {
    const auto v1 = ref_output(p);
    for (int h = 0; h < s.num_heads; ++h)
      for (int d = 0; d < s.head_size; ++d)
        REQUIRE(v2.part_out[v2.geom.out_offset(4, h, 0, d)] == v1[p.query.out_offset(4, h, d)]);
  }
}

TEST_CASE("V2: partition states equal ref_states over the partition's tokens", "[reference][v2]") {
  ProblemSpec s = spec_of(DType::f16, 128, 16, 2, 1, {1000, 37}, 6500);
  s.partition_size = 64;
  const PagedProblem p = make_problem(s);
  const V2Ref v2 = ref_v2(p);
  REQUIRE(v2.partition_size == 64);
  for (int pi = 0; pi < num_partitions(1000, 64); ++pi) {
    const PartitionRange r = partition_range(1000, 16, 64, pi);
    const auto st = ref_states(p, r.token_begin, r.token_end);
    for (int h = 0; h < 2; ++h) {
      const auto si = v2.geom.stat_offset(0, h, pi);
      REQUIRE(within(v2.part_max[si] + std::log(v2.part_sum[si]), st[h].lse, kRef));
      for (int d = 0; d < 128; ++d) REQUIRE(st[h].out[d] == v2.part_out[v2.geom.out_offset(0, h, pi, d)]);
    }
  }
  REQUIRE_THROWS_AS(ref_v2(p, 24), std::invalid_argument);
  // partition_size 0: one partition, the v1 output exactly.
  test::require_close(ref_output(p), ref_v2(p, 0).out, kRef);
}

TEST_CASE("merge_states: commutative, associative, split context equals the whole", "[reference][states]") {
  const auto dt = GENERATE(DType::f32, DType::bf16);
  ProblemSpec s = spec_of(dt, 64, 16, 4, 1, {1, 2, 50, 333}, 7000);
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const auto whole = ref_states(p, 0, 1 << 30);
  test::require_close(ref_output(p), flat_out(whole), kRef);
  // The lse of the whole context matches the dense reference's.
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const DenseKV kv = make_dense_kv(s, seq);
    std::vector<float> q(64);
    for (int d = 0; d < 64; ++d) q[d] = p.q_at(seq, 0, d);
    double lse = 0;
    dense_attention(q.data(), kv.k.data(), kv.v.data(), kv.context_len, 64, 64, double(s.scale()), &lse);
    REQUIRE(within(lse, whole[seq * 4].lse, kRef));
  }
  for (int split : {0, 1, 17, 49, 50, 200, 333}) {
    INFO("split at " << split);
    const auto a = ref_states(p, 0, split), b = ref_states(p, split, 1 << 30);
    std::vector<AttentionState> ab, ba;
    for (std::size_t i = 0; i < a.size(); ++i) {
      ab.push_back(merge_states(a[i], b[i]));
      ba.push_back(merge_states(b[i], a[i]));
    }
    REQUIRE(flat_out(ab) == flat_out(ba));  // commutative, exactly
    REQUIRE(flat_lse(ab) == flat_lse(ba));
    test::require_close(flat_out(whole), flat_out(ab), kRef);
    test::require_close(flat_lse(whole), flat_lse(ab), kRef);
  }
  // Associative: three pieces grouped both ways.
  const auto x = ref_states(p, 0, 10), y = ref_states(p, 10, 100), z = ref_states(p, 100, 1 << 30);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto l = merge_states(merge_states(x[i], y[i]), z[i]);
    const auto r = merge_states(x[i], merge_states(y[i], z[i]));
    test::require_close(l.out, r.out, kRef);
    REQUIRE(std::fabs(l.lse - r.lse) <= kRef.abs + kRef.rel * std::fabs(l.lse));
    test::require_close(whole[i].out, l.out, kRef);
  }
}

TEST_CASE("empty and -inf states never give NaN", "[reference][states]") {
  const double inf = std::numeric_limits<double>::infinity();
  AttentionState empty;  // default: lse -inf, no output
  REQUIRE(empty.empty());
  const AttentionState ee = merge_states(empty, empty);
  REQUIRE(ee.empty());
  REQUIRE(ee.lse == -inf);
  AttentionState a{{1.0, -2.0, 3.0}, 0.5};
  AttentionState zero_empty{{0.0, 0.0, 0.0}, -inf};
  for (const auto& e : {empty, zero_empty}) {
    for (const auto& m : {merge_states(a, e), merge_states(e, a)}) {
      REQUIRE(m.lse == a.lse);
      REQUIRE(m.out == a.out);
    }
  }
  // Extremely different magnitudes: no overflow, no NaN.
  AttentionState tiny{{5.0, 5.0, 5.0}, -1e300}, huge{{7.0, 7.0, 7.0}, 1e300};
  const auto m = merge_states(tiny, huge);
  REQUIRE(m.lse == 1e300);
  for (double v : m.out) REQUIRE(v == 7.0);
  // Empty token ranges from the reference: zeros and -inf, and merging them is harmless.
  ProblemSpec s = spec_of(DType::f16, 64, 8, 2, 2, {5, 9}, 7500);
  const PagedProblem p = make_problem(s);
  const auto none = ref_states(p, 9, 9), past = ref_states(p, 100, 200), whole = ref_states(p, 0, 9);
  for (std::size_t i = 0; i < none.size(); ++i) {
    REQUIRE(none[i].empty());
    REQUIRE(past[i].empty());
    REQUIRE(none[i].out == std::vector<double>(64, 0.0));
    const auto mm = merge_states(merge_states(none[i], whole[i]), past[i]);
    for (double v : mm.out) REQUIRE(!std::isnan(v));
    REQUIRE(mm.out == whole[i].out);
  }
  REQUIRE_THROWS_AS(merge_states(AttentionState{{1.0}, std::nan("")}, a), std::invalid_argument);
  REQUIRE_THROWS_AS(merge_states(AttentionState{{1.0}, 0.0}, a), std::invalid_argument);  // size mismatch
}

TEST_CASE("cascade: shared prefix merged with each suffix equals attention over prefix + suffix",
          "[reference][cascade]") {
  const auto dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  const auto heads = GENERATE(std::pair{4, 4}, std::pair{8, 2}, std::pair{8, 1});
  const int prefix = GENERATE(16, 64, 256);
  const int group = GENERATE(1, 3, 8);  // sequences sharing the prefix
  std::vector<int> ctx;
  for (int i = 0; i < group; ++i) ctx.push_back(prefix + (i * 37) % 100);  // suffix 0 included (i = 0)
  ProblemSpec s = spec_of(dt, 64, 16, heads.first, heads.second, ctx, 8000 + prefix + group);
  s.shared_prefix_len = prefix;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const CascadeRef c = ref_cascade(p);
  const auto full = ref_output(p);
  test::require_close(full, c.out, kRef);
  REQUIRE(full == dense_output(p));  // the dense copy regenerates the prefix on its own
  const auto whole = ref_states(p, 0, 1 << 30);
  test::require_close(flat_lse(whole), c.lse, kRef);
  for (std::size_t i = 0; i < c.prefix.size(); ++i) {
    REQUIRE(!c.prefix[i].empty());
    const int seq = static_cast<int>(i) / s.num_heads;
    REQUIRE(c.suffix[i].empty() == (p.context_len(seq) == prefix));
  }
}

TEST_CASE("round_to_dtype of outputs: what a kernel stores", "[reference][attention]") {
  ProblemSpec s = spec_of(DType::bf16, 64, 16, 2, 2, {40}, 9000);
  const PagedProblem p = make_problem(s);
  const auto out = ref_output(p);
  for (DType t : kAllDTypes) {
    const auto stored = round_to_dtype(out, t);
    test::require_close(out, stored, tolerance_for(t));  // storing loses less than the tolerance
    for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(stored[i] == round_to_dtype(float(out[i]), t));
  }
  // A wrong token fails every dtype's tolerance: swap the V of two tokens.
  std::vector<float> wrong = round_to_dtype(out, DType::bf16);
  wrong[3] += 0.25f;
  REQUIRE(!compare(out.data(), wrong.data(), out.size(), tolerance_for(DType::bf16)).pass);
}

TEST_CASE("results do not depend on the reference's thread count", "[reference][attention]") {
  ProblemSpec s = spec_of(DType::bf16, 64, 16, 8, 2, {1, 100, 300, 17}, 9500);
  s.shared_prefix_len = 0;
  auto run = [&](const char* threads) {
    ::setenv("PA_REFERENCE_THREADS", threads, 1);
    const PagedProblem p = make_problem(s);
    auto out = ref_output(p);
    const auto v2 = ref_v2(p, 32);
    out.insert(out.end(), v2.part_out.begin(), v2.part_out.end());
    const auto wp = ref_warp_partials(p);
    out.insert(out.end(), wp.values.begin(), wp.values.end());
    const auto dense = dense_output(p);
    out.insert(out.end(), dense.begin(), dense.end());
    return std::pair{p.k_bytes, out};
  };
  const auto one = run("1");
  const auto many = run("7");
  ::unsetenv("PA_REFERENCE_THREADS");
  REQUIRE(one.first == many.first);
  REQUIRE(one.second == many.second);
}

TEST_CASE("a kernel that reads a wrong block fails the comparison", "[reference][attention]") {
  ProblemSpec s = spec_of(DType::bf16, 64, 16, 2, 2, {100}, 9700);
  s.spare_blocks = 2;
  const PagedProblem p = make_problem(s);
  const auto good = ref_output(p);
  // Two full logical blocks swapped (a mis-indexed table): attention has no
  // notion of token order, so the output cannot see it; the per-token
  // logits (stage 2) do.
  PagedProblem swapped = p;
  std::swap(swapped.block_tables[swapped.table.offset(0, 1)], swapped.block_tables[swapped.table.offset(0, 4)]);
  const auto a = round_to_dtype(ref_output(swapped), DType::bf16);
  CHECK(compare(good.data(), a.data(), good.size(), tolerance_for(DType::bf16)).pass);
  const auto good_logits = ref_logits(p).values;
  std::vector<float> swapped_logits;
  for (double x : ref_logits(swapped).values) swapped_logits.push_back(static_cast<float>(x));
  CHECK(!compare(good_logits.data(), swapped_logits.data(), good_logits.size(), tolerance_for(DType::f32)).pass);
  // A spare (garbage) block read instead of a real one.
  std::vector<bool> used(p.num_blocks, false);
  for (int lb = 0; lb < p.num_logical_blocks(0); ++lb) used[p.physical_block(0, lb)] = true;
  const int spare = static_cast<int>(std::find(used.begin(), used.end(), false) - used.begin());
  PagedProblem garbage = p;
  garbage.block_tables[garbage.table.offset(0, 2)] = spare;
  const auto b = round_to_dtype(ref_output(garbage), DType::bf16);
  CHECK(!compare(good.data(), b.data(), good.size(), tolerance_for(DType::bf16)).pass);
  // Reading the NaN tail of the last block (no masking) poisons the result.
  PagedProblem unmasked = p;
  unmasked.context_lens[0] = 112;  // one block's worth, past the real 100
  const auto c = ref_output(unmasked);
  CHECK(std::isnan(c[0]));
}
