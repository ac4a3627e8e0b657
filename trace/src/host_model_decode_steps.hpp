// Host model of the decode steps of stages 1-5 (kernels/stages/01..05_*.cuh)
// and of stage 6's partition kernel (06_v2_partition.cuh), which runs the same
// steps on one partition's token range:
// for one thread block, every thread's events in program order, enumerated
// from the same index headers (mapping.hpp, layout.hpp, events.hpp). Each
// function below mirrors one step function of the kernels and names it; the
// emission contract is the comment above each kernel step.
//
// The model is a template over the kernel's configuration, instantiated for
// every one of them; the instances are spread over one generated translation
// unit per head size (trace/src/host_model_head.cpp.in), and
// host_model_decode_steps.cpp dispatches a problem to its head size's.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>

#include "host_model_detail.hpp"
#include "pa/index/cascade.hpp"
#include "pa/core/config_dispatch.hpp"

namespace pa::trace::detail {

template <class Cfg>
struct V1Model : BlockModel {
  using Map = ThreadMapping<Cfg>;
  static constexpr int kThreads = Cfg::kNumThreads;
  static constexpr int kWarps = Cfg::kNumWarps;

  BlockId b;
  int kv_head;
  StageOutGeometry sg;

  int ctx_len() const { return p.context_lens[b.seq]; }
  // The cache in the problem's layout (Map::k_offset / v_offset pick the
  // formula the kernel's configuration reads).
  KvLayoutGeometry kv_geometry() const { return {p.spec.kv_layout, p.cache}; }
  // A CSR table is the one the device gets (csr_from_block_tables: each
  // sequence's pages in order), so row seq starts after the pages of the
  // sequences before it.
  bool csr() const { return p.spec.page_table == PageTableForm::csr; }
  std::int64_t table_row() const {
    if (!csr()) return p.table.offset(b.seq, 0);
    std::int64_t row = 0;
    for (int q = 0; q < b.seq; ++q) row += ceil_div(p.context_lens[q], Cfg::kBlockSize);
    return row;
  }

