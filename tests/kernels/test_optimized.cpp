// Stage 8 (optimized decode kernel) against the CPU reference.
//
// CPU part (always runs): the stage-8 chunk/tile math agrees with
// CacheGeometry::k_offset / v_offset, and the split plan's invariants.
// GPU part ([gpu], SKIPped without a GPU): every built dtype x head size x
// block size, sampled across GQA ratios (incl. MQA and groups > 16), ragged
// contexts (1, bs-1, bs, bs+1, long), NaN tails, Q row padding, forced split
// counts (1, 2, 3, many) and the heuristic; outputs poisoned with NaN first.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <catch2/generators/catch_generators.hpp>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "pa/index/config.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/optimized.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/dtype_convert.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "../support/gpu_skip.hpp"

namespace {

using namespace pa;



// Runs stage 8 on the problem through the runner; returns the output decoded
// to float. Twice: the second run proves the arrival counters were reset
// (the runner zeroes the workspace once, and poisons the output before each run).
std::vector<float> run_optimized(const PagedProblem& pp, int force_splits, OptimizedPlan* plan_out) {
  kernels::RunOptions o;
  o.splits = force_splits;
  kernels::StageRunner runner(pp, kernels::Stage::optimized, o);
  (void)runner.run();
  const kernels::RunResult r = runner.run();
  if (plan_out) *plan_out = *r.optimized;
  return r.out;
}

void check_case(const ProblemSpec& spec, int force_splits) {
  const PagedProblem pp = make_problem(spec);
  OptimizedPlan plan;
  const std::vector<float> got = run_optimized(pp, force_splits, &plan);
  const std::vector<double> ref = ref_output(pp);
  const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(spec.dtype));
  INFO(spec.describe() << " force_splits=" << force_splits << " plan: " << plan.describe());
  INFO(r.summary());
  CHECK(r.num_nan == 0);
  CHECK(r.pass);
}

// The configurations this build compiles for stage 8 (tests/kernels/optimized.cmake
// passes the head sizes of pa_kernels_optimized's instance files; a quick build
// instantiates block size 16 only, a full one every supported block size).
constexpr int kInstanceHeadSizes[] = {PA_OPT_INSTANCE_HEAD_SIZES};
#if PA_QUICK_KERNELS
constexpr int kInstanceBlockSizes[] = {16};
#else
constexpr auto& kInstanceBlockSizes = kSupportedBlockSizes;
#endif
constexpr DType kOptDTypes[] = {DType::f16, DType::bf16};

template <class List>
bool contains(const List& list, int v) {
  return std::find(std::begin(list), std::end(list), v) != std::end(list);
}

std::vector<int> built_head_sizes() {
  std::vector<int> hs;
  for (int h : kSupportedHeadSizes)
    if (optimized_supported(DType::f16, h, 16)) hs.push_back(h);
  return hs;
}
std::vector<int> built_block_sizes() {
  std::vector<int> bs;
  for (int b : kSupportedBlockSizes)
    if (optimized_supported(DType::f16, 128, b)) bs.push_back(b);
  return bs;
}

// The problem the planning tests below plan (they never launch it): one
// dtype, head 128, block 16, no device pointers.
OptimizedArgs plan_only_args(DType dtype, int num_seqs, int num_heads, int num_kv_heads, int max_context_len) {
  OptimizedArgs a;
  a.dtype = dtype;
  a.head_size = 128;
  a.block_size = 16;
  a.num_seqs = num_seqs;
  a.num_heads = num_heads;
  a.num_kv_heads = num_kv_heads;
  a.max_context_len = max_context_len;
  return a;
}

}  // namespace

