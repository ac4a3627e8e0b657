// Host model of stage 8, the optimized decode kernel (kernels/stages/08_optimized.cuh):
// for each selected CTA, every thread's events in program order, enumerated
// from the same index header (pa/index/optimized.hpp) and the same split plan
// (opt_choose_split, which plan_optimized calls). Each function below mirrors
// one part of the kernel and names it; the contract is kernels/stages/EVENTS.md
// ("Stage 8").
//
// Which CTA of a (sequence, unit) merges the splits depends on the order they
// arrive in at the counter. The model takes it as an input
// (OptimizedModelOptions::last_arrivals; default: the last active split), so
// a trace is deterministic and a recording is reproduced exactly once its
// arrival order is known (record_optimized.cu reports it).
//
// The model is a template over the kernel's configuration; its instances are
// spread over one generated translation unit per head size
// (trace/src/host_model_head.cpp.in), and host_model_optimized.cpp plans a
// problem and hands its CTAs to its head size's instances.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "host_model_detail.hpp"
#include "host_model_optimized_configs.hpp"
#include "pa/index/optimized.hpp"

namespace pa::trace::detail {


struct CtaPlan {
  OptimizedModelPlan plan;
  int seq = 0, unit = 0, split = 0;
  int merger = -1;  // split of this (seq, unit) that arrives last; -1: not selected / unknown
};

template <class Cfg>
struct OptModel : BlockModel {
  static constexpr int kThreads = Cfg::kNumThreads;
  static constexpr int kNW = Cfg::kNumWarps;
  static constexpr int BS = Cfg::kBlockSize;
  static constexpr int BPS = Cfg::kBlocksPerStep;
  static constexpr int HS = Cfg::kHeadSize;
  static constexpr int HT = Cfg::kHeadTiles;

  CtaPlan c;
  OptWorkspaceGeometry wsg;
  int head0 = 0, nh = 0, kvh = 0;
  int ctx = 0, nblocks = 0, blk_begin = 0, blk_end = 0, nsteps = 0;

  // The device cache's layout (the spec's; the PagedProblem holds vLLM's,
  // which the values below read by logical position): byte addresses of the
  // K and V copies follow it, and Cfg is the matching instance.
  KvLayoutGeometry kv{p.spec.kv_layout, p.cache};

  // The page table as the kernel reads it: padded rows, or CSR (the same
  // pages: csr_from_block_tables, what DeviceInputs uploads), whose row of
  // sequence s starts after the pages of sequences 0 .. s-1 (csr_row, set
  // once per CTA in run()).
  bool csr = p.spec.page_table == PageTableForm::csr;
  std::int64_t csr_row = 0;
  int table(int lb) const { return p.block_tables[p.table.offset(c.seq, lb)]; }
  std::int64_t table_byte(int lb) const { return (csr ? csr_row + lb : p.table.offset(c.seq, lb)) * 4; }