  // load_seq_pages (02_qk.cuh)
  void context_len() {
    for (int tid = 0; tid < kThreads; ++tid) {
      if (!csr()) {
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::context_lens)
                           .at(context_len_offset(b.seq) * 4, 4));
        continue;
      }
      em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at(b.seq * 4, 4));
      em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_indptr).at((b.seq + 1) * 4, 4));
      if (ctx_len() > 0)
        em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::kv_last_page_len).at(b.seq * 4, 4));
    }
  }

  // q_to_smem (01_q_to_smem.cuh)
  void q_to_smem() {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int g_off = Map::thread_group_offset_of(tid);
      int n = 0;
      for (int i = Map::q_load_first_vec(tid); i < Cfg::kNumVecsPerThread; i += Map::kQLoadStride, ++n) {
        const int dim = Map::qk_vec_dim(g_off, i);
        const std::int64_t off = p.query.q_offset(b.seq, b.head, dim);
        em.record(tid, ev_(tid, Step::q_load, Op::global_load, Tensor::q)
                           .it(n).dims(dim, Cfg::kVecSize).at(off * Cfg::kElemBytes, Cfg::kQVecBytes));
        em.record(tid, ev_(tid, Step::q_smem_store, Op::shared_store, Tensor::q_smem)
                           .it(n).dims(dim, Cfg::kVecSize).at(Map::q_smem_byte(g_off, i), Cfg::kQVecBytes));
      }
    }
    em.barrier_all();
  }

  // load_alibi (02_qk.cuh): every thread loads its head's slope, with ALiBi only.
  void alibi() {
    if (!p.has_alibi()) return;
    for (int tid = 0; tid < kThreads; ++tid) {
      em.record(tid, ev_(tid, Step::alibi_bias, Op::global_load, Tensor::alibi_slopes)
                         .at(b.head * 4, 4).val(p.alibi_slopes[b.head]));
    }
  }

  // stage1_q_to_smem_kernel's read-back
  void q_readback() {
    for (int tid = 0; tid < kThreads; ++tid) {
      for (int k = 0, s = Map::strided_index(tid, 0); s < Map::kNumQSlots; s = Map::strided_index(tid, ++k)) {
        const int e0 = Map::q_readback_elem(s);
        const std::int64_t off = sg.q_smem_offset(b.seq, b.head, e0);
        const int g_off = Map::q_slot_g_off(s), i = Map::q_slot_vec(s);
        em.record(tid, ev_(tid, Step::stage_output, Op::shared_load, Tensor::q_smem)
                           .it(k).dims(Map::qk_vec_dim(g_off, i), Cfg::kVecSize)
                           .at(Map::q_smem_byte(g_off, i), Cfg::kQVecBytes));
        for (int e = 0; e < Cfg::kVecSize; ++e) {  // the kernel stores the floats one by one
          em.record(tid, ev_(tid, Step::stage_output, Op::global_store, Tensor::stage_out)
                             .it(k).dims(e0 + e, 1).at((off + e) * 4, 4));
        }
      }
    }
  }

  int phys_block(int lblock) const { return p.block_tables[p.table.offset(b.seq, lblock)]; }

  // load_physical_block (02_qk.cuh)
  std::int64_t row = 0;  // table_row(), set by the runs
  void block_table_load(int tid, int lblock, int n) {
    em.record(tid, ev_(tid, Step::block_table_load, Op::global_load, Tensor::block_table)
                       .it(n).blk(lblock, phys_block(lblock)).at((row + lblock) * 4, 4));
  }

  // The loop of qk_logits and lv_accumulate over the range's blocks that
  // thread tid's warp handles: each iteration n starts with
  // load_physical_block, then body(n, logical block, physical block).
  template <class Body>
  void warp_blocks(int tid, const PartitionRange& r, Body&& body) {
    const int warp = Map::warp_of(tid);
    for (int n = 0, lblock = Map::warp_block(r.block_begin, warp, 0); lblock < r.block_end;
         lblock = Map::warp_block(r.block_begin, warp, ++n)) {
      block_table_load(tid, lblock, n);
      body(n, lblock, phys_block(lblock));
    }
  }

  // qk_logits (02_qk.cuh)
  void qk(const PartitionRange& r) {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int lane = Map::lane_of(tid), g_off = Map::thread_group_offset_of(tid);
      const int t_in_block = Map::qk_token_in_block(lane);
      warp_blocks(tid, r, [&](int n, int lblock, int phys) {
        const int token = Map::token_of(lblock, t_in_block);
        for (int i = 0; i < Cfg::kNumVecsPerThread; ++i) {
          const int dim = Map::qk_vec_dim(g_off, i);
          const std::int64_t off = Map::k_offset(kv_geometry(), phys, kv_head, dim, t_in_block);
          em.record(tid, ev_(tid, Step::k_load, Op::global_load, Tensor::k_cache)
                             .it(n).tok(token).blk(lblock, phys).dims(dim, Cfg::kVecSize)
                             .at(off * Cfg::kKvBytes, Cfg::kVecBytes));
        }
        for (int i = 0; i < Cfg::kNumVecsPerThread; ++i) {
          if constexpr (is_fp8(Cfg::kKvDType))
            em.record(tid, ev_(tid, Step::dequant, Op::compute, Tensor::none)
                               .it(n).tok(token).dims(Map::qk_vec_dim(g_off, i), Cfg::kVecSize));
          em.record(tid, ev_(tid, Step::q_smem_load, Op::shared_load, Tensor::q_smem)
                             .it(n).tok(token).dims(Map::qk_vec_dim(g_off, i), Cfg::kVecSize)
                             .at(Map::q_smem_byte(g_off, i), Cfg::kQVecBytes));
        }
        em.record(tid, ev_(tid, Step::qk_dot, Op::compute, Tensor::none)
                           .it(n).tok(token).blk(lblock, phys)
                           .dims(Map::qk_vec_dim(g_off, 0), Cfg::kNumElemsPerThread));
        for (int mask = Cfg::kThreadGroupSize / 2; mask >= 1; mask /= 2) {
          em.record(tid, ev_(tid, Step::qk_group_reduce, Op::shuffle, Tensor::none).it(n).tok(token).src(lane ^ mask));
        }
        if (g_off == 0 && token < r.token_end) {
          em.record(tid, ev_(tid, Step::logit_store, Op::shared_store, Tensor::logits)
                             .it(n).tok(token).blk(lblock, phys)
                             .at(logits_smem_byte(token - r.token_begin), 4)
                             .val(vals.logit(b.seq, b.head, token)));
        }
      });
    }
    em.barrier_all();
  }

  // store_logits_row (02_qk.cuh); probs: the softmax's output instead of logits.
  void logits_row(const PartitionRange& r, bool probs) {
    const int n = r.token_end - r.token_begin;
    for (int tid = 0; tid < kThreads; ++tid) {
      for (int k = 0, i = Map::strided_index(tid, 0); i < n; i = Map::strided_index(tid, ++k)) {
        const int token = r.token_begin + i;
        const float v = probs ? vals.prob(b.seq, b.head, token) : vals.logit(b.seq, b.head, token);
        em.record(tid, ev_(tid, Step::stage_output, Op::shared_load, Tensor::logits)
                           .it(k).tok(token).at(logits_smem_byte(i), 4).val(v));
        em.record(tid, ev_(tid, Step::stage_output, Op::global_store, Tensor::stage_out)
                           .it(k).tok(token).at(sg.logit_offset(b.seq, b.head, token) * 4, 4).val(v));
      }
    }
  }

  // block_reduce (03_softmax.cuh). warp_value[w] = warp w's reduced value.
  void block_reduce(Step step, int slot_base, const float* warp_value, float result) {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = Map::warp_of(tid), lane = Map::lane_of(tid);
      for (int mask = kWarpSize / 2; mask >= 1; mask /= 2)
        em.record(tid, ev_(tid, step, Op::shuffle, Tensor::none).src(lane ^ mask));
      if (lane == 0) {
        em.record(tid, ev_(tid, step, Op::shared_store, Tensor::red_scratch)
                           .at(red_scratch_byte(slot_base + warp), 4).val(warp_value[warp]));
      }
    }
    em.barrier_all();
    for (int tid = 0; tid < kThreads; ++tid) {
      const int lane = Map::lane_of(tid);
      if (lane < kWarps) {
        em.record(tid, ev_(tid, step, Op::shared_load, Tensor::red_scratch)
                           .at(red_scratch_byte(slot_base + lane), 4).val(warp_value[lane]));
      }
      for (int mask = kWarps / 2; mask >= 1; mask /= 2)
        em.record(tid, ev_(tid, step, Op::shuffle, Tensor::none).src(lane ^ mask));
      em.record(tid, ev_(tid, step, Op::shuffle, Tensor::none).src(0).val(result));
    }
  }

  // softmax_block (03_softmax.cuh). Values from the range's own logits: the
  // max and exp sum of the tokens of r (a V2 partition's, or the context's).
  float range_max = 0.f, range_sum = 0.f;
  void softmax(const PartitionRange& r) {
    const int n = r.token_end - r.token_begin;
    auto logit = [&](int t) { return vals.logit(b.seq, b.head, t); };
    float m = -std::numeric_limits<float>::infinity();
    for (int t = r.token_begin; t < r.token_end; ++t) m = std::max(m, logit(t));
    auto ex = [&](int t) { return static_cast<float>(std::exp(static_cast<double>(logit(t)) - m)); };
    double sum = 0;
    for (int t = r.token_begin; t < r.token_end; ++t) sum += ex(t);
    const float s = static_cast<float>(sum);
    auto prob = [&](int t) { return static_cast<float>(ex(t) / sum); };
    range_max = m;
    range_sum = s;
    // Warp w's threads own range-relative tokens i with (i % kThreads) / 32 == w.
    float wmax[kWarps], wsum[kWarps];
    for (int w = 0; w < kWarps; ++w) {
      float mx = -std::numeric_limits<float>::infinity();
      double ws = 0;
      for (int i = 0; i < n; ++i) {
        if (Map::warp_of(i % kThreads) != w) continue;
        mx = std::max(mx, logit(r.token_begin + i));
        ws += ex(r.token_begin + i);
      }
      wmax[w] = mx;
      wsum[w] = static_cast<float>(ws);
    }
    auto loop = [&](Step step, bool store, auto load_val, auto store_val) {
      for (int tid = 0; tid < kThreads; ++tid) {
        for (int k = 0, i = Map::strided_index(tid, 0); i < n; i = Map::strided_index(tid, ++k)) {
          const int token = r.token_begin + i;
          em.record(tid, ev_(tid, step, Op::shared_load, Tensor::logits)
                             .it(k).tok(token).at(logits_smem_byte(i), 4).val(load_val(token)));
          if (store) {
            em.record(tid, ev_(tid, step, Op::shared_store, Tensor::logits)
                               .it(k).tok(token).at(logits_smem_byte(i), 4).val(store_val(token)));
          }
        }
      }
    };
    loop(Step::max_reduce, false, logit, logit);
    block_reduce(Step::max_reduce, Map::red_max_slot(0), wmax, m);
    loop(Step::exp_sum_reduce, true, logit, ex);
    block_reduce(Step::exp_sum_reduce, Map::red_sum_slot(0), wsum, s);
    loop(Step::prob_store, true, ex, prob);
    em.barrier_all();
  }

  void softmax_stats() {
    const std::int64_t off = sg.stat_offset(b.seq, b.head);
    em.record(0, ev_(0, Step::stage_output, Op::global_store, Tensor::part_max).at(off * 4, 4).val(range_max));
    em.record(0, ev_(0, Step::stage_output, Op::global_store, Tensor::part_sum).at(off * 4, 4).val(range_sum));
  }

  // lv_accumulate_token_rows (04_lv.cuh): thread tid's loop over its warp's blocks.
  void lv_token_rows(int tid, const PartitionRange& r) {
    constexpr int kN = Cfg::kVVecSize;
    const int lane = Map::lane_of(tid);
    const int dim0 = Map::lv_row(lane, 0);
    const bool in_row = Map::lv_row_valid(dim0);
    warp_blocks(tid, r, [&](int n, int lblock, int phys) {
      if (!in_row) return;
      for (int s = 0; s < Cfg::kLvTokenSteps; ++s) {
        const int t = Map::lv_row_token(lane, s);
        const std::int64_t off = Map::v_offset(kv_geometry(), phys, kv_head, dim0, t);
        em.record(tid, ev_(tid, Step::v_load, Op::global_load, Tensor::v_cache)
                           .it(n).tok(Map::token_of(lblock, t)).blk(lblock, phys).dims(dim0, kN)
                           .at(off * Cfg::kKvBytes, Cfg::kVVecBytes));
      }
      for (int s = 0; s < Cfg::kLvTokenSteps; ++s) {
        const int token = Map::token_of(lblock, Map::lv_row_token(lane, s));
        if (token >= r.token_end) continue;
        em.record(tid, ev_(tid, Step::logit_load, Op::shared_load, Tensor::logits)
                           .it(n).tok(token).blk(lblock, phys).at(logits_smem_byte(token - r.token_begin), 4));
        em.record(tid, ev_(tid, Step::accumulate, Op::compute, Tensor::none)
                           .it(n).tok(token).blk(lblock, phys).dims(dim0, kN));
      }
    });
  }

  // lv_accumulate (04_lv.cuh): thread tid's loop over its warp's blocks.
  void lv_vllm(int tid, const PartitionRange& r) {
    constexpr int kN = Cfg::kVVecSize;
    const int lane = Map::lane_of(tid);
    const int t_in_block = Map::lv_token_in_block(lane);
    warp_blocks(tid, r, [&](int n, int lblock, int phys) {
      const int token0 = Map::token_of(lblock, t_in_block);
      const int idx0 = token0 - r.token_begin;
      const int valid = r.token_end - token0;
      if (valid > 0) {
        em.record(tid, ev_(tid, Step::logit_load, Op::shared_load, Tensor::logits)
                           .it(n).tok(token0).blk(lblock, phys).at(logits_smem_byte(idx0), 4 * std::min(valid, kN)));
      }
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(lane, i);
        if (!Map::lv_row_valid(row)) continue;
        const std::int64_t off = Map::v_offset(kv_geometry(), phys, kv_head, row, t_in_block);
        em.record(tid, ev_(tid, Step::v_load, Op::global_load, Tensor::v_cache)
                           .it(n).tok(token0).blk(lblock, phys).dims(row, 1)
                           .at(off * Cfg::kKvBytes, Cfg::kVVecBytes));
        if constexpr (is_fp8(Cfg::kKvDType))
          em.record(tid, ev_(tid, Step::dequant, Op::compute, Tensor::none)
                             .it(n).tok(token0).blk(lblock, phys).dims(row, 1));
        em.record(tid, ev_(tid, Step::accumulate, Op::compute, Tensor::none)
                           .it(n).tok(token0).blk(lblock, phys).dims(row, 1));
      }
    });
  }

  // softmax_times_v's LV part (04_lv.cuh): the layout's accumulate loop, then
  // lv_reduce_rows.
  void lv(const PartitionRange& r) {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int lane = Map::lane_of(tid);
      if constexpr (Cfg::kTokenRows) lv_token_rows(tid, r);
      else lv_vllm(tid, r);
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(lane, i);
        for (int mask = Map::kLvReduceMaskHigh; mask >= Map::kLvReduceMaskLow; mask /= 2) {
          if (Map::lv_row_valid(row)) {
            em.record(tid, ev_(tid, Step::accumulate, Op::shuffle, Tensor::none).it(i).dims(row, 1).src(lane ^ mask));
          }
        }
      }
    }
  }

  // stage4_lv_kernel's partial-output store
  void partials_out() {
    for (int tid = 0; tid < kThreads; ++tid) {
      const int warp = Map::warp_of(tid), lane = Map::lane_of(tid);
      if (!Map::lv_row_owner(lane)) continue;
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(lane, i);
        if (!Map::lv_row_valid(row)) continue;
        em.record(tid, ev_(tid, Step::stage_output, Op::global_store, Tensor::stage_out)
                           .it(i).dims(row, 1).at(sg.partial_offset(b.seq, b.head, warp, row) * 4, 4)
                           .val(vals.partial(b.seq, b.head, warp, row)));
      }
    }
  }

  // warp_tree_reduce (05_warp_reduce.cuh)
  void warp_reduce() {
    em.barrier_all();
    for (int rnd = 0, active = kWarps; active > 1; active /= 2, ++rnd) {
      const int mid = active / 2;
      for (int tid = 0; tid < kThreads; ++tid) {
        const int warp = Map::warp_of(tid), lane = Map::lane_of(tid);
        if (!(Map::lv_row_owner(lane) && warp >= mid && warp < active)) continue;
        for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
          const int row = Map::lv_row(lane, i);
          if (!Map::lv_row_valid(row)) continue;
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                             .it(rnd).dims(row, 1)
                             .at(static_cast<std::int64_t>(Map::reduce_scratch_offset(warp - mid, row)) * 4, 4));
        }
      }
      em.barrier_all();
      for (int tid = 0; tid < kThreads; ++tid) {
        const int warp = Map::warp_of(tid), lane = Map::lane_of(tid);
        if (!(Map::lv_row_owner(lane) && warp < mid)) continue;
        for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
          const int row = Map::lv_row(lane, i);
          if (!Map::lv_row_valid(row)) continue;
          em.record(tid, ev_(tid, Step::warp_reduce, Op::shared_load, Tensor::out_scratch)
                             .it(rnd).dims(row, 1)
                             .at(static_cast<std::int64_t>(Map::reduce_scratch_offset(warp, row)) * 4, 4));
        }
      }
      em.barrier_all();
    }
  }

  // store_output_row (05_warp_reduce.cuh)
  void out_store() {
    for (int tid = 0; tid < kWarpSize; ++tid) {  // warp 0
      const int lane = Map::lane_of(tid);
      if (!Map::lv_row_owner(lane)) continue;
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(lane, i);
        if (!Map::lv_row_valid(row)) continue;
        em.record(tid, ev_(tid, Step::out_store, Op::global_store, Tensor::output)
                           .it(i).dims(row, 1).at(p.query.out_offset(b.seq, b.head, row) * Cfg::kElemBytes,
                                                  Cfg::kElemBytes)
                           .val(vals.out(b.seq, b.head, row)));
      }
    }
  }

  // Stage 6's stores (06_v2_partition.cuh, the end of stage6_v2_partition_kernel)
  // for launch l; part = the partition index (b.partition is its label).
  const V2Launch* l = nullptr;
  int part = 0;
  void v2_stores(int n_parts, const PartitionRange& r) {
    const StateGeometry stg{p.spec.num_heads, p.spec.head_size};
    auto state_rows = [&](Tensor t, auto offset, auto value) {
      for (int tid = 0; tid < kWarpSize; ++tid) {  // warp 0's row owners
        const int lane = Map::lane_of(tid);
        if (!Map::lv_row_owner(lane)) continue;
        for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
          const int row = Map::lv_row(lane, i);
          if (!Map::lv_row_valid(row)) continue;
          em.record(tid, ev_(tid, Step::partition_store, Op::global_store, t)
                             .it(i).dims(row, 1).at(offset(row) * 4, 4).val(value(row)));
        }
      }
    };
    auto range_out = [&](int row) { return vals.state_out(b.seq, b.head, r.token_begin, r.token_end, row); };
    if (n_parts == 1 && l->direct) {
      if (l->out) out_store();
      if (l->out_state) {
        state_rows(l->state_out_as, [&](int row) { return stg.out_offset(b.seq, b.head, row); }, range_out);
      }
      if (l->lse) {
        const std::int64_t off = stg.lse_offset(b.seq, b.head);
        em.record(0, ev_(0, Step::partition_store, Op::global_store, l->state_lse_as)
                         .at(off * 4, 4).val(range_max + std::log(range_sum)));
      }
      return;
    }
    const PartitionGeometry pg{p.spec.num_heads, l->max_partitions, p.spec.head_size};
    state_rows(Tensor::part_out, [&](int row) { return pg.out_offset(b.seq, b.head, part, row); }, range_out);
    const std::int64_t off = pg.stat_offset(b.seq, b.head, part);
    em.record(0, ev_(0, Step::partition_store, Op::global_store, Tensor::part_max).at(off * 4, 4).val(range_max));
    em.record(0, ev_(0, Step::partition_store, Op::global_store, Tensor::part_sum).at(off * 4, 4).val(range_sum));
  }

  // stage6_v2_partition_kernel
  void run_v2() {
    row = table_row();
    context_len();
    const int n_parts = num_partitions_in(l->range, ctx_len(), l->partition_size);
    if (part >= n_parts) return;
    const PartitionRange r = partition_range_in(l->range, ctx_len(), Cfg::kBlockSize, l->partition_size, part);
    q_to_smem();
    alibi();
    qk(r);
    softmax(r);
    lv(r);
    warp_reduce();
    v2_stores(n_parts, r);
  }

  void run(Stage stage) {
    const PartitionRange r = partition_range(ctx_len(), Cfg::kBlockSize, 0, 0);
    if (stage == Stage::q_to_smem) {
      q_to_smem();
      q_readback();
      return;
    }
    row = table_row();
    context_len();
    q_to_smem();
    alibi();
    qk(r);
    if (stage == Stage::qk) {
      logits_row(r, false);
      return;
    }
    softmax(r);
    if (stage == Stage::softmax) {
      logits_row(r, true);
      softmax_stats();
      return;
    }
    lv(r);
    if (stage == Stage::lv) {
      partials_out();
      return;
    }
    warp_reduce();
    out_store();
  }
};