TEST_CASE("stage 8 chunk math matches the cache layouts", "[optimized]") {
  std::size_t ran = 0;
  // Every chunk of a (page, kv head) tile lands on the elements k_offset /
  // v_offset give for its (token, dim), in each layout; K lands at its
  // (token, dim chunk) row in shared memory whatever the layout; the tile
  // fills every chunk of its block's region once.
  auto check = [&](auto cfg_tag, int hs, int bs, KvLayout layout) {
    using Cfg = decltype(cfg_tag);
    INFO(kv_layout_name(layout) << " head " << hs << " block " << bs);
    REQUIRE(Cfg::kTokenRows == kv_layout_token_rows(layout));
    const KvLayoutGeometry g{layout, CacheGeometry{7, 3, hs, bs, Cfg::kX}};
    std::vector<int> k_seen(Cfg::kTileChunks, 0), v_seen(Cfg::kTileChunks, 0);
    // The tile's first element, also for pages far into a large pool (64-bit offsets).
    for (const int phys : {0, 1, 6, 1 << 20, (1 << 30) + 3})
      for (int h = 0; h < 3; ++h) {
        REQUIRE(Cfg::k_tile_offset(g, phys, h) == g.k_offset(phys, h, 0, 0));
        REQUIRE(Cfg::v_tile_offset(g, phys, h) == g.v_offset(phys, h, 0, 0));
      }
    for (int L = 0; L < Cfg::kTileChunks; ++L) {
      const int kd = Cfg::k_chunk_dim(L), kt = Cfg::k_chunk_token(L);
      const std::int64_t off = Cfg::chunk_elem_offset(L, g.token_stride());
      REQUIRE(g.k_offset(5, 2, kd, kt) == Cfg::k_tile_offset(g, 5, 2) + off);
      REQUIRE(Cfg::k_chunk_byte(g, 5, 2, L) == g.k_offset(5, 2, kd, kt) * Cfg::kKvBytes);
      const int vd = Cfg::v_chunk_dim(L), vt = Cfg::v_chunk_first_token(L);
      REQUIRE(g.v_offset(5, 2, vd, vt) == Cfg::v_tile_offset(g, 5, 2) + off);
      REQUIRE(Cfg::v_chunk_byte(g, 5, 2, L) == g.v_offset(5, 2, vd, vt) * Cfg::kKvBytes);
      // The chunk's x elements are consecutive in memory: x dims of one token
      // (K; V of token rows) or x tokens of one dim (vLLM's V).
      for (int e = 1; e < Cfg::kX; ++e) {
        REQUIRE(g.k_offset(5, 2, kd + e, kt) == g.k_offset(5, 2, kd, kt) + e);
        if (Cfg::kTokenRows) REQUIRE(g.v_offset(5, 2, vd + e, vt) == g.v_offset(5, 2, vd, vt) + e);
        else REQUIRE(g.v_offset(5, 2, vd, vt + e) == g.v_offset(5, 2, vd, vt) + e);
      }
      REQUIRE(Cfg::k_tile_chunk(0, L) == Cfg::k_row_chunk(kt, kd / Cfg::kX));
      if (Cfg::kTokenRows) REQUIRE(Cfg::v_tile_chunk(0, L) == Cfg::k_row_chunk(vt, vd / Cfg::kX));
      ++k_seen[Cfg::k_tile_chunk(0, L)];
      ++v_seen[Cfg::v_tile_chunk(0, L)];
    }
    for (int c : k_seen) REQUIRE(c == 1);
    for (int c : v_seen) REQUIRE(c == 1);
    // The swizzle is a permutation of each 8-chunk line.
    std::vector<int> seen(Cfg::kStepChunks, 0);
    for (int s = 0; s < Cfg::kStepChunks; ++s) seen[Cfg::swizzle(s)]++;
    for (int c : seen) REQUIRE(c == 1);
    // Each 8 consecutive chunks of a tile (128 contiguous bytes in vLLM's
    // and HND's caches) land in one 128-byte line of shared memory, so that
    // a warp's cp.async writes whole lines.
    for (int L = 0; L < Cfg::kTileChunks; ++L) {
      REQUIRE(Cfg::swizzle(Cfg::k_tile_chunk(1, L)) / 8 == Cfg::k_tile_chunk(1, L - L % 8) / 8);
      REQUIRE(Cfg::swizzle(Cfg::v_tile_chunk(1, L)) / 8 == Cfg::v_tile_chunk(1, L - L % 8) / 8);
    }
    // The 8 rows of every ldmatrix land in 8 distinct 16-byte bank groups:
    // QK's (8 tokens of one dim chunk; PV's .trans over token rows reads the
    // same rows of the V region) and PV's over vLLM's dim-major V. Token
    // rows that straddle 128-byte lines (heads 80, 96, 112) reach 2-way.
    const int most = Cfg::kTokenRows && (hs / Cfg::kX) % 8 != 0 ? 2 : 1;
    for (int c = 0; c < hs / Cfg::kX; ++c)
      for (int t0 = 0; t0 < Cfg::kStepTokens; t0 += 8) {
        int per_group[8] = {};
        for (int i = 0; i < 8; ++i) ++per_group[Cfg::swizzle(Cfg::k_row_chunk(t0 + i, c)) % 8];
        REQUIRE(*std::max_element(per_group, per_group + 8) == most);
      }
    if (!Cfg::kTokenRows)
      for (int d0 = 0; d0 < hs; d0 += 8)
        for (int q = 0; q < Cfg::kStepTokens / 8; ++q) {
          int mask = 0;
          for (int i = 0; i < 8; ++i) mask |= 1 << (Cfg::swizzle(Cfg::v_row_chunk(d0 + i, q)) % 8);
          REQUIRE(mask == 0xFF);
        }
    // Token rows: the .trans rows of a k-step and dim tile are tokens
    // 16 kk + 0..15 and dim chunks 2 dt, 2 dt + 1, each once.
    if (Cfg::kTokenRows)
      for (int kk = 0; kk < Cfg::kPvKSteps; ++kk)
        for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
          std::vector<int> hit(32, 0);
          for (int lane = 0; lane < 32; ++lane) {
            const int t = Cfg::pv_trans_token(kk, lane) - 16 * kk, c = Cfg::pv_trans_chunk(dt, lane) - 2 * dt;
            REQUIRE((t >= 0 && t < 16 && c >= 0 && c < 2));
            ++hit[t * 2 + c];
          }
          for (int h : hit) REQUIRE(h == 1);
        }
    ++ran;
  };
  for (KvLayout l : {KvLayout::nhd, KvLayout::hnd}) {
    check(OptConfig<DType::f16, 128, 16, 1, 0, 0, KvDType::same, true>{}, 128, 16, l);
    check(OptConfig<DType::bf16, 80, 8, 2, 0, 0, KvDType::same, true>{}, 80, 8, l);
    check(OptConfig<DType::f16, 256, 32, 1, 0, 0, KvDType::same, true>{}, 256, 32, l);
    check(OptConfig<DType::f16, 64, 16, 1, 0, 0, KvDType::same, true>{}, 64, 16, l);
    check(OptConfig<DType::f16, 96, 16, 1, 0, 0, KvDType::same, true>{}, 96, 16, l);
    check(OptConfig<DType::bf16, 112, 16, 1, 0, 0, KvDType::same, true>{}, 112, 16, l);
  }
  check(OptConfig<DType::f16, 128, 16, 1>{}, 128, 16, KvLayout::vllm);
  check(OptConfig<DType::bf16, 80, 8, 2>{}, 80, 8, KvLayout::vllm);
  check(OptConfig<DType::f16, 256, 32, 1>{}, 256, 32, KvLayout::vllm);
  check(OptConfig<DType::bf16, 128, 16, 2, 0, 0, KvDType::fp8_e4m3>{}, 128, 16, KvLayout::vllm);
  check(OptConfig<DType::f16, 64, 32, 1, 0, 0, KvDType::fp8_e5m2>{}, 64, 32, KvLayout::vllm);
  CHECK(ran == 17);
}

