// Stages 6 (V2 split-KV) and 7 (attention-state merge, cascade) against the
// CPU reference.
//
// CPU part (always runs): token-range partition math, the prefix kernel's
// shared-memory tile map against CacheGeometry, the chunk rule, the V1/V2 rule.
// GPU part ([gpu], SKIPped without a GPU): V2 partitions and reduce (single-
// token partitions, contexts shorter than one partition, many partitions,
// 131072 tokens), the merge kernel (-inf lse, empty states with NaN outputs),
// cascade == plain attention over prefix + suffix for several prefix and
// suffix lengths, group sizes, GQA ratios and dtypes. Every output buffer is
// NaN-poisoned before each launch (the runners do it).
#include <catch2/catch_get_random_seed.hpp>
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "pa/index/cascade.hpp"
#include "pa/index/optimized.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade_args.hpp"
#include "pa/kernels/cascade_run.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/v2_partition_args.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"

namespace {

// Every build's instance list repeats its (head, block) pairs for each of the
// 7 (dtype, cache) pairs: fp32, fp16, bf16 with their own cache, fp16 and
// bf16 with each fp8 cache.
constexpr int kDTypeCachePairs = 7;

using namespace pa;
using namespace pa::kernels;

std::uint64_t seed_for(std::uint64_t salt) {
  return static_cast<std::uint64_t>(Catch::getSeed()) * 0x9e3779b97f4a7c15ull + salt * 0xd1b54a32d192ed03ull + 7;
}

void require_gpu() {
  std::string why;
  if (!gpu_available(&why)) SKIP("no GPU: " + why);
}

template <class R, class G>
void require_close(const std::vector<R>& ref, const std::vector<G>& got, Tolerance tol, const std::string& what) {
  REQUIRE(ref.size() == got.size());
  const CompareResult r = compare(ref.data(), got.data(), ref.size(), tol);
  INFO(what << ": " << r.summary());
  REQUIRE(r.pass);
}

bool no_nan(const std::vector<float>& v) {
  for (float x : v)
    if (std::isnan(x)) return false;
  return true;
}

// One (head, block) per dtype from this build (the first built: 128 x 16 in quick builds).
std::vector<KernelKey> one_config_per_dtype() {
  std::vector<KernelKey> out;
  std::set<int> seen;
  for (const auto& k : built_configs())
    if (seen.insert(static_cast<int>(k.dtype)).second) out.push_back(k);
  return out;
}

ProblemSpec spec_for(const KernelKey& k, std::vector<int> ctx, int heads, int kv_heads, std::uint64_t salt) {
  ProblemSpec s;
  s.dtype = k.dtype;
  s.head_size = k.head_size;
  s.block_size = k.block_size;
  s.num_threads = k.num_threads;
  s.kv_dtype = k.kv_dtype;  // V2 runs the fp8 instances too; the cascade tests skip them
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.context_lens = std::move(ctx);
  s.seed = seed_for(salt);
  // Every third problem (by salt) carries ALiBi's slopes, so each V2 and
  // cascade test meets the bias on a sample of its cases (describe() says "alibi").
  s.alibi = salt % 3 == 0;
  return s;
}

std::vector<double> lse_of(const std::vector<AttentionState>& st) {
  std::vector<double> v;
  for (const auto& s : st) v.push_back(s.lse);
  return v;
}
std::vector<double> out_of(const PagedProblem& p, const std::vector<AttentionState>& st) {
  std::vector<double> v(st.size() * p.spec.head_size);
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < p.spec.num_heads; ++h)
      for (int d = 0; d < p.spec.head_size; ++d)
        v[p.query.out_offset(seq, h, d)] = st[static_cast<std::size_t>(seq) * p.spec.num_heads + h].out[d];
  return v;
}

// Stages 6 and 7 through the one runner (pa/kernels/runner.hpp), as pa-lab runs them.
RunResult run_v2(const PagedProblem& p, int partition_size, bool single_partition_direct) {
  RunOptions o;
  o.partition_size = partition_size;
  o.single_partition_direct = single_partition_direct;
  return StageRunner(p, Stage::v2_partition, o).run();
}
RunResult run_cascade(const PagedProblem& p, int chunk_len, const CascadeOptions& opt) {
  RunOptions o;
  o.chunk_len = chunk_len;
  o.cascade = opt;
  return StageRunner(p, Stage::cascade_merge, o).run();
}

