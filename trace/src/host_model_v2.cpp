// Host model of stage 6's reduce kernel (stage6_v2_reduce_kernel,
// kernels/stages/06_v2_partition.cuh): one thread block of 128 threads per
// (seq, head), labelled kReduceBlock. Mirrors the kernel's loops and its
// block reductions (reduce_block_any) event for event; the emission contract
// is the comment above the kernel and kernels/stages/EVENTS.md.
#include <algorithm>
#include <cmath>
#include <limits>

#include "host_model_detail.hpp"

namespace pa::trace::detail {
namespace {

constexpr int kReduceThreads = 128;  // launch_v2_reduce
constexpr int kReduceWarps = kReduceThreads / kWarpSize;

// reduce_block_any: thread_value[t] = thread t's input; result = the block's.
void reduce_block(BlockEmitter& em, Step step, bool is_max, const std::vector<float>& thread_value) {
  float warp_value[kReduceWarps];
  double block = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
  for (int w = 0; w < kReduceWarps; ++w) {
    double v = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int l = 0; l < kWarpSize; ++l) {
      const double x = thread_value[static_cast<std::size_t>(w * kWarpSize + l)];
      v = is_max ? std::max(v, x) : v + x;
    }
    warp_value[w] = static_cast<float>(v);
    block = is_max ? std::max(block, v) : block + v;
  }
  const float result = static_cast<float>(block);
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    const int lane = tid % kWarpSize;
    for (int mask = kWarpSize / 2; mask >= 1; mask /= 2)
      em.record(tid, ev(em.ctx(tid), step, Op::shuffle, Tensor::none).src(lane ^ mask));
  }
  em.barrier_all();
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    if (tid % kWarpSize == 0) {
      const int w = tid / kWarpSize;
      em.record(tid, ev(em.ctx(tid), step, Op::shared_store, Tensor::red_scratch)
                         .at(red_scratch_byte(w), 4).val(warp_value[w]));
    }
  }
  em.barrier_all();
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    const int lane = tid % kWarpSize;
    if (lane < kReduceWarps) {
      em.record(tid, ev(em.ctx(tid), step, Op::shared_load, Tensor::red_scratch)
                         .at(red_scratch_byte(lane), 4).val(warp_value[lane]));
    }
    for (int mask = kWarpSize / 2; mask >= 1; mask /= 2) {
      em.record(tid, ev(em.ctx(tid), step, Op::shuffle, Tensor::none)
                         .src(lane ^ mask).val(mask == 1 ? result : trace_nan()));
    }
  }
}

}  // namespace

V2Launch stage6_launch(const ProblemSpec& spec) {
  // The launch pa-lab run and record_stage make: the whole context, out
  // (dtype) and lse written, single-partition sequences written directly.
  V2Launch l;
  l.range = TokenRange{0, -1};
  l.partition_size = spec.partition_size;
  l.max_partitions = std::max(1, spec.max_partitions());
  return l;
}