TEST_CASE("stage 8's merges: every (head, dim) of a unit merged by one thread, a warp's loads consecutive",
          "[optimized]") {
  // opt_warp_merge and opt_merge_states: item q = tid, tid + threads, ...
  // holds head merge_head(q)'s dims merge_dim(q, e), e = 0..3. Over a unit of
  // nh heads the items cover each (head, dim) exactly once, an item's four
  // dims are consecutive (one 16-byte load), and the items of a warp round
  // touch, per head, one run of consecutive dims.
  int ran = 0;
  auto check = [&](auto cfg_tag) {
    using Cfg = decltype(cfg_tag);
    constexpr int HS = Cfg::kHeadSize;
    for (int nh = 1; nh <= OptWorkspaceGeometry::kUnitHeads; ++nh) {
      INFO("head " << HS << ", " << nh << " heads");
      std::vector<int> seen(static_cast<std::size_t>(nh) * HS, 0);
      const int items = nh * Cfg::kMergeItemsPerHead;
      for (int q = 0; q < items; ++q)
        for (int e = 0; e < 4; ++e) {
          const int g = Cfg::merge_head(q), d = Cfg::merge_dim(q, e);
          REQUIRE(g < nh);
          REQUIRE(d < HS);
          REQUIRE(d == Cfg::merge_dim(q, 0) + e);
          ++seen[static_cast<std::size_t>(g) * HS + d];
        }
      REQUIRE(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));
      for (int w0 = 0; w0 < items; w0 += kWarpSize)
        for (int q = w0 + 1; q < std::min(items, w0 + kWarpSize); ++q)
          if (Cfg::merge_head(q) == Cfg::merge_head(q - 1)) REQUIRE(Cfg::merge_dim(q, 0) == Cfg::merge_dim(q - 1, 3) + 1);
      // The item's 16-byte workspace accesses (state store, merge load) are
      // aligned wherever the workspace is (launch_optimized requires 16 bytes).
      const OptWorkspaceGeometry wsg{3, 5, 40, HS};
      for (int q = 0; q < items; ++q)
        REQUIRE(wsg.out_offset(2, 4, 39, Cfg::merge_head(q), Cfg::merge_dim(q, 0)) % 4 == 0);
      ++ran;
    }
  };
  check(OptConfig<DType::f16, 64, 16, 2>{});
  check(OptConfig<DType::bf16, 80, 8, 1>{});
  check(OptConfig<DType::f16, 96, 16, 1>{});
  check(OptConfig<DType::bf16, 112, 16, 2>{});
  check(OptConfig<DType::f16, 128, 16, 1>{});
  check(OptConfig<DType::bf16, 192, 32, 2>{});
  check(OptConfig<DType::f16, 256, 16, 2>{});
  CHECK(ran == 7 * OptWorkspaceGeometry::kUnitHeads);
  // The merge steps from split to split (and from a max to its sum) by the
  // workspace's constant strides; they are the offsets' differences.
  int strides = 0;
  for (const int hs : {64, 80, 128, 256}) {
    const OptWorkspaceGeometry w{3, 5, 40, hs};
    for (const auto& [seq, unit, sp, g] : {std::tuple{0, 0, 0, 0}, {2, 4, 38, 15}, {1, 3, 7, 9}}) {
      CHECK(w.stat_offset(seq, unit, sp + 1, 0, g) - w.stat_offset(seq, unit, sp, 0, g) ==
            OptWorkspaceGeometry::kStatSplitStride);
      CHECK(w.stat_offset(seq, unit, sp, 1, g) - w.stat_offset(seq, unit, sp, 0, g) ==
            OptWorkspaceGeometry::kStatSumOffset);
      CHECK(w.out_offset(seq, unit, sp + 1, g, 5) - w.out_offset(seq, unit, sp, g, 5) ==
            OptWorkspaceGeometry::out_split_stride(hs));
      ++strides;
    }
  }
  CHECK(strides == 12);
}

