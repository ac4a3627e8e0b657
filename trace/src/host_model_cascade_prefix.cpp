// Host model of cascade_prefix_kernel (stage 7's tensor-core prefix kernel,
// kernels/stages/07_cascade_prefix_mma.cuh) as the traces run it: variant
// kCascadeTracePrefixVariant (pa/index/cascade.hpp), chunks of
// CascadeTracePlan::chunk_len. It enumerates, for each selected prefix block,
// every thread's events in program order with the same index functions the
// kernel calls (PrefixTiling, prefix_block_label, the cache/query/partition
// geometries); the contract is kernels/stages/EVENTS.md, "stage 7 prefix kernel".
//
// A prefix block is (query tile, KV head, chunk), shared by every sequence; it
// is named by the (seq, head) of its first query row and partition
// kPrefixBlockBase + chunk: a selection (seq, head, p) models the block of
// chunk p that computes row (seq, head), as traced_blocks names it.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "host_model_detail.hpp"
#include "pa/index/cascade.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"

namespace pa::trace::detail {
namespace {

template <class Cfg, int VARIANT>
void model_prefix_block(const PagedProblem& p, const CascadeTracePlan& plan, const BlockId& b, ModelValues& vals,
                        std::vector<Event>& out) {
  using VT = PrefixVariantTiling<Cfg, VARIANT>;
  using Tl = typename VT::Tiling;
  constexpr bool kQInRegs = VT::kQInRegs;
  constexpr int kNT = Tl::kTileTokens / 8;
  constexpr int kDN = Tl::kHead / 8;
  constexpr int kEb = Cfg::kElemBytes;
  const ProblemSpec& spec = p.spec;
  const int ratio = spec.num_heads / spec.num_kv_heads;
  const int num_rows = Tl::rows_per_kv_head(p.num_seqs(), ratio);
  const int chunk = b.partition - kPrefixBlockBase;
  const int kvh = b.head / ratio;
  const int qt = (b.seq * ratio + b.head % ratio) / Tl::kRows;
  const int row0 = qt * Tl::kRows;
  const int chunk_begin = chunk * plan.chunk_len;
  const int chunk_end = std::min(plan.prefix_len, chunk_begin + plan.chunk_len);
  if (chunk_begin >= chunk_end) return;
  const int n_tiles = ceil_div(chunk_end - chunk_begin, Tl::kTileTokens);
  const PartitionGeometry pg{spec.num_heads, plan.prefix_partitions, spec.head_size};
  BlockEmitter em(out, Stage::cascade_merge, b, kvh, Tl::kNumThreads);
  auto ctx = [&](int tid) { return em.ctx(tid); };
  auto phys_of = [&](int lb) { return p.block_tables[static_cast<std::size_t>(p.table.offset(0, lb))]; };

  auto load_tile = [&](int tid, int tile, int stage) {
    const int t0 = chunk_begin + tile * Tl::kTileTokens;
    for (int c = tid; c < Tl::kTileChunks; c += Tl::kNumThreads) {
      const int token = t0 + Tl::tile_block_of_chunk(c) * Tl::kBlock;
      const bool valid = token < chunk_end;
      const int phys = valid ? phys_of(token / Tl::kBlock) : 0;
      const std::int64_t off = Tl::region_chunk_offset(p.cache, phys, kvh, Tl::region_chunk_of(c));
      const int slot = Tl::chunk_byte(Tl::swizzle(c));
      const int lb = valid ? token / Tl::kBlock : -1, pb = valid ? phys : -1;
      const int w = Tl::region_chunk_of(c);
      const int ktok = valid ? token + Tl::k_chunk_token(w) : -1, vtok = valid ? token + Tl::v_chunk_token(w) : -1;
      const TraceCtx tc = ctx(tid);
      if (valid)
        em.record(tid, ev(tc, Step::block_table_load, Op::global_load, Tensor::block_table)
                           .it(tile).blk(lb, pb).at(static_cast<std::int64_t>(lb) * 4, 4));
      em.record(tid, ev(tc, Step::k_load, Op::async_copy, Tensor::k_cache).it(tile).tok(ktok).blk(lb, pb)
                         .dims(Tl::k_chunk_dim(w), 8).at(valid ? off * kEb : -1, valid ? 16 : 0));
      em.record(tid, ev(tc, Step::k_load, Op::shared_store, Tensor::kv_smem).it(tile).tok(ktok).blk(lb, pb)
                         .dims(Tl::k_chunk_dim(w), 8).at(Tl::k_tile_byte(stage) + slot, 16));
      em.record(tid, ev(tc, Step::v_load, Op::async_copy, Tensor::v_cache).it(tile).tok(vtok).blk(lb, pb)
                         .dims(Tl::v_chunk_dim(w), 1)
                         .at(valid ? off * kEb : -1, valid ? prefix_v_copy_bytes(vtok, chunk_end) : 0));
      em.record(tid, ev(tc, Step::v_load, Op::shared_store, Tensor::kv_smem).it(tile).tok(vtok).blk(lb, pb)
                         .dims(Tl::v_chunk_dim(w), 1).at(Tl::v_tile_byte(stage) + slot, 16));
    }
  };

  // Prologue copies, then the Q tile (one epoch).
  for (int tid = 0; tid < Tl::kNumThreads; ++tid) {
    for (int t = 0; t < Tl::kStages - 1; ++t)
      if (t < n_tiles) load_tile(tid, t, t);
    const TraceCtx tc = ctx(tid);
    for (int e = tid; e < Tl::kRows * Tl::kHead; e += Tl::kNumThreads) {
      const int r = e / Tl::kHead, d = e % Tl::kHead, grow = row0 + r, it = e / Tl::kNumThreads;
      if (grow < num_rows)
        em.record(tid, ev(tc, Step::q_load, Op::global_load, Tensor::q).it(it).dims(d, 1).at(
                           p.query.q_offset(Tl::row_seq(grow, ratio), Tl::row_head(grow, kvh, ratio), d) * kEb, kEb));
      em.record(tid, ev(tc, Step::q_smem_store, Op::shared_store, Tensor::q_smem).it(it).dims(d, 1).at(
                         static_cast<std::int64_t>(Tl::q_smem_elem(r, d)) * kEb, kEb));
    }
    // prefix_alibi: each row's context length and slope, with ALiBi only.
    if (p.has_alibi()) {
      const int warp = tid / kWarpSize, lane = tid % kWarpSize;
      for (int i = 0; i < 2; ++i) {
        const int grow = row0 + warp * 16 + Tl::frag_row(lane, 2 * i);
        if (grow >= num_rows) continue;
        const int seq = Tl::row_seq(grow, ratio), head = Tl::row_head(grow, kvh, ratio);
        em.record(tid, ev(tc, Step::alibi_bias, Op::global_load, Tensor::context_lens).it(i)
                           .at(context_len_offset(seq) * 4, 4));
        em.record(tid, ev(tc, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes).it(i)
                           .at(head * 4, 4).val(p.alibi_slopes[head]));
      }
    }
  }
  auto q_frag = [&](int tid, int it, int kk) {
    const int warp = tid / kWarpSize, lane = tid % kWarpSize;
    em.record(tid, ev(ctx(tid), Step::q_smem_load, Op::shared_load, Tensor::q_smem).it(it)
                       .dims(kk * 16 + Tl::lda_dim(lane), 8)
                       .at(static_cast<std::int64_t>(Tl::q_smem_elem(warp * 16 + Tl::lda_row(lane), kk * 16 + Tl::lda_dim(lane))) * kEb, 16));
  };
  if constexpr (kQInRegs) {
    em.barrier_all();
    for (int tid = 0; tid < Tl::kNumThreads; ++tid)
      for (int kk = 0; kk < Tl::kHead / 16; ++kk) q_frag(tid, kk, kk);
  }
  auto warp_active = [&](int warp) { return row0 + warp * Tl::kRowsPerWarp < num_rows; };

  for (int tile = 0; tile < n_tiles; ++tile) {
    em.barrier_all();
    const int stage = tile % Tl::kStages;
    const int tok0 = chunk_begin + tile * Tl::kTileTokens;
    for (int tid = 0; tid < Tl::kNumThreads; ++tid) {
      const int warp = tid / kWarpSize, lane = tid % kWarpSize;
      const TraceCtx tc = ctx(tid);
      const int ahead = tile + Tl::kStages - 1;
      if (ahead < n_tiles) load_tile(tid, ahead, ahead % Tl::kStages);
      if (!warp_active(warp)) continue;
      for (int kk = 0; kk < Tl::kHead / 16; ++kk) {
        if constexpr (!kQInRegs) q_frag(tid, tile, kk);
        for (int nt = 0; nt < kNT; nt += 2) {
          const int kt = nt * 8 + Tl::ldk_token(lane), kd = kk * 16 + Tl::ldk_dim(lane);
          em.record(tid, ev(tc, Step::k_smem_load, Op::shared_load, Tensor::kv_smem).it(tile).tok(tok0 + kt).dims(kd, 8)
                             .at(Tl::k_tile_byte(stage) + Tl::chunk_byte(Tl::k_smem_chunk(kt, kd)), 16));
          em.record(tid, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile).tok(tok0 + nt * 8).dims(kk * 16, 16));
          em.record(tid, ev(tc, Step::qk_dot, Op::mma, Tensor::none).it(tile).tok(tok0 + nt * 8 + 8).dims(kk * 16, 16));
        }
      }
      for (int i = 0; i < 2; ++i) {
        em.record(tid, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(tile).src(lane ^ 1));
        em.record(tid, ev(tc, Step::max_reduce, Op::shuffle, Tensor::none).it(tile).src(lane ^ 2));
        em.record(tid, ev(tc, Step::rescale, Op::compute, Tensor::none).it(tile));
      }
      em.record(tid, ev(tc, Step::exp_sum_reduce, Op::compute, Tensor::none).it(tile));
      for (int kk = 0; kk < Tl::kTileTokens / 16; ++kk)
        for (int dn = 0; dn < kDN; dn += 2) {
          const int vt = kk * 16 + Tl::ldv_token(lane), vd = dn * 8 + Tl::ldv_dim(lane);
          em.record(tid, ev(tc, Step::v_smem_load, Op::shared_load, Tensor::kv_smem).it(tile).tok(tok0 + vt).dims(vd, 1)
                             .at(Tl::v_tile_byte(stage) + Tl::chunk_byte(Tl::v_smem_chunk(vt, vd)), 16));
          em.record(tid, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile).tok(tok0 + kk * 16).dims(dn * 8, 8));
          em.record(tid, ev(tc, Step::accumulate, Op::mma, Tensor::none).it(tile).tok(tok0 + kk * 16).dims(dn * 8 + 8, 8));
        }
    }
  }