// Checks run_v2 against ref_v2 (partitions when they were written, the reduced
// output, the lse).
void check_v2(const PagedProblem& p, int ps, bool direct) {
  const V2Ref ref = ref_v2(p, ps);
  const RunResult got = run_v2(p, ps, direct);
  REQUIRE(got.max_partitions == ref.max_partitions);
  INFO(p.spec.describe() << " partition " << ps << (direct ? " direct" : " all-partitions"));
  require_close(ref.out, got.out, tolerance_for(p.spec.dtype), "output");
  require_close(lse_of(ref_states(p, 0, std::numeric_limits<int>::max())), got.lse, lse_tolerance(DType::f32), "lse");
  // Partition entries: compare those of partitions inside each context (the
  // rest are empty and, by contract, not written: still NaN from the poison).
  std::vector<double> ro, rm, rs;
  std::vector<float> go, gm, gs;
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const int np = num_partitions(p.context_len(seq), ps);
    if (direct && np == 1) continue;
    for (int h = 0; h < p.spec.num_heads; ++h)
      for (int pi = 0; pi < np; ++pi) {
        const auto si = ref.geom.stat_offset(seq, h, pi);
        rm.push_back(ref.part_max[si]);
        rs.push_back(ref.part_sum[si]);
        gm.push_back(got.part_max[si]);
        gs.push_back(got.part_sum[si]);
        for (int d = 0; d < p.spec.head_size; ++d) {
          ro.push_back(ref.part_out[ref.geom.out_offset(seq, h, pi, d)]);
          go.push_back(got.part_out[ref.geom.out_offset(seq, h, pi, d)]);
        }
      }
  }
  if (!p.has_alibi()) {
    require_close(ro, go, tolerance_for(DType::f32), "part_out");
    require_close(rm, gm, tolerance_for(DType::f32), "part_max");
    require_close(rs, gs, tolerance_for(DType::f32), "part_sum");
    return;
  }
  // With ALiBi a partition far from the end has logits of large magnitude,
  // rounded in float: each partition's own widened tolerance
  // (with_float_logit_rounding; its max logit is part_max).
  double vmax = 0;  // over the values the sequences read (not the spare blocks' garbage)
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int t = 0; t < p.context_len(seq); ++t)
      for (int kvh = 0; kvh < p.num_kv_heads(); ++kvh)
        for (int d = 0; d < p.head_size(); ++d) vmax = std::max(vmax, double(std::fabs(p.v_at(seq, kvh, t, d))));
  const std::size_t n_parts = rm.size(), hs = static_cast<std::size_t>(p.spec.head_size);
  REQUIRE(ro.size() == n_parts * hs);
  std::size_t compared = 0;
  for (std::size_t i = 0; i < n_parts; ++i) {
    const Tolerance t = with_float_logit_rounding(tolerance_for(DType::f32), rm[i], 2 * vmax);
    INFO("partition entry " << i << " max logit " << rm[i]);
    require_close(std::vector<double>(ro.begin() + i * hs, ro.begin() + (i + 1) * hs),
                  std::vector<float>(go.begin() + i * hs, go.begin() + (i + 1) * hs), t, "part_out");
    require_close(std::vector<double>{rm[i]}, std::vector<float>{gm[i]}, t, "part_max");
    require_close(std::vector<double>{rs[i]}, std::vector<float>{gs[i]}, t, "part_sum");
    ++compared;
  }
  CHECK(compared == n_parts);
}

}  // namespace

// ---- CPU ----------------------------------------------------------------------------

TEST_CASE("partition_range_in shifts partitions by the range and clamps to the context", "[v2]") {
  const TokenRange whole{};
  for (int ctx : {1, 15, 16, 17, 512, 513, 5000}) {
    for (int ps : {16, 512}) {
      REQUIRE(num_partitions_in(whole, ctx, ps) == num_partitions(ctx, ps));
      for (int i = 0; i < num_partitions(ctx, ps); ++i) {
        const auto a = partition_range_in(whole, ctx, 16, ps, i);
        const auto b = partition_range(ctx, 16, ps, i);
        REQUIRE(a.token_begin == b.token_begin);
        REQUIRE(a.token_end == b.token_end);
        REQUIRE(a.block_begin == b.block_begin);
        REQUIRE(a.block_end == b.block_end);
      }
    }
  }
  const TokenRange suffix{64, -1};
  REQUIRE(num_partitions_in(suffix, 64, 512) == 0);  // all prefix: empty range
  REQUIRE(num_partitions_in(suffix, 65, 512) == 1);
  REQUIRE(num_partitions_in(suffix, 64 + 1025, 512) == 3);
  const auto r = partition_range_in(suffix, 64 + 1025, 16, 512, 2);
  REQUIRE(r.token_begin == 64 + 1024);
  REQUIRE(r.token_end == 64 + 1025);
  REQUIRE(r.block_begin == (64 + 1024) / 16);
  REQUIRE(r.block_end == (64 + 1025 + 15) / 16);
  const TokenRange prefix{0, 100};
  REQUIRE(num_partitions_in(prefix, 5000, 32) == 4);
  REQUIRE(partition_range_in(prefix, 5000, 16, 32, 3).token_end == 100);
}