TEST_CASE("stage 8's split merge batch: 1 or the largest, the fewer L2 round trips, a round's states at most kMergeSplits",
          "[optimized]") {
  // opt_merge_batch (the kernel's opt_merge_states and the host model pick
  // with it): a thread's items in batches of b, b x (merge_splits / b) states
  // a round.
  CHECK(opt_merge_max_batch(256, 128, 16) == 8);  // 16 heads x 64 items over 128 threads
  CHECK(opt_merge_max_batch(192, 128, 16) == 8);  // 6 items, rounded up
  CHECK(opt_merge_max_batch(128, 128, 16) == 4);
  CHECK(opt_merge_max_batch(64, 128, 16) == 2);
  CHECK(opt_merge_max_batch(64, 256, 8) == 1);   // fp8 head 64: 8 warps
  CHECK(opt_merge_max_batch(256, 128, 8) == 4);  // fp8 head 256: a batched round holds 4 states
  CHECK(opt_merge_round_states(16, 1) == 16);
  CHECK(opt_merge_round_states(16, 4) == 8);
  CHECK(opt_merge_batch(8, 2, 16, 8) == 8);      // 16 heads of 256, 2 splits: 2 round trips, not 8
  CHECK(opt_merge_rounds(8, 2, 16, 8) == 2);
  CHECK(opt_merge_rounds(8, 2, 16, 1) == 8);
  CHECK(opt_merge_batch(1, 13, 16, 4) == 1);     // one item: 13 splits in one round, as before
  CHECK(opt_merge_batch(4, 3, 16, 4) == 4);      // 2 trips against 4
  CHECK(opt_merge_batch(8, 3, 16, 8) == 8);      // 3 trips of one split of each item, against 8
  CHECK(opt_merge_batch(2, 32, 16, 2) == 1);     // many splits fill their rounds: one item at a time
  CHECK(opt_merge_batch(4, 16, 16, 4) == 1);     // 4 trips one item at a time, 8 batched
  int ran = 0;
  for (const int ms : {8, 16})
    for (const int max_batch : {1, 2, 4, 8})
      for (int items = 1; items <= 8; ++items)
        for (int splits = 1; splits <= 256; ++splits) {
          if (max_batch > ms / 2) continue;  // opt_merge_max_batch never gives more
          const int b = opt_merge_batch(items, splits, ms, max_batch);
          INFO(items << " items, " << splits << " splits, " << ms << " a round, batch at most " << max_batch);
          REQUIRE((b == 1 || b == max_batch));  // two instances of the merge
          const int states = opt_merge_round_states(ms, b);
          REQUIRE((states % b == 0 && states <= ms));  // b items x (states / b) splits, at most ms in flight
          const int one = opt_merge_rounds(items, splits, ms, 1), most = opt_merge_rounds(items, splits, ms, max_batch);
          REQUIRE(opt_merge_rounds(items, splits, ms, b) == std::min(one, most));
          if (b > 1) REQUIRE(most < one);  // one item at a time where they tie
          ++ran;
        }
  CHECK(ran == (3 + 4) * 8 * 256);  // ms 8: batches up to 4; ms 16: up to 8
}