void model_v2_reduce_block(const PagedProblem& p, const V2Launch& l, int seq, int head, ModelValues& vals,
                           std::vector<Event>& out) {
  const ProblemSpec& spec = p.spec;
  const int kv_head = kv_head_of(head, spec.num_heads, spec.num_kv_heads);
  BlockEmitter em(out, Stage::v2_partition, BlockId{seq, head, l.reduce_label}, kv_head, kReduceThreads);
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    em.record(tid, ev(em.ctx(tid), Step::block_table_load, Op::global_load, Tensor::context_lens)
                       .at(context_len_offset(seq) * 4, 4));
  }
  const int ctx = p.context_lens[seq];
  const int n_parts = num_partitions_in(l.range, ctx, l.partition_size);
  if (n_parts == 1 && l.direct) return;

  const PartitionGeometry pg{spec.num_heads, l.max_partitions, spec.head_size};
  const StateGeometry stg{spec.num_heads, spec.head_size};
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> mp(n_parts), sp(n_parts), wp(n_parts);
  std::vector<PartitionRange> ranges(n_parts);
  float m = ninf;
  for (int q = 0; q < n_parts; ++q) {
    ranges[q] = partition_range_in(l.range, ctx, spec.block_size, l.partition_size, q);
    std::tie(mp[q], sp[q]) = vals.range_stats(seq, head, ranges[q].token_begin, ranges[q].token_end);
    m = std::max(m, mp[q]);
  }
  double s = 0;
  for (int q = 0; q < n_parts; ++q) {
    wp[q] = (mp[q] == ninf || !(sp[q] > 0.f)) ? 0.f : std::exp(mp[q] - m) * sp[q];
    s += wp[q];
  }

  // Max of the partitions' maxima.
  std::vector<float> tv(kReduceThreads, ninf);
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    for (int q = tid, k = 0; q < n_parts; q += kReduceThreads, ++k) {
      em.record(tid, ev(em.ctx(tid), Step::max_reduce, Op::global_load, Tensor::part_max)
                         .it(k).at(pg.stat_offset(seq, head, q) * 4, 4).val(mp[q]));
      tv[tid] = std::max(tv[tid], mp[q]);
    }
  }
  reduce_block(em, Step::max_reduce, true, tv);
  // Weights w[p] (shared) and their sum.
  std::fill(tv.begin(), tv.end(), 0.f);
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    double ts = 0;
    for (int q = tid, k = 0; q < n_parts; q += kReduceThreads, ++k) {
      const std::int64_t off = pg.stat_offset(seq, head, q) * 4;
      em.record(tid, ev(em.ctx(tid), Step::exp_sum_reduce, Op::global_load, Tensor::part_max).it(k).at(off, 4).val(mp[q]));
      em.record(tid, ev(em.ctx(tid), Step::exp_sum_reduce, Op::global_load, Tensor::part_sum).it(k).at(off, 4).val(sp[q]));
      em.record(tid, ev(em.ctx(tid), Step::exp_sum_reduce, Op::shared_store, Tensor::out_scratch)
                         .it(k).at(static_cast<std::int64_t>(q) * 4, 4).val(wp[q]));
      ts += wp[q];
    }
    tv[tid] = static_cast<float>(ts);
  }
  reduce_block(em, Step::exp_sum_reduce, false, tv);
  // out = sum_p w_p out_p / sum_p w_p.
  const int tb = l.range.begin_for(ctx), te = l.range.end_for(ctx);
  for (int tid = 0; tid < kReduceThreads; ++tid) {
    for (int d = tid, k = 0; d < spec.head_size; d += kReduceThreads, ++k) {
      for (int q = 0; q < n_parts; ++q) {
        em.record(tid, ev(em.ctx(tid), Step::partition_reduce, Op::shared_load, Tensor::out_scratch)
                           .it(q).dims(d, 1).at(static_cast<std::int64_t>(q) * 4, 4).val(wp[q]));
        if (wp[q] > 0.f) {
          em.record(tid, ev(em.ctx(tid), Step::partition_reduce, Op::global_load, Tensor::part_out)
                             .it(q).dims(d, 1).at(pg.out_offset(seq, head, q, d) * 4, 4)
                             .val(vals.state_out(seq, head, ranges[q].token_begin, ranges[q].token_end, d)));
        }
      }
      const float o = vals.state_out(seq, head, tb, te, d);
      if (l.out) {
        const int eb = dtype_bytes(spec.dtype);
        em.record(tid, ev(em.ctx(tid), Step::out_store, Op::global_store, Tensor::output)
                           .it(k).dims(d, 1).at(p.query.out_offset(seq, head, d) * eb, eb).val(o));
      }
      if (l.out_state) {
        em.record(tid, ev(em.ctx(tid), Step::out_store, Op::global_store, l.state_out_as)
                           .it(k).dims(d, 1).at(stg.out_offset(seq, head, d) * 4, 4).val(o));
      }
    }
  }
  if (l.lse) {
    em.record(0, ev(em.ctx(0), Step::out_store, Op::global_store, l.state_lse_as)
                     .at(stg.lse_offset(seq, head) * 4, 4).val(s > 0 ? vals.state_lse(seq, head, tb, te) : ninf));
  }
}

}  // namespace pa::trace::detail