namespace {
// Every (token, dim) of a tile maps, through the copy (region chunk ->
// swizzled slot) and through k_smem_chunk / v_smem_chunk, to the same cache
// element; the 8 rows of each ldmatrix fall in 8 different 16-byte bank groups.
template <class Cfg, int TILE = 0, int STAGES = 2>
void check_tile_map() {
  using Tl = PrefixTiling<Cfg, 4, TILE, STAGES>;
  INFO("head " << Cfg::kHeadSize << " block " << Cfg::kBlockSize);
  CacheGeometry g{3 * Tl::kBlocksPerTile, 2, Cfg::kHeadSize, Cfg::kBlockSize, Cfg::kX};
  std::vector<int> phys;
  for (int b = 0; b < Tl::kBlocksPerTile; ++b) phys.push_back((b * 7 + 5) % g.num_blocks);
  const int kvh = 1;
  std::vector<std::int64_t> slot(Tl::kTileChunks, -1);
  for (int c = 0; c < Tl::kTileChunks; ++c) {
    const int s = Tl::swizzle(c);
    REQUIRE(slot[s] == -1);  // the swizzle is a permutation
    slot[s] = Tl::region_chunk_offset(g, phys[Tl::tile_block_of_chunk(c)], kvh, Tl::region_chunk_of(c));
  }
  for (int t = 0; t < Tl::kTileTokens; ++t)
    for (int d = 0; d < Cfg::kHeadSize; d += 8)
      REQUIRE(slot[Tl::k_smem_chunk(t, d)] == g.k_offset(phys[t / Cfg::kBlockSize], kvh, d, t % Cfg::kBlockSize));
  for (int t = 0; t < Tl::kTileTokens; t += 8)
    for (int d = 0; d < Cfg::kHeadSize; ++d)
      REQUIRE(slot[Tl::v_smem_chunk(t, d)] == g.v_offset(phys[t / Cfg::kBlockSize], kvh, d, t % Cfg::kBlockSize));
  for (int t = 0; t < Tl::kTileTokens; t += 8)
    for (int d = 0; d < Cfg::kHeadSize; d += 8) {
      std::set<int> kb, vb;
      for (int r = 0; r < 8; ++r) {
        kb.insert(Tl::k_smem_chunk(t + r, d) % 8);
        vb.insert(Tl::v_smem_chunk(t, d + r) % 8);
      }
      REQUIRE(kb.size() == 8);
      REQUIRE(vb.size() == 8);
    }
  // The copy keeps each 128-byte line of the cache (8 region chunks) in one
  // 128-byte span of shared memory, so L2 serves it in whole-line requests.
  int lines = 0;
  for (int c = 0; c < Tl::kTileChunks; c += 8, ++lines)
    for (int i = 1; i < 8; ++i) REQUIRE(Tl::swizzle(c + i) / 8 == Tl::swizzle(c) / 8);
  REQUIRE(lines == Tl::kTileChunks / 8);
}
}  // namespace

TEST_CASE("the prefix kernel's shared tiles hold exactly the K/V elements the mma reads", "[cascade]") {
  check_tile_map<KernelConfig<DType::f16, 128, 16, 128>>();
  check_tile_map<KernelConfig<DType::bf16, 64, 8, 128>>();
  check_tile_map<KernelConfig<DType::f16, 80, 32, 128>>();
  check_tile_map<KernelConfig<DType::bf16, 256, 16, 128>>();
  check_tile_map<KernelConfig<DType::f16, 112, 8, 128>>();
  check_tile_map<KernelConfig<DType::f16, 128, 16, 128>, 32, 3>();  // mma_4warps
  check_tile_map<KernelConfig<DType::bf16, 64, 8, 128>, 32, 3>();
}