template <int HS>
void model_v2_partition_block_head(const PagedProblem& p, const V2Launch& l, int seq, int head, int part,
                                   ModelValues& vals, std::vector<Event>& out) {
  with_kernel_config_of_head<HS>(p.spec, false, [&](auto cfg) {  // stage 6 reads vLLM's layout only
    using Cfg = decltype(cfg);
    const int kv_head = kv_head_of(head, p.spec.num_heads, p.spec.num_kv_heads);
    const BlockId b{seq, head, l.partition_base + part};
    BlockEmitter em(out, Stage::v2_partition, b, kv_head, Cfg::kNumThreads);
    const int max_ctx = *std::max_element(p.context_lens.begin(), p.context_lens.end());
    V1Model<Cfg> m{{p, vals, em}, b, kv_head,
                   StageOutGeometry{p.spec.num_heads, p.spec.head_size, max_ctx, Cfg::kNumWarps}};
    m.l = &l;
    m.part = part;
    m.run_v2();
  });
}

template <int HS>
void model_v1_block_head(const PagedProblem& p, Stage stage, const BlockId& b, ModelValues& vals,
                         std::vector<Event>& out) {
  // Stage 5's token-row configuration for nhd / hnd (with_layout_kernel_config's choice).
  with_kernel_config_of_head<HS>(p.spec, kv_layout_token_rows(p.spec.kv_layout), [&](auto cfg) {
    using Cfg = decltype(cfg);
    const int kv_head = kv_head_of(b.head, p.spec.num_heads, p.spec.num_kv_heads);
    BlockEmitter em(out, stage, b, kv_head, Cfg::kNumThreads);
    const int max_ctx = *std::max_element(p.context_lens.begin(), p.context_lens.end());
    V1Model<Cfg> m{{p, vals, em}, b, kv_head,
                   StageOutGeometry{p.spec.num_heads, p.spec.head_size, max_ctx, Cfg::kNumWarps}};
    m.run(stage);
  });
}

}  // namespace pa::trace::detail