  // Epilogue: the row sums' shuffles, then the chunk's partition of each owned row.
  for (int tid = 0; tid < Tl::kNumThreads; ++tid) {
    const int warp = tid / kWarpSize, lane = tid % kWarpSize;
    if (!warp_active(warp)) continue;
    const TraceCtx tc = ctx(tid);
    for (int i = 0; i < 2; ++i) {
      for (int k = 0; k < 4; ++k)
        em.record(tid, ev(tc, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(i).src(lane ^ (1 + k % 2)));
      const int grow = row0 + warp * 16 + Tl::frag_row(lane, 2 * i);
      if (grow >= num_rows) continue;
      const int seq = Tl::row_seq(grow, ratio), head = Tl::row_head(grow, kvh, ratio);
      for (int dn = 0; dn < kDN; ++dn) {
        const int d = dn * 8 + Tl::frag_col(lane, 0);
        em.record(tid, ev(tc, Step::partition_store, Op::global_store, Tensor::part_out).it(i).dims(d, 2)
                           .at(pg.out_offset(seq, head, chunk, d) * 4, 8));
      }
      if (lane % 4 == 0) {
        const auto [mx, sum] = vals.range_stats(seq, head, chunk_begin, chunk_end);
        em.record(tid, ev(tc, Step::partition_store, Op::global_store, Tensor::part_max).it(i)
                           .at(pg.stat_offset(seq, head, chunk) * 4, 4).val(mx));
        em.record(tid, ev(tc, Step::partition_store, Op::global_store, Tensor::part_sum).it(i)
                           .at(pg.stat_offset(seq, head, chunk) * 4, 4).val(sum));
      }
    }
  }
}

template <int H, int B>
bool dispatch_block(const PagedProblem& p, const CascadeTracePlan& plan, const BlockId& b, ModelValues& vals,
                    std::vector<Event>& out) {
  if (p.spec.head_size != H || p.spec.block_size != B) return false;
  // The tiling depends on the element size only (fp16 and bf16 alike).
  model_prefix_block<KernelConfig<DType::f16, H, B, 128>, kCascadeTracePrefixVariant>(p, plan, b, vals, out);
  return true;
}

}  // namespace