  // Prologue: a CSR row's bounds, the first block-table window, then the
  // context length (CSR: the last page's length). Returns false for a split
  // with no work (the CTA returns).
  bool prologue() {
    const int row_len = csr ? nblocks : p.max_blocks_per_seq;
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = tid / kWarpSize, lane = tid % kWarpSize;
      if (csr) {
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at(c.seq * 4, 4));
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at((c.seq + 1) * 4, 4));
      }
      const int lb = Cfg::step_block(blk_begin, warp, lane / BPS, lane % BPS);
      if (lb < row_len) {
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::block_table)
                           .it(0).blk(lb, table(lb)).at(table_byte(lb), 4));
      }
      if (!csr)
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::context_lens)
                           .at(context_len_offset(c.seq) * 4, 4));
      else if (row_len > 0)
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_last_page_len).at(c.seq * 4, 4));
    }
    return blk_begin < nblocks;
  }

  // Q of the unit's heads into mma A fragments (optimized.q_frag).
  void q_frag(int tid) {
    const int lane = tid % kWarpSize;
    for (int ks = 0; ks < Cfg::kQkKSteps; ++ks) {
      for (int r = 0; r < 4; ++r) {
        const int g = Cfg::q_frag_head(lane, r);
        if (!((HT == 2 || (r & 1) == 0) && g < nh)) continue;
        const int d = Cfg::q_frag_dim(lane, ks, r);
        const std::int64_t off = p.query.q_offset(c.seq, head0 + g, d);
        em.record(tid, ev_(tid, Step::q_load, Op::global_load, Tensor::q)
                           .it(4 * ks + r).dims(d, 2).at(off * Cfg::kElemBytes, 2 * Cfg::kElemBytes));
      }
    }
  }

  // bf16 queries with an fp8 cache (optimized.q_to_fp16): per head tile, the
  // row maximum's two shuffles inside the lane's quad, then the fragments
  // rescaled into fp16 (one compute event per head tile).
  void q_to_fp16(int tid) {
    if constexpr (Cfg::kQkFp16) {
      const int lane = tid % kWarpSize;
      for (int h = 0; h < HT; ++h) {
        em.record(tid, ev_(tid, Step::q_scale, Op::shuffle, Tensor::none).it(h).src(lane ^ 1));
        em.record(tid, ev_(tid, Step::q_scale, Op::shuffle, Tensor::none).it(h).src(lane ^ 2));
      }
      for (int h = 0; h < HT; ++h) em.record(tid, ev_(tid, Step::q_scale, Op::compute, Tensor::none).it(h));
    }
  }

  // ALiBi's slopes of the lane's S rows (opt_alibi_slopes), with ALiBi only.
  void alibi(int tid) {
    if (!p.has_alibi()) return;
    const int lane = tid % kWarpSize;
    for (int h = 0; h < HT; ++h) {
      const int g = Cfg::qk_row(lane) + 8 * h;
      if (g >= nh) continue;
      em.record(tid, ev_(tid, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes)
                         .it(h).at((head0 + g) * 4, 4).val(p.alibi_slopes[head0 + g]));
    }
  }

  // The warp's j-th step's copies (optimized.pipeline_issue).
  void issue(int tid, int j) {
    const int warp = tid / kWarpSize, lane = tid % kWarpSize;
    if (j > 0 && j % Cfg::kStepsPerTable == 0) {
      if (csr) em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_indptr).it(j).at(c.seq * 4, 4));
      const int lb = Cfg::table_block(blk_begin, warp, j, lane);
      if (lb < blk_end) {
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::block_table)
                           .it(j).blk(lb, table(lb)).at(table_byte(lb), 4));
      }
    }
    const int stage = j % Cfg::kStages;
    for (int bi = 0; bi < BPS; ++bi) {
      const int lb = Cfg::step_block(blk_begin, warp, j, bi);
      const bool exists = lb < blk_end;
      const int lb_t = exists ? lb : -1, phys_t = exists ? table(lb) : -1;
      const int nvalid = exists ? std::min(BS, ctx - lb * BS) : 0;
      em.record(tid, ev_(tid, Step::block_table_load, Op::shuffle, Tensor::none)
                         .it(j).blk(lb_t, phys_t).src(Cfg::table_lane(j, bi)));
      for (int L = lane; L < Cfg::kTileChunks; L += kWarpSize) {
        const bool kok = Cfg::k_chunk_token(L) < nvalid;
        const int ktok = exists ? lb * BS + Cfg::k_chunk_token(L) : -1;
        em.record(tid, ev_(tid, Step::k_load, Op::async_copy, Tensor::k_cache)
                           .it(j).lane_it(L / kWarpSize).tok(ktok).blk(lb_t, phys_t).dims(Cfg::k_chunk_dim(L), Cfg::kX)
                           .at(kok ? Cfg::k_chunk_byte(kv, phys_t, kvh, L) : -1, kok ? 16 : 0));
        em.record(tid, ev_(tid, Step::k_load, Op::shared_store, Tensor::kv_smem)
                           .it(j).lane_it(L / kWarpSize).tok(ktok).blk(lb_t, phys_t).dims(Cfg::k_chunk_dim(L), Cfg::kX)
                           .at(Cfg::k_smem_byte(warp, stage, Cfg::k_tile_chunk(bi, L)), 16));
        const int vbytes = Cfg::v_chunk_src_bytes(L, nvalid);
        const int vtok = exists ? lb * BS + Cfg::v_chunk_first_token(L) : -1;
        em.record(tid, ev_(tid, Step::v_load, Op::async_copy, Tensor::v_cache)
                           .it(j).lane_it(L / kWarpSize).tok(vtok).blk(lb_t, phys_t).dims(Cfg::v_chunk_dim(L), Cfg::kVChunkDims)
                           .at(vbytes > 0 ? Cfg::v_chunk_byte(kv, phys_t, kvh, L) : -1, vbytes));
        em.record(tid, ev_(tid, Step::v_load, Op::shared_store, Tensor::kv_smem)
                           .it(j).lane_it(L / kWarpSize).tok(vtok).blk(lb_t, phys_t).dims(Cfg::v_chunk_dim(L), Cfg::kVChunkDims)
                           .at(Cfg::v_smem_byte(warp, stage, Cfg::v_tile_chunk(bi, L)), 16));
      }
    }
  }

  // S = Q K^T (optimized.qk_mma), online softmax (optimized.online_softmax),
  // O += P V (optimized.pv_mma) of the warp's j-th step.
  void compute(int tid, int j) {
    const int warp = tid / kWarpSize, lane = tid % kWarpSize;
    const int stage = j % Cfg::kStages;
    const int tok0 = Cfg::step_token(blk_begin, warp, j, 0);
    auto tokt = [&](int t) { return Cfg::trace_token(t, blk_end); };
    auto k_ldsm = [&](int nt, int ks) {
      const int T = Cfg::qk_ldsm_token(nt, lane), ch = Cfg::qk_ldsm_chunk(ks, lane);
      em.record(tid, ev_(tid, Step::k_smem_load, Op::shared_load, Tensor::kv_smem)
                         .it(j * Cfg::kQkNTiles + nt).tok(tokt(tok0 + T)).dims(ch * Cfg::kX, Cfg::kX)
                         .at(Cfg::k_smem_byte(warp, stage, Cfg::k_row_chunk(T, ch)), 16));
    };
    auto qk_mma = [&](int nt, int ks) {
      em.record(tid, ev_(tid, Step::qk_dot, Op::mma, Tensor::none).it(j * Cfg::kQkNTiles + nt).tok(tokt(tok0 + nt * 8)).dims(16 * ks, 16));
    };
    if constexpr (Cfg::kFp8) {  // optimized.qk_mma_fp8: a 4-byte load, its conversion, one mma per k-step
      for (int nt = 0; nt < Cfg::kQkNTiles; ++nt) {
        const int tok = tokt(tok0 + Cfg::fp8_k_token(nt, lane));
        for (int ks = 0; ks < Cfg::kQkKSteps; ++ks) {
          em.record(tid, ev_(tid, Step::k_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j * Cfg::kQkNTiles + nt).tok(tok).dims(Cfg::q_frag_dim(lane, ks, 0), 4)
                             .at(Cfg::fp8_k_frag_byte(warp, stage, nt, ks, lane), 4));
          em.record(tid, ev_(tid, Step::dequant, Op::compute, Tensor::none)
                             .it(j * Cfg::kQkNTiles + nt).tok(tok).dims(Cfg::q_frag_dim(lane, ks, 0), 4));
          em.record(tid, ev_(tid, Step::qk_dot, Op::mma, Tensor::none)
                             .it(j * Cfg::kQkNTiles + nt).tok(tokt(tok0 + Cfg::s_token(nt, 0))).dims(16 * ks, 16));
        }
      }
    } else {
      for (int nt = 0; nt < Cfg::kQkNTiles; ++nt) {
        for (int ks = 0; ks + 1 < Cfg::kQkKSteps; ks += 2) {
          k_ldsm(nt, ks);
          qk_mma(nt, ks);
          qk_mma(nt, ks + 1);
        }
        if constexpr (Cfg::kQkKSteps % 2 == 1) {
          constexpr int ks = Cfg::kQkKSteps - 1;
          if (lane < 16) k_ldsm(nt, ks);  // ldmatrix .x2: lanes 0-15 give the rows
          qk_mma(nt, ks);
        }
      }
    }
    for (int h = 0; h < HT; ++h) {
      em.record(tid, ev_(tid, Step::max_reduce, Op::shuffle, Tensor::none).it(j).src(lane ^ 1));
      em.record(tid, ev_(tid, Step::max_reduce, Op::shuffle, Tensor::none).it(j).src(lane ^ 2));
      em.record(tid, ev_(tid, Step::exp_sum_reduce, Op::compute, Tensor::none).it(j));
    }
    for (int h = 0; h < HT; ++h) {
      const int owner = Cfg::row_owner_lane(Cfg::o_head(lane));  // the heads' factors: rows h, h + 1
      em.record(tid, ev_(tid, Step::rescale, Op::shuffle, Tensor::none).it(j).src(owner));
      em.record(tid, ev_(tid, Step::rescale, Op::shuffle, Tensor::none)
                         .it(j).src(Cfg::row_owner_lane(Cfg::o_head(lane) + 1)));
      em.record(tid, ev_(tid, Step::rescale, Op::compute, Tensor::none).it(j));
    }
    for (int kk = 0; kk < Cfg::kPvKSteps; ++kk) {
      if constexpr (Cfg::kFp8) {  // optimized.pv_mma_fp8: per dim tile, two rows' 4-byte loads, then the mmas
        const int T0 = Cfg::fp8_v_token(kk, lane);
        for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
          for (int half = 0; half < 2; ++half) {
            const int d = Cfg::fp8_v_dim(dt, lane, half);
            em.record(tid, ev_(tid, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                               .it(j).tok(tokt(tok0 + T0)).dims(d, 1).at(Cfg::fp8_v_frag_byte(warp, stage, d, T0), 4));
            em.record(tid, ev_(tid, Step::dequant, Op::compute, Tensor::none).it(j).tok(tokt(tok0 + T0)).dims(d, 1));
          }
          for (int h = 0; h < HT; ++h) {
            em.record(tid, ev_(tid, Step::accumulate, Op::mma, Tensor::none)
                               .it(j).tok(tokt(tok0 + 16 * kk)).dims(16 * dt, 16));
          }
        }
        continue;
      }
      for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
        if constexpr (Cfg::kTokenRows) {
          // Token-row V: ldmatrix.trans rows are (token, dim chunk).
          const int T = Cfg::pv_trans_token(kk, lane), ch = Cfg::pv_trans_chunk(dt, lane);
          em.record(tid, ev_(tid, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j).tok(tokt(tok0 + T)).dims(ch * Cfg::kX, Cfg::kX)
                             .at(Cfg::v_smem_byte(warp, stage, Cfg::k_row_chunk(T, ch)), 16));
        } else {
          const int d = Cfg::pv_ldsm_dim(dt, lane), grp = Cfg::pv_ldsm_group(kk, lane);
          em.record(tid, ev_(tid, Step::v_smem_load, Op::shared_load, Tensor::kv_smem)
                             .it(j).tok(tokt(tok0 + 8 * grp)).dims(d, 1)
                             .at(Cfg::v_smem_byte(warp, stage, Cfg::v_row_chunk(d, grp)), 16));
        }
        for (int h = 0; h < HT; ++h) {
          em.record(tid, ev_(tid, Step::accumulate, Op::mma, Tensor::none)
                             .it(j).tok(tokt(tok0 + 16 * kk)).dims(16 * dt, 16));
        }
      }
    }
  }

  void main_loop() {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = tid / kWarpSize;
      q_frag(tid);
      q_to_fp16(tid);
      alibi(tid);
      const int my_steps = Cfg::warp_steps(nsteps, warp);
      for (int j = 0; j < Cfg::kStages - 1; ++j)
        if (j < my_steps) issue(tid, j);
      for (int j = 0; j < my_steps; ++j) {
        if (j + Cfg::kStages - 1 < my_steps) issue(tid, j + Cfg::kStages - 1);
        compute(tid, j);
      }
    }
    em.barrier_all();  // cp.async drained, stage memory becomes scratch
  }

  // An item's output written (opt_store_item), dims d0 .. d0 + 3 of head g
  // in one 8-byte store (16-bit outputs), its value the first dim's: the
  // last step of both merges in the kernel, the warp merge's with one split
  // and the split merge's.
  void store_item(int tid, int k, int g, int d0) {
    em.record(tid, ev_(tid, Step::out_store, Op::global_store, Tensor::output)
                       .it(k).dims(d0, 4)
                       .at(p.query.out_offset(c.seq, head0 + g, d0) * Cfg::kElemBytes, 4 * Cfg::kElemBytes)
                       .val(vals.out(c.seq, head0 + g, d0)));
  }

  // Warp merge through shared memory (optimized.warp_merge); returns whether
  // the CTA wrote the output directly (one split).
  bool warp_merge() {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = tid / kWarpSize, lane = tid % kWarpSize;
      for (int h = 0; h < HT; ++h) {
        em.record(tid, ev_(tid, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(h).src(lane ^ 1));
        em.record(tid, ev_(tid, Step::exp_sum_reduce, Op::shuffle, Tensor::none).it(h).src(lane ^ 2));
        if (lane % 4 == 0) {
          const int g = Cfg::qk_row(lane) + 8 * h;
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_store, Tensor::red_scratch)
                             .it(h).at(Cfg::stat_smem_byte(0, warp, g), 4));
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_store, Tensor::red_scratch)
                             .it(h).at(Cfg::stat_smem_byte(1, warp, g), 4));
        }
      }
    }
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = tid / kWarpSize, lane = tid % kWarpSize;
      for (int h = 0; h < HT; ++h) {
        for (int e = 0; e < 2; ++e) {
          const int g = Cfg::o_head(lane) + e + 8 * h;
          for (int dt = 0; dt < Cfg::kDimTiles; ++dt) {
            for (int half = 0; half < 2; ++half) {
              const int d = Cfg::o_dim(dt, lane) + 8 * half;
              em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                                 .it(2 * h + e).dims(d, 1).at(Cfg::red_smem_byte(warp, g, d), 4));
            }
          }
        }
      }
    }
    em.barrier_all();
    const bool single = c.plan.splits == 1;
    for (int tid = 0; tid < kThreads; ++tid) {
      for (int q = tid, k = 0; q < nh * Cfg::kMergeItemsPerHead; q += kThreads, ++k) {
        const int g = Cfg::merge_head(q), d0 = Cfg::merge_dim(q, 0);
        for (int w = 0; w < kNW; ++w) {
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                             .it(k).at(Cfg::stat_smem_byte(0, w, g), 4));
        }
        for (int w = 0; w < kNW; ++w) {
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_load, Tensor::red_scratch)
                             .it(k).at(Cfg::stat_smem_byte(1, w, g), 4));
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_load, Tensor::out_scratch)
                             .it(k).dims(d0, 4).at(Cfg::red_smem_byte(w, g, d0), 16));
        }
        if (single) {
          store_item(tid, k, g, d0);
        } else {
          em.record(tid, ev_(tid, Step::partition_store, Op::global_store, Tensor::workspace)
                             .it(k).dims(d0, 4).at(wsg.out_byte(c.seq, c.unit, c.split, g, d0), 16));
          if (d0 == 0) {
            em.record(tid, ev_(tid, Step::partition_store, Op::global_store, Tensor::workspace)
                               .it(k).at(wsg.stat_byte(c.seq, c.unit, c.split, 0, g), 4));
            em.record(tid, ev_(tid, Step::partition_store, Op::global_store, Tensor::workspace)
                               .it(k).at(wsg.stat_byte(c.seq, c.unit, c.split, 1, g), 4));
          }
        }
      }
    }
    return single;
  }

  // Arrival at the counter (optimized.split_merge); returns whether this CTA merges.
  bool arrive(int n_active) {
    em.barrier_all();
    const bool last = c.merger == c.split;
    em.record(0, ev_(0, Step::split_arrive, Op::atomic, Tensor::counter)
                     .at(wsg.counter_byte(c.seq, c.unit), 4).val(last ? 1.f : 0.f));
    if (last) {
      em.record(0, ev_(0, Step::split_arrive, Op::global_store, Tensor::counter)
                       .at(wsg.counter_byte(c.seq, c.unit), 4).val(0.f));
    }
    em.barrier_all();
    (void)n_active;
    return last;
  }

  // The last CTA's merge of every split's state (optimized.split_merge,
  // opt_merge_states): thread t's items of four consecutive dims (merge_head,
  // merge_dim), kB at a time (opt_merge_batch), each round loading kS splits
  // of each of the kB items; no shared memory, no barrier.
  void merge(int n_active) {
    const int n_items = nh * Cfg::kMergeItemsPerHead;
    const int kB = opt_merge_batch(ceil_div(n_items, kThreads), n_active, Cfg::kMergeSplits,
                                   opt_merge_max_batch(HS, kThreads, Cfg::kMergeSplits));
    const int kS = opt_merge_round_states(Cfg::kMergeSplits, kB) / kB;
    for (int tid = 0; tid < kThreads; ++tid) {
      for (int k0 = 0; tid + k0 * kThreads < n_items; k0 += kB) {
        for (int sp0 = 0; sp0 < n_active; sp0 += kS) {
          for (int b = 0; b < kB; ++b) {
            const int k = k0 + b, q = tid + k * kThreads;
            if (q >= n_items) continue;
            const int g = Cfg::merge_head(q);
            const int d0 = Cfg::merge_dim(q, 0);
            for (int sp = sp0; sp < sp0 + kS && sp < n_active; ++sp) {
              em.record(tid, ev_(tid, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).at(wsg.stat_byte(c.seq, c.unit, sp, 0, g), 4));
              em.record(tid, ev_(tid, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).at(wsg.stat_byte(c.seq, c.unit, sp, 1, g), 4));
              em.record(tid, ev_(tid, Step::merge, Op::global_load, Tensor::workspace)
                                 .it(sp).lane_it(k).dims(d0, 4).at(wsg.out_byte(c.seq, c.unit, sp, g, d0), 16));
            }
          }
        }
        for (int b = 0; b < kB; ++b) {
          const int k = k0 + b, q = tid + k * kThreads;
          if (q < n_items) store_item(tid, k, Cfg::merge_head(q), Cfg::merge_dim(q, 0));
        }
      }
    }
  }

  void run() {
    const int group = c.plan.group;
    head0 = opt_unit_first_head(c.unit, c.plan.head_chunks, group);
    nh = opt_unit_num_heads(c.unit, c.plan.head_chunks, group);
    kvh = opt_unit_kv_head(c.unit, c.plan.head_chunks);
    ctx = p.context_lens[c.seq];
    nblocks = ceil_div(ctx, BS);
    for (int q = 0; q < c.seq; ++q) csr_row += ceil_div(p.context_lens[q], BS);
    blk_begin = c.split * c.plan.split_blocks;
    if (!prologue()) return;
    blk_end = std::min(nblocks, blk_begin + c.plan.split_blocks);
    nsteps = ceil_div(blk_end - blk_begin, BPS);
    main_loop();
    if (warp_merge()) return;
    const int n_active = opt_active_splits(ctx, BS, c.plan.split_blocks);
    if (!arrive(n_active)) return;
    merge(n_active);
  }
};