namespace {
// The wgmma tiles: the copy puts every (token, dim) where k_smem_byte /
// v_smem_byte say, wgmma's reading of the descriptors (K-major; K without
// swizzle, V with the swizzle of its row width; start = k_step_byte /
// v_step_byte) lands on the same bytes, and every 128-byte line of the V
// cache lands in one 128-byte span of shared memory (whole-line L2 requests).
template <class Cfg>
void check_wgmma_tile_map() {
  using Tl = PrefixWgmmaTiling<Cfg>;
  INFO("wgmma head " << Cfg::kHeadSize << " block " << Cfg::kBlockSize);
  CacheGeometry g{3 * Tl::kBlocksPerTile, 2, Cfg::kHeadSize, Cfg::kBlockSize, Cfg::kX};
  std::vector<int> phys;
  for (int b = 0; b < Tl::kBlocksPerTile; ++b) phys.push_back((b * 7 + 5) % g.num_blocks);
  const int kvh = 1;
  std::vector<std::int64_t> kslot(Tl::kTileBytes / 16, -1), vslot(Tl::kTileBytes / 16, -1);
  for (int c = 0; c < Tl::kTileChunks; ++c) {
    const std::int64_t off = Tl::region_chunk_offset(g, phys[Tl::tile_block_of_chunk(c)], kvh, Tl::region_chunk_of(c));
    REQUIRE(Tl::k_copy_byte(c) % 16 == 0);
    REQUIRE(Tl::v_copy_byte(c) % 16 == 0);
    REQUIRE(kslot[Tl::k_copy_byte(c) / 16] == -1);
    REQUIRE(vslot[Tl::v_copy_byte(c) / 16] == -1);
    kslot[Tl::k_copy_byte(c) / 16] = off;
    vslot[Tl::v_copy_byte(c) / 16] = off;
  }
  auto elem = [](const std::vector<std::int64_t>& slot, int byte) { return slot[byte / 16] + (byte % 16) / 2; };
  for (int t = 0; t < Tl::kTileTokens; ++t)
    for (int d = 0; d < Cfg::kHeadSize; ++d) {
      const int kb = Tl::k_smem_byte(t, d), vb = Tl::v_smem_byte(t, d);
      REQUIRE(elem(kslot, kb) == g.k_offset(phys[t / Cfg::kBlockSize], kvh, d, t % Cfg::kBlockSize));
      REQUIRE(elem(vslot, vb) == g.v_offset(phys[t / Cfg::kBlockSize], kvh, d, t % Cfg::kBlockSize));
      // S = Q K^T, k16 step d / 16: operand element (k = d % 16, n = t).
      REQUIRE(Tl::kmajor_operand_byte(Tl::k_step_byte(d / 16), d % 16, t, Tl::kKLbo, Tl::kKSbo, 16) == kb);
      // O = P V, k16 step t / 16: operand element (k = t % 16, n = d).
      REQUIRE(Tl::kmajor_operand_byte(Tl::v_step_byte(t / 16), t % 16, d, Tl::kVLbo, Tl::kVSbo, Tl::kVRowBytes) == vb);
    }
  // The copies' 16-byte chunks, 8 per 128-byte line of a region: one 128-byte span each line.
  int lines = 0;
  for (int c = 0; c < Tl::kTileChunks; c += 8, ++lines)
    for (int i = 1; i < 8; ++i) {
      REQUIRE(Tl::k_copy_byte(c + i) / 128 == Tl::k_copy_byte(c) / 128);
      REQUIRE(Tl::v_copy_byte(c + i) / 128 == Tl::v_copy_byte(c) / 128);
    }
  REQUIRE(lines == Tl::kTileBytes / 128);
  // The producer warpgroup: thread p copies chunk c0 + p for c0 a
  // multiple of 128, addressed as its own chunk plus a thread-independent
  // constant (head 128: whole passes of 128 chunks per block; head 64 is not launched).
  if (Tl::kChunksPerBlock % 128 != 0) return;
  for (int c0 = 0; c0 < Tl::kTileChunks; c0 += 128)
    for (int lane = 0; lane < 128; ++lane) {
      REQUIRE(Tl::k_copy_byte(c0 + lane) - Tl::k_copy_byte(lane) == Tl::k_copy_byte(c0) - Tl::k_copy_byte(0));
      REQUIRE(Tl::v_copy_byte(c0 + lane) - Tl::v_copy_byte(lane) == Tl::v_copy_byte(c0) - Tl::v_copy_byte(0));
      const int w = Tl::region_chunk_of(c0 + lane), w0 = Tl::region_chunk_of(c0);
      REQUIRE(w == w0 + lane);
      REQUIRE(Tl::region_chunk_offset(g, phys[0], kvh, w) == Tl::region_chunk_offset(g, phys[0], kvh, lane) + w0 * 8);
    }
}
}  // namespace

TEST_CASE("the wgmma prefix kernel's tiles are what its descriptors describe", "[cascade]") {
  check_wgmma_tile_map<KernelConfig<DType::f16, 128, 16, 128>>();
  check_wgmma_tile_map<KernelConfig<DType::bf16, 128, 8, 128>>();
  check_wgmma_tile_map<KernelConfig<DType::f16, 128, 32, 128>>();
  check_wgmma_tile_map<KernelConfig<DType::bf16, 64, 8, 128>>();  // the map alone (head 64 is not launched)
  check_wgmma_tile_map<KernelConfig<DType::bf16, 64, 32, 128>>();
}