TEST_CASE("stage 8's warp merge: a warp's fragment stores hit 32 banks, its item loads are 16-byte aligned",
          "[optimized]") {
  // opt_warp_merge stores each lane's O^T fragment element (dim o_dim(dt,
  // lane) (+8), head o_head(lane) + e (+8h)) to red_offset: the 32 lanes of
  // one store instruction must land in 32 different banks (4-byte words mod
  // 32), or the store replays. The items' float4 loads need 16-byte
  // alignment, and the rows must fit the scratch the kernel sizes.
  int stores = 0, loads = 0;
  auto check = [&](auto cfg_tag) {
    using Cfg = decltype(cfg_tag);
    constexpr int HS = Cfg::kHeadSize;
    INFO("head " << HS << ", head tiles " << Cfg::kHeadTiles << ", warps " << Cfg::kNumWarps);
    for (int warp = 0; warp < Cfg::kNumWarps; ++warp)
      for (int h = 0; h < Cfg::kHeadTiles; ++h)
        for (int e = 0; e < 2; ++e)
          for (int dt = 0; dt < Cfg::kDimTiles; ++dt)
            for (int half = 0; half < 2; ++half) {
              std::vector<int> bank_users(32, 0);
              for (int lane = 0; lane < kWarpSize; ++lane) {
                const int off = Cfg::red_offset(warp, Cfg::o_head(lane) + e + 8 * h, Cfg::o_dim(dt, lane) + 8 * half);
                REQUIRE(off >= 0);
                REQUIRE(4 * off < Cfg::kRedBytes);
                ++bank_users[static_cast<std::size_t>(off % 32)];
              }
              REQUIRE(std::count(bank_users.begin(), bank_users.end(), 1) == 32);
              ++stores;
            }
    for (int warp = 0; warp < Cfg::kNumWarps; ++warp)
      for (int q = 0; q < Cfg::kMaxUnitHeads * Cfg::kMergeItemsPerHead; ++q) {
        const int off = Cfg::red_offset(warp, Cfg::merge_head(q), Cfg::merge_dim(q, 0));
        REQUIRE(off % 4 == 0);
        REQUIRE(4 * (off + 4) <= Cfg::kRedBytes);
        ++loads;
      }
  };
  check(OptConfig<DType::f16, 64, 16, 2>{});
  check(OptConfig<DType::bf16, 80, 8, 1>{});
  check(OptConfig<DType::f16, 96, 16, 1>{});
  check(OptConfig<DType::bf16, 112, 32, 2>{});
  check(OptConfig<DType::f16, 128, 16, 1>{});
  check(OptConfig<DType::bf16, 192, 16, 1>{});
  check(OptConfig<DType::f16, 256, 16, 2>{});
  check(OptConfig<DType::f16, 64, 16, 1, 0, 0, KvDType::fp8_e4m3>{});  // 8 warps
  // (warps x head tiles x 2 x dim tiles x 2) store instructions per config.
  CHECK(stores == 4 * 2 * 2 * 4 * 2 + 4 * 1 * 2 * 5 * 2 + 4 * 1 * 2 * 6 * 2 + 4 * 2 * 2 * 7 * 2 + 4 * 1 * 2 * 8 * 2 +
                      4 * 1 * 2 * 12 * 2 + 4 * 2 * 2 * 16 * 2 + 8 * 1 * 2 * 4 * 2);
  CHECK(loads == 4 * 16 * 16 + 4 * 8 * 20 + 4 * 8 * 24 + 4 * 16 * 28 + 4 * 8 * 32 + 4 * 8 * 48 + 4 * 16 * 64 +
                     8 * 8 * 16);
}