template <int HS>
void model_optimized_head(const PagedProblem& p, const std::vector<BlockId>& blocks, const OptimizedModelPlan& plan,
                          const OptimizedModelOptions& opt, ModelValues& vals, std::vector<Event>& out) {
  with_opt_config_of_head<HS>(p.spec, plan.head_tiles, [&](auto cfg) {
    using Cfg = decltype(cfg);
    for (const BlockId& b : blocks) {
      CtaPlan c;
      c.plan = plan;
      c.seq = b.seq;
      c.unit = opt_unit_of_head(b.head, plan.group, plan.head_chunks);
      c.split = b.partition;
      const int n_active = opt_active_splits(p.context_lens[b.seq], p.spec.block_size, plan.split_blocks);
      c.merger = n_active - 1;
      for (const auto& la : opt.last_arrivals)
        if (la.seq == c.seq && la.unit == c.unit) c.merger = la.split;
      const int kvh = opt_unit_kv_head(c.unit, plan.head_chunks);
      BlockEmitter em(out, Stage::optimized, BlockId{b.seq, opt_unit_first_head(c.unit, plan.head_chunks, plan.group), b.partition},
                      kvh, Cfg::kNumThreads);
      OptModel<Cfg> m{{p, vals, em}, c, OptWorkspaceGeometry{p.num_seqs(), plan.units, plan.splits, p.spec.head_size}};
      m.run();
    }
  });
}

}  // namespace pa::trace::detail