// Q staging (XOR-swizzled 16-byte chunks, no padding): every element has its
// own slot, a chunk stays 8 contiguous elements, and the 8 row addresses of
// every ldmatrix (lanes 8j .. 8j + 7: 8 rows, one chunk) fall in 8 different
// 16-byte bank groups, so the load is conflict-free.
TEST_CASE("the wgmma prefix kernel's Q staging is a conflict-free permutation", "[cascade]") {
  using Tl = PrefixWgmmaTiling<KernelConfig<DType::f16, 128, 16, 128>>;
  std::vector<int> seen(Tl::kRows * Tl::kHead, 0);
  for (int r = 0; r < Tl::kRows; ++r)
    for (int d = 0; d < Tl::kHead; ++d) {
      const int e = Tl::q_smem_elem(r, d);
      REQUIRE(e >= 0);
      REQUIRE(e < Tl::kRows * Tl::kHead);
      REQUIRE(++seen[e] == 1);
      REQUIRE(e % 8 == d % 8);
    }
  REQUIRE(Tl::kQBytes == Tl::kRows * Tl::kHead * 2);
  for (int warp = 0; warp < Tl::kNumWarps; ++warp)
    for (int kk = 0; kk < Tl::kHead / 16; ++kk)
      for (int j = 0; j < 4; ++j) {
        std::set<int> groups;
        for (int lane = 8 * j; lane < 8 * j + 8; ++lane)
          groups.insert(Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane)) * 2 / 16 % 8);
        REQUIRE(groups.size() == 8);
      }
}

TEST_CASE("cascade chunk rule and the V1/V2 rule", "[cascade][v2]") {
  // Chunks are whole tiles, cover the prefix, and fill ~4 waves of 132 SMs.
  const int len = cascade_chunk_len(32768, 64, 32 * 2, 132);
  REQUIRE(len % 64 == 0);
  REQUIRE(ceil_div(32768, len) * 32 * 2 >= 4 * 132);
  REQUIRE(cascade_chunk_len(64, 64, 1, 132) == 64);  // never more chunks than tiles
  REQUIRE(cascade_chunk_len(0, 64, 1, 132) == 64);
  // V1/V2.
  REQUIRE(choose_decode_kernel(1, 32, 131072, 512, 132, 50000) == DecodeKernel::v2);   // past v1's limit
  REQUIRE(choose_decode_kernel(256, 32, 400, 512, 132, 50000) == DecodeKernel::v1);   // one partition
  REQUIRE(choose_decode_kernel(1, 32, 4096, 512, 132, 50000) == DecodeKernel::v2);    // grid too small
  REQUIRE(choose_decode_kernel(256, 32, 2048, 512, 132, 50000) == DecodeKernel::v1);  // grid full, short
}

// ---- GPU: stage 6 -----------------------------------------------------------------------

TEST_CASE("v2: partitions and reduce match the reference", "[gpu][v2]") {
  require_gpu();
  std::uint64_t salt = 100;
  for (const KernelKey& k : kernels::v2_built_configs()) {
    const int bs = k.block_size;
    SECTION(describe(k)) {
      // Contexts: shorter than one partition, exactly one, one token into the
      // next (a single-token partition), several, ragged around the blocks.
      const std::vector<int> ctx = {1, bs - 1, bs, bs + 1, 511, 512, 513, 1025, 2000, 3 * 512 + 1};
      for (int ps : {512, bs, 4 * bs}) {
        for (bool direct : {true, false}) {
          const PagedProblem p = make_problem(spec_for(k, ctx, 8, 2, ++salt));
          check_v2(p, ps, direct);
        }
      }
    }
  }
}

TEST_CASE("v2: GQA ratios, MQA and padded Q rows", "[gpu][v2]") {
  require_gpu();
  std::uint64_t salt = 200;
  for (const KernelKey& k : one_config_per_dtype()) {
    for (auto [h, kv] : {std::pair{8, 8}, std::pair{8, 1}, std::pair{12, 3}}) {
      ProblemSpec s = spec_for(k, {700, 33, 1300}, h, kv, ++salt);
      s.extra_q_stride = 16 / dtype_bytes(k.dtype) * 2;
      const PagedProblem p = make_problem(s);
      check_v2(p, 256, true);
    }
  }
}

TEST_CASE("v2: many partitions (single-block partitions over 20000 tokens)", "[gpu][v2]") {
  require_gpu();
  const KernelKey k = one_config_per_dtype().front();
  const PagedProblem p = make_problem(spec_for(k, {20000, 7}, 4, 4, 300));
  check_v2(p, k.block_size, true);
}