void model_cascade_prefix_blocks(const PagedProblem& p, const CascadeTracePlan& plan, const std::vector<BlockId>& blocks,
                                 ModelValues& vals, std::vector<Event>& out) {
  if (!plan.tensor_cores || plan.prefix_len == 0) return;
  // The selection (seq, head, p) -> the block of chunk p computing that row
  // (as traced_blocks names it for the recording), each block once.
  const int ratio = p.spec.num_heads / p.spec.num_kv_heads;
  const int rows = prefix_rows_per_block(kCascadeTracePrefixVariant, p.spec.head_size);
  std::vector<BlockId> prefix_blocks;
  for (const BlockId& s : blocks) {
    if (s.partition < 0 || s.partition >= plan.prefix_partitions) continue;
    const PrefixBlockLabel lab = prefix_block_label_of(s.seq, s.head, ratio, rows);
    const BlockId b{lab.seq, lab.head, kPrefixBlockBase + s.partition};
    if (std::find(prefix_blocks.begin(), prefix_blocks.end(), b) == prefix_blocks.end()) prefix_blocks.push_back(b);
  }
  for (const BlockId& b : prefix_blocks) {
    const bool ok =
#define PA_X(H, B) dispatch_block<H, B>(p, plan, b, vals, out) ||
        PA_X(64, 8) PA_X(64, 16) PA_X(64, 32) PA_X(80, 8) PA_X(80, 16) PA_X(80, 32) PA_X(96, 8) PA_X(96, 16)
            PA_X(96, 32) PA_X(112, 8) PA_X(112, 16) PA_X(112, 32) PA_X(128, 8) PA_X(128, 16) PA_X(128, 32)
                PA_X(192, 8) PA_X(192, 16) PA_X(192, 32) PA_X(256, 8) PA_X(256, 16) PA_X(256, 32)
#undef PA_X
                    false;
    if (!ok)
      throw std::invalid_argument("model of cascade_prefix_kernel: head " + std::to_string(p.spec.head_size) +
                                  " x block " + std::to_string(p.spec.block_size) +
                                  " is not a configuration (heads 64..256, blocks 8/16/32)");
  }
}

}  // namespace pa::trace::detail