TEST_CASE("stage 8, P in fp16: a warp's running state sums a quarter of a split at most, so the rounding bound "
          "stays inside bf16's tolerance up to 2,000,000 tokens",
          "[optimized][fp8]") {
  // PV packs P to fp16 (bf16 queries with an fp8 cache too). A weight under
  // 2^-14 of its warp's running maximum is rounded to a multiple of 2^-24,
  // off by at most 2^-25; the exp sum is kept in float, so N such tokens in
  // one running state move the output by at most (2^-11 + N 2^-25) max|V|
  // (lesson 8). N is at most the tokens one warp accumulates: steps w, w + 4,
  // ... of its split, the whole context when the split count is 1.
  using Cfg = OptConfig<DType::bf16, 128, 16, 1, 0, 0, KvDType::fp8_e4m3>;
  const double tol = tolerance_for(DType::bf16).abs;
  int ran = 0;
  for (const int ctx : {1, 31, 32, 33, 4096, 131072, 1 << 20, 2000000, 2100000}) {
    INFO("context " << ctx);
    const int nsteps = (ctx + Cfg::kStepTokens - 1) / Cfg::kStepTokens;  // one split: the longest states
    int most = 0, total = 0;
    for (int w = 0; w < Cfg::kNumWarps; ++w) {
      most = std::max(most, Cfg::warp_steps(nsteps, w));
      total += Cfg::warp_steps(nsteps, w);
    }
    REQUIRE(total == nsteps);
    const double n = static_cast<double>(most) * Cfg::kStepTokens;
    REQUIRE(n <= ctx / 4.0 + Cfg::kStepTokens);
    const double bound = std::ldexp(1.0, -11) + n * std::ldexp(1.0, -25);
    CHECK((bound < tol) == (ctx <= 2000000));  // 2.1 M tokens in one split would pass it
    ++ran;
  }
  CHECK(ran == 9);
}

TEST_CASE("stage 8's dispatcher holds exactly the instances the build compiles", "[optimized]") {
  CHECK(std::size(kInstanceHeadSizes) >= 1);
  for (DType dt : kAllDTypes)
    for (int hs : kSupportedHeadSizes)
      for (int bs : kSupportedBlockSizes) {
        INFO(dtype_name(dt) << " head " << hs << " block " << bs);
        const bool instantiated =
            dt != DType::f32 && contains(kInstanceHeadSizes, hs) && contains(kInstanceBlockSizes, bs);
        CHECK(optimized_supported(dt, hs, bs) == instantiated);
      }
}

TEST_CASE("stage 8 rejects what it does not support", "[optimized]") {
  OptimizedArgs a = plan_only_args(DType::f32, 1, 8, 2, 10);
  CHECK_THROWS_AS(plan_optimized(a), std::invalid_argument);
  a.dtype = DType::f16;
  a.num_kv_heads = 3;
  CHECK_THROWS_AS(plan_optimized(a), std::invalid_argument);
  CHECK_FALSE(optimized_supported(DType::f16, 100, 16));
  CHECK(optimized_supported_list().find("fp16") != std::string::npos);
}