TEST_CASE("v2: a 131072-token context", "[gpu][v2][long]") {
  require_gpu();
  for (const KernelKey& k : one_config_per_dtype()) {
    if (k.dtype == DType::f32) continue;  // the long case in the two 16-bit types keeps the test short
    const PagedProblem p = make_problem(spec_for(k, {131072}, 8, 2, 400 + static_cast<int>(k.dtype)));
    const RunResult got = run_v2(p, 512, true);
    REQUIRE(got.max_partitions == 256);
    REQUIRE(no_nan(got.out));
    require_close(ref_output(p), got.out, tolerance_for(k.dtype), "131072-token output");
  }
}

// ---- GPU: stage 7 ------------------------------------------------------------------------

TEST_CASE("merge kernel: states, -inf lse and empty states", "[gpu][cascade]") {
  require_gpu();
  const int seqs = 5, heads = 4, hs = 128;
  const std::size_t rows = seqs * heads;
  NormalRng rng(seed_for(500));
  std::vector<float> ao(rows * hs), bo(rows * hs), al(rows), bl(rows);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (auto& x : ao) x = static_cast<float>(rng.next());
  for (auto& x : bo) x = static_cast<float>(rng.next());
  for (std::size_t r = 0; r < rows; ++r) {
    al[r] = static_cast<float>(rng.next() * 5);
    bl[r] = static_cast<float>(rng.next() * 5);
    // Empty states: -inf lse, and an output that must never be read (NaN).
    const int kind = static_cast<int>(r % 5);
    if (kind == 1 || kind == 3) al[r] = -inf;
    if (kind == 2 || kind == 3) bl[r] = -inf;
    if (kind == 4) bl[r] = al[r] + 80.f;  // one weight underflows in float
    for (int d = 0; d < hs; ++d) {
      if (al[r] == -inf) ao[r * hs + d] = nan;
      if (bl[r] == -inf) bo[r * hs + d] = nan;
    }
  }
  std::vector<double> ref_out(rows * hs), ref_lse(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    AttentionState a, b;
    a.lse = al[r];
    b.lse = bl[r];
    a.out.assign(hs, 0.0);
    b.out.assign(hs, 0.0);
    for (int d = 0; d < hs; ++d) {
      if (!a.empty()) a.out[d] = ao[r * hs + d];
      if (!b.empty()) b.out[d] = bo[r * hs + d];
    }
    const AttentionState m = merge_states(a, b);
    ref_lse[r] = m.lse;
    for (int d = 0; d < hs; ++d) ref_out[r * hs + d] = m.empty() ? 0.0 : m.out[d];
  }
  for (DType t : kAllDTypes) {
    const MergeRun got = run_merge(ao, al, bo, bl, seqs, heads, hs, t);
    REQUIRE(no_nan(got.out));
    require_close(ref_out, got.out, tolerance_for(t), std::string("merged out ") + dtype_name(t));
    require_close(ref_lse, got.lse, lse_tolerance(DType::f32), "merged lse");
  }
}

namespace {
void check_cascade(const KernelKey& k, int prefix, std::vector<int> suffixes, int heads, int kv, std::uint64_t salt,
                   int chunk_len = 0, const CascadeOptions& opt = {}) {
  std::vector<int> ctx;
  for (int s : suffixes) ctx.push_back(prefix + s);
  ProblemSpec s = spec_for(k, ctx, heads, kv, salt);
  s.shared_prefix_len = prefix;
  const PagedProblem p = make_problem(s);
  const CascadeRef ref = ref_cascade(p);
  const RunResult got = run_cascade(p, chunk_len, opt);
  const CascadePlan& plan = *got.cascade;
  INFO(s.describe() << " | " << plan.describe());
  // Cascade == plain attention over prefix + suffix (the reference's dense output).
  require_close(ref.out, got.out, tolerance_for(k.dtype), "cascade output");
  require_close(ref_output(p), got.out, tolerance_for(k.dtype), "cascade output vs plain attention");
  // The tensor-core prefix sums probabilities rounded to the 16-bit type, so
  // its lse carries the dtype's (absolute) lse tolerance; fp32 goes through V2 in float.
  require_close(ref.lse, got.lse, lse_tolerance(k.dtype), "merged lse");
  if (prefix > 0) {
    require_close(out_of(p, ref.prefix), got.prefix_out, tolerance_for(k.dtype), "prefix state out");
    require_close(lse_of(ref.prefix), got.prefix_lse, lse_tolerance(k.dtype), "prefix state lse");
    // V2 computes the suffix in float; stage 8 (CascadePlan::Suffix) feeds its
    // tensor cores probabilities rounded to the 16-bit type.
    const DType suffix_math = plan.suffix == CascadePlan::Suffix::v2 ? DType::f32 : k.dtype;
    require_close(out_of(p, ref.suffix), got.suffix_out, tolerance_for(suffix_math), "suffix state out");
    require_close(lse_of(ref.suffix), got.suffix_lse, lse_tolerance(suffix_math), "suffix state lse");
  }
}
}  // namespace