TEST_CASE("stage 8 rejects a bad cascade-suffix range or half a state", "[optimized]") {
  OptimizedArgs a = plan_only_args(DType::f16, 1, 8, 8, 100);  // checked before any device call
  const auto message = [&] {
    try {
      (void)plan_optimized(a);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  a.first_token = 8;  // not a multiple of the block size 16
  CHECK(message().find("first_token=8: need >= 0 and a multiple of the block size 16") != std::string::npos);
  a.first_token = -16;
  CHECK(message().find("first_token=-16") != std::string::npos);
  a.first_token = 16;
  float dummy = 0.f;
  a.state_out = &dummy;  // without state_lse
  CHECK(message().find("state_out and state_lse go together") != std::string::npos);
  a.state_out = nullptr;
  a.state_lse = &dummy;
  CHECK(message().find("state_out and state_lse go together") != std::string::npos);
}

TEST_CASE("stage 8 refuses a misaligned workspace, output or state, before any device call", "[optimized]") {
  // The split states are stored and merged 16 bytes at a time, and a thread
  // writes four consecutive dims of a head with one store: 8 bytes of output
  // or 16 of a state. Memory cudaMalloc did not hand out may be misaligned.
  OptimizedArgs a = plan_only_args(DType::f16, 1, 8, 8, 4096);
  OptimizedPlan plan;
  plan.splits = 4;
  auto message = [&](void* ws) {
    try {
      launch_optimized(a, plan, ws);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  alignas(16) static unsigned char bytes[64];
  CHECK_THAT(message(nullptr), Catch::Matchers::ContainsSubstring("4 splits but no workspace was given"));
  struct Case {
    const char* what;  // the pointer made misaligned
    int offset, width;
  };
  int ran = 0;
  for (const Case& c : {Case{"workspace", 4, 16}, Case{"workspace", 8, 16}, Case{"workspace", 12, 16},
                        Case{"out", 2, 8}, Case{"out", 4, 8}, Case{"out", 6, 8}, Case{"state_out", 4, 16},
                        Case{"state_out", 8, 16}, Case{"state_out", 12, 16}}) {
    const std::string what = c.what;
    INFO(what << " at offset " << c.offset);
    void* ws = what == "workspace" ? bytes + c.offset : bytes;
    a.out = what == "out" ? bytes + c.offset : nullptr;
    a.state_out = what == "state_out" ? reinterpret_cast<float*>(bytes + c.offset) : nullptr;
    a.state_lse = a.state_out != nullptr ? reinterpret_cast<float*>(bytes) : nullptr;
    const std::string m = message(ws);
    const std::string width = std::to_string(c.width);
    CHECK_THAT(m, Catch::Matchers::StartsWith("stage 8: " + what + " at "));
    CHECK_THAT(m, Catch::Matchers::ContainsSubstring("is not " + width + "-byte aligned"));
    CHECK_THAT(m, Catch::Matchers::ContainsSubstring("accepted: a " + width + "-byte aligned address"));
    ++ran;
  }
  CHECK(ran == 9);
}

TEST_CASE("stage 8 matches the reference: every dtype x head size x block size", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const int sample = GENERATE(0, 1);
  std::size_t ran = 0;
  for (DType dt : kOptDTypes)
    for (int hs : built_head_sizes())
      for (int bs : built_block_sizes()) {
        ProblemSpec s;
        s.dtype = dt;
        s.head_size = hs;
        s.block_size = bs;
        // GQA ratio sampled per configuration: 1, 4, 8 heads per kv head.
        const int ratios[] = {1, 4, 8};
        const int ratio = ratios[(hs / 16 + bs + sample) % 3];
        s.num_kv_heads = 2;
        s.num_heads = 2 * ratio;
        s.context_lens = {1, bs - 1, bs, bs + 1, 300 + 37 * sample, 1000};
        s.seed = 1000 + hs * 7 + bs + 13 * sample + (dt == DType::bf16 ? 5 : 0);
        s.extra_q_stride = sample ? 8 : 0;
        s.alibi = sample == 1;  // every configuration once without ALiBi, once with
        check_case(s, sample == 0 ? 0 : 3);
        ++ran;
      }
  CHECK(ran == std::size(kOptDTypes) * std::size(kInstanceHeadSizes) * std::size(kInstanceBlockSizes));
}

TEST_CASE("stage 8: GQA ratios incl. MQA and groups over 16", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const auto [heads, kv_heads] = GENERATE(table<int, int>(
      {{8, 8}, {8, 1}, {12, 4}, {32, 8}, {32, 2}, {40, 4}, {64, 2}, {48, 1}}));
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = heads;
    s.num_kv_heads = kv_heads;
    s.context_lens = {17, 1, 513, 64};
    s.seed = 77 + heads + kv_heads;
    s.alibi = dt == DType::bf16;  // every group size with ALiBi too (slopes per query head of the unit)
    check_case(s, 0);
    check_case(s, 2);
  }
}

TEST_CASE("stage 8: split counts and long ragged contexts", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  const int splits = GENERATE(1, 2, 3, 7, 64, 256);
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.context_lens = {5000, 1, 16, 2049, 333};
    s.seed = 4242 + splits;
    s.alibi = dt == DType::f16;  // ALiBi across splits: positions from the sequence's end in every split
    check_case(s, splits);
  }
}

TEST_CASE("stage 8's split merge: every batch of items", "[optimized][gpu]") {
  // Units of 16 and 5 query heads, split counts that make opt_merge_batch
  // pick each batch its head size allows (16 heads of 256 dims: 8 items a
  // thread), with a thread's last batch part empty (5 heads x 64 items over
  // 128 threads: some threads own 3 items of a batch of 4).
  PA_REQUIRE_GPU();
  int ran = 0;
  std::vector<int> batches_seen;
  for (const int hs : built_head_sizes())
    for (const auto& [heads, kv_heads] : {std::pair{16, 1}, std::pair{10, 2}})
      for (const int splits : {2, 3, 5, 9, 17}) {
        ProblemSpec s;
        s.dtype = (splits % 2) ? DType::f16 : DType::bf16;
        s.head_size = hs;
        s.block_size = 16;
        s.num_heads = heads;
        s.num_kv_heads = kv_heads;
        s.context_lens = {17 * 16 * 3, 200, 1};
        s.seed = 5150 + hs + splits + heads;
        check_case(s, splits);
        // The kernel's threads and states a round for this instance (2-byte cache, pages).
        const int threads = 32 * opt_num_warps(hs, s.block_size, 2, false), states = opt_merge_splits(2);
        const int items = ceil_div(heads / kv_heads * hs / 4, threads);
        batches_seen.push_back(opt_merge_batch(items, splits, states, opt_merge_max_batch(hs, threads, states)));
        ++ran;
      }
  CHECK(ran == static_cast<int>(built_head_sizes().size()) * 2 * 5);
  // Head 128 (every build has it) reaches both of its merges, batches 1 and 4.
  for (const int b : {1, 4}) CHECK(std::count(batches_seen.begin(), batches_seen.end(), b) > 0);
}

TEST_CASE("stage 8: heuristic split on one long sequence", "[optimized][gpu]") {
  PA_REQUIRE_GPU();
  for (DType dt : {DType::f16, DType::bf16}) {
    ProblemSpec s;
    s.dtype = dt;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = 32;
    s.num_kv_heads = 8;
    s.context_lens = {20000};
    s.seed = 99;
    const PagedProblem pp = make_problem(s);
    OptimizedPlan plan;
    const std::vector<float> got = run_optimized(pp, 0, &plan);
    INFO(plan.describe());
    CHECK(plan.splits > 1);  // one sequence of 8 kv heads must be split to fill the GPU
    const std::vector<double> ref = ref_output(pp);
    const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(dt));
    INFO(r.summary());
    CHECK(r.pass);
  }
}

TEST_CASE("stage 8: planning a launch costs the host microseconds, not a device query", "[optimized][gpu]") {
  // Every launch plans (a PyTorch call, a StageLaunch), so the plan must not
  // ask the driver for the device's attributes each time: the SM count, memory
  // clock and bus width, asked on every plan, cost a PyTorch call ~550 us of
  // host time on an H200, 30 times the kernel at small shapes. They are read
  // once; the split is replayed once per distinct input (tens of us) and kept,
  // so the layers of a model that launch one shape after another plan in a
  // few microseconds.
  PA_REQUIRE_GPU();
  const OptimizedArgs a = plan_only_args(DType::f16, 1, 32, 8, 4096);
  const OptimizedPlan first = plan_optimized(a);  // reads the device's facts once
  REQUIRE(first.sm_count > 0);
  REQUIRE(first.dram_gbps > 0);
  constexpr int kPlans = 2000;
  const auto per_plan_us = [&](auto&& plan_once) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kPlans; ++i) plan_once(i);
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kPlans;
  };
  int ran = 0;
  const double us = per_plan_us([&](int) {
    const OptimizedPlan p = plan_optimized(a);
    ran += p.splits == first.splits && p.sm_count == first.sm_count;
  });
  CHECK(ran == kPlans);  // every plan the same: the cached facts are the queried ones
  INFO("host time per plan, the same input again: " << us << " us");
  CHECK(us < 20.0);
  // A ragged batch of 64 sequences up to 32768 tokens, with each one's
  // length: the same input again, then two inputs in turn (each plan replays).
  OptimizedArgs r = plan_only_args(DType::f16, 64, 32, 8, 32768);
  std::vector<int> lens_a(64), lens_b(64);
  for (int i = 0; i < 64; ++i) {
    lens_a[i] = 32768 - 509 * i;
    lens_b[i] = 32768 - 511 * i;
  }
  r.host_context_lens = lens_a.data();
  const int splits_a = plan_optimized(r).splits;
  r.host_context_lens = lens_b.data();
  const int splits_b = plan_optimized(r).splits;
  int same = 0;
  r.host_context_lens = lens_a.data();
  const double us_same = per_plan_us([&](int) { same += plan_optimized(r).splits == splits_a; });
  const double us_turns = per_plan_us([&](int i) {
    r.host_context_lens = i % 2 ? lens_b.data() : lens_a.data();
    same += plan_optimized(r).splits == (i % 2 ? splits_b : splits_a);
  });
  CHECK(same == 2 * kPlans);
  INFO("host time per plan from 64 lengths: " << us_same << " us the same again, " << us_turns
                                              << " us replayed each time");
  CHECK(us_same < 20.0);
  CHECK(us_turns < 150.0);
}