TEST_CASE("cascade equals plain attention over prefix + suffix", "[gpu][cascade]") {
  require_gpu();
  std::uint64_t salt = 600;
  for (const KernelKey& k : kernels::v2_built_configs()) {
    if (is_fp8(k.kv_dtype)) continue;  // the cascade takes no fp8 cache (test_fp8_cache_gpu.cpp checks it says so)
    const int bs = k.block_size;
    SECTION(describe(k)) {
      // prefix lengths: one block, not a multiple of the tile, several chunks;
      // suffixes: empty, one token, ragged, longer than a partition.
      check_cascade(k, bs, {1, 0, 5, bs}, 8, 8, ++salt);
      check_cascade(k, 5 * bs, {0, 1, 2 * bs + 3, 700}, 8, 2, ++salt);
      check_cascade(k, 1024, {37, 1, 513, 0, 64, 1030, 2}, 8, 1, ++salt);       // MQA
      check_cascade(k, 2048 + bs, std::vector<int>(70, 17), 4, 4, ++salt);      // 70 seqs: 2 query tiles
      check_cascade(k, 4096, {100, 3, 900}, 32, 4, ++salt);                     // group 8 x 3 seqs
      check_cascade(k, 1024, {5, 600, 9}, 8, 2, ++salt, 4 * bs);                // many small chunks
      check_cascade(k, 1024, {5, 600, 9}, 8, 2, ++salt, 1024);                  // one chunk
      check_cascade(k, 0, {5, 600}, 8, 2, ++salt);                              // no prefix: plain V2
    }
  }
}

// The suffix through stage 8 (first_token = the prefix, state output), full
// and lean footprint, each in every stream mode: empty suffixes (the empty state),
// one token, ragged tails, a long suffix on few sequences (stage 8 splits it:
// its arrival counters live in the cascade workspace), GQA groups of 8 (lean
// built), 16 (head tiles 2: lean falls back to full) and 32 (two CTAs per KV
// head), MQA.
TEST_CASE("cascade: the suffix through stage 8", "[gpu][cascade]") {
  require_gpu();
  std::uint64_t salt = 1300;
  // Both footprints on every configuration; the stream mode rotates with the
  // configuration (as in the prefix kernel test below).
  int config_index = 0;
  std::set<std::pair<int, int>> suffix_streams;
  for (const KernelKey& k : kernels::v2_built_configs()) {
    if (k.dtype == DType::f32) continue;  // stage 8 is fp16/bf16 only
    if (is_fp8(k.kv_dtype)) continue;     // the cascade takes no fp8 cache
    const int bs = k.block_size;
    ++config_index;
    for (int suffix = 1; suffix <= 2; ++suffix) {
      const int st = (config_index + suffix) % 3;
      suffix_streams.insert({suffix, st});
      SECTION(describe(k) + " suffix " + std::to_string(suffix) + " streams " + std::to_string(st)) {
        CascadeOptions opt;
        opt.suffix = suffix == 1 ? CascadeOptions::Suffix::optimized : CascadeOptions::Suffix::optimized_lean;
        opt.streams = st;
        check_cascade(k, bs, {1, 0, 5, bs}, 8, 8, ++salt, 0, opt);                 // one-block prefix, an empty suffix
        check_cascade(k, 3 * bs, {0, 0}, 4, 4, ++salt, 0, opt);                    // every suffix empty
        check_cascade(k, 1024, {5000, 0, 3}, 8, 2, ++salt, 0, opt);                // long suffix: splits
        check_cascade(k, 512 + bs, {37, 1, 2 * bs + 3}, 32, 4, ++salt, 0, opt);    // group 8
        check_cascade(k, 256, {100, 17}, 32, 2, ++salt, 0, opt);                   // group 16
        check_cascade(k, 256, {100, 17, 1}, 64, 2, ++salt, 0, opt);                // group 32
        check_cascade(k, 1024 + 3 * bs, {37, 1, 513, 0}, 8, 1, ++salt, 0, opt);    // MQA
        // The plan really took stage 8 where it is built.
        ProblemSpec sp = spec_for(k, {64 + bs}, 8, 8, salt);
        sp.shared_prefix_len = 64;
        const PagedProblem pp = make_problem(sp);
        const RunResult r = run_cascade(pp, 0, opt);
#if PA_HAVE_CUDA  // (stage 8's library exists in CUDA builds only)
        const bool built = optimized_supported(k.dtype, k.head_size, k.block_size);
#else
        const bool built = false;
#endif
#if PA_HAVE_CUDA
        if (k.head_size == 128 && k.block_size == 16) CHECK(built);  // in every CUDA build
#endif
        if (built) {
          CHECK(r.cascade->suffix != CascadePlan::Suffix::v2);
          CHECK((r.cascade->suffix_opt.pipeline == OptPipeline::lean) == (suffix == 2 && k.head_size == 128));
        } else {
          CHECK(r.cascade->suffix == CascadePlan::Suffix::v2);
        }
      }
    }
  }
  REQUIRE(config_index == 2 * static_cast<int>(kernels::v2_built_configs().size() / kDTypeCachePairs));
  if (config_index >= 3) REQUIRE(suffix_streams.size() == 6);
}

// Every prefix kernel (PrefixKernel: 4 or 8 warps of mma.sync, the wgmma
// kernel; 32/64-token tiles; Q in registers or not) and every stream mode, on
// the awkward cases: one-block prefix, prefix not a multiple of any tile, MQA,
// GQA, more sequences than one 128-row tile (130: the second tile of the
// 128-row kernels has one active warp), one chunk, many chunks, empty
// suffixes. The workspace and outputs are poisoned (0xFF = NaN) by
// run_cascade, so an unwritten element fails.
TEST_CASE("cascade: every prefix kernel and stream mode", "[gpu][cascade]") {
  require_gpu();
  std::uint64_t salt = 900;
  // Every configuration runs every prefix kernel; the stream mode rotates
  // with the configuration, so each (prefix kernel, stream mode) pair runs on
  // a third of the configurations (the stream mode orders launches, it does
  // not change what a kernel computes).
  constexpr PrefixKernel kKernels[] = {PrefixKernel::mma_4warps, PrefixKernel::mma_8warps, PrefixKernel::wgmma};
  int config_index = 0;
  std::set<std::pair<int, int>> kernel_streams;
  for (const KernelKey& k : kernels::v2_built_configs()) {
    if (k.dtype == DType::f32) continue;  // no tensor-core prefix
    if (is_fp8(k.kv_dtype)) continue;     // the cascade takes no fp8 cache
    const int bs = k.block_size;
    ++config_index;
    for (int ki = 0; ki < 3; ++ki) {
      const PrefixKernel pk = kKernels[ki];
      const int st = (config_index + ki) % 3;
      kernel_streams.insert({ki, st});
      SECTION(describe(k) + " prefix " + prefix_kernel_name(pk) + " streams " + std::to_string(st)) {
        CascadeOptions opt;
        opt.prefix = pk;
        opt.streams = st;
        check_cascade(k, bs, {1, 0, 5, bs}, 8, 8, ++salt, 0, opt);                    // one block
        check_cascade(k, 7 * bs, {0, 3, 2 * bs + 3}, 8, 2, ++salt, 0, opt);           // not a multiple of a tile
        check_cascade(k, 1024 + 3 * bs, {37, 1, 513, 0}, 8, 1, ++salt, 0, opt);       // MQA
        check_cascade(k, 2048, std::vector<int>(130, 9), 2, 2, ++salt, 0, opt);       // 130 seqs MHA
        check_cascade(k, 4096 + bs, {100, 3, 900}, 32, 4, ++salt, 0, opt);            // group 8
        opt.chunks = 5;
        check_cascade(k, 2048 + 5 * bs, {5, 600, 9}, 8, 2, ++salt, 0, opt);           // 5 forced chunks
        opt.chunks = 1;
        check_cascade(k, 2048 + 5 * bs, {5, 0, 9}, 8, 2, ++salt, 0, opt);             // one chunk
        // The plan ran the kernel asked for, or (wgmma where it is not built
        // or not usable) its mma.sync form.
        ProblemSpec sp = spec_for(k, {64 + bs}, 8, 8, salt);
        sp.shared_prefix_len = 64;
        const RunResult r = run_cascade(make_problem(sp), 0, opt);
        CHECK((r.cascade->prefix_kernel == pk ||
               (pk == PrefixKernel::wgmma && r.cascade->prefix_kernel == PrefixKernel::mma_8warps)));
        CHECK(r.cascade->streams == st);
      }
    }
  }
  // Two 16-bit types x every built (head, block); every kernel met every stream
  // mode (the quick build has two configurations: each kernel meets two modes).
  REQUIRE(config_index == 2 * static_cast<int>(kernels::v2_built_configs().size() / kDTypeCachePairs));
  if (config_index >= 3) REQUIRE(kernel_streams.size() == 9);
}
