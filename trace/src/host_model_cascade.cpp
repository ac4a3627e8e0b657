// Host model of stage 7 (cascade_merge) as kernels/stages/07_cascade_merge.cu
// runs it (launch_cascade), for the kernels that have trace hooks:
//   prefix_len == 0: plain V2 over the whole context into the output (+ lse);
//   prefix_len > 0:  the prefix state (fp32: stage 6's partition kernel over
//                    [0, prefix) + its reduce; fp16/bf16: cascade_prefix_kernel's
//                    chunks + stage 6's reduce over them), the suffix state
//                    (stage 6's kernels over [prefix, context)), and the merge.
// Block labels (Event::partition, pa/index/events.hpp) tell the kernels apart.
//
// The tensor-core prefix kernel (cascade_prefix_kernel, traced in its
// mma.sync form) is modelled in host_model_cascade_prefix.cpp: its thread
// blocks are (query tile, KV head, chunk), shared by all sequences, labelled
// kPrefixBlockBase + chunk, as trace/record/record_cascade.cu records them.
// The wgmma form has timing hooks only (no per-access events).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "host_model_detail.hpp"
#include "pa/index/merge.hpp"

namespace pa::trace::detail {
void model_cascade_prefix_blocks(const PagedProblem&, const CascadeTracePlan&, const std::vector<BlockId>&,
                                 ModelValues&, std::vector<Event>&);  // host_model_cascade_prefix.cpp
namespace {

// The events of cascade_prefix_kernel's blocks that the selection's
// (seq, head) rows need (host_model_cascade_prefix.cpp).
void model_cascade_prefix_kernel(const PagedProblem& p, const CascadeTracePlan& plan, const std::vector<BlockId>& blocks,
                                 ModelValues& vals, std::vector<Event>& out) {
  model_cascade_prefix_blocks(p, plan, blocks, vals, out);  // host_model_cascade_prefix.cpp
}

// merge_states_kernel over the selected rows (sorted, unique).
void model_merge(const PagedProblem& p, const std::vector<std::pair<int, int>>& rows, ModelValues& vals,
                 std::vector<Event>& out) {
  const ProblemSpec& spec = p.spec;
  const int prefix = spec.shared_prefix_len;
  const std::int64_t num_rows = static_cast<std::int64_t>(p.num_seqs()) * spec.num_heads;
  const MergeGrid g = merge_grid(num_rows, spec.head_size);
  const StateGeometry stg{spec.num_heads, spec.head_size};
  const int ob = dtype_bytes(spec.dtype);
  // Each global thread's vectors in grid-stride order (its program order).
  std::map<std::int64_t, std::vector<std::int64_t>> by_thread;
  for (const auto& [seq, head] : rows) {
    const std::int64_t row = stg.row(seq, head);
    for (int v = 0; v < g.vecs_per_row; ++v) {
      const std::int64_t i = g.first_vec_of_row(row) + v;
      by_thread[i % g.stride()].push_back(i);
    }
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  for (auto& [gtid, vecs] : by_thread) {
    std::sort(vecs.begin(), vecs.end());
    int seq_in_thread = 0;
    for (const std::int64_t i : vecs) {
      const MergeGrid::Slot s = g.slot_of(i);
      const std::int64_t row = i / g.vecs_per_row;
      const int seq = static_cast<int>(row / spec.num_heads), head = static_cast<int>(row % spec.num_heads);
      const int d = MergeGrid::elem_of(i, g.vecs_per_row);
      const int ctx = p.context_lens[seq];
      const TraceCtx tc{Stage::cascade_merge, s.tid / kWarpSize, s.tid % kWarpSize, seq, head, kMergeBlock, -1};
      auto emit = [&](EventBuilder b) {
        Event e = b.it(s.iter);
        e.seq_in_thread = seq_in_thread++;
        out.push_back(e);
      };
      // merge_weights, in float as the kernel computes them.
      const float la = vals.state_lse(seq, head, 0, prefix), lb = vals.state_lse(seq, head, prefix, ctx);
      const float m = std::max(la, lb);
      float wa = 0.f, wb = 0.f, lse = ninf;
      if (m != ninf) {
        const float ea = la == ninf ? 0.f : std::exp(la - m), eb = lb == ninf ? 0.f : std::exp(lb - m);
        wa = ea / (ea + eb);
        wb = eb / (ea + eb);
        lse = m + std::log(ea + eb);
      }
      const std::int64_t off = stg.row_elem_offset(row, d);
      emit(ev(tc, Step::merge, Op::global_load, Tensor::prefix_lse).at(row * 4, 4).val(la));
      emit(ev(tc, Step::merge, Op::global_load, Tensor::suffix_lse).at(row * 4, 4).val(lb));
      emit(ev(tc, Step::merge, Op::compute, Tensor::none).val(lse));
      const float a0 = vals.state_out(seq, head, 0, prefix, d), b0 = vals.state_out(seq, head, prefix, ctx, d);
      if (wa > 0.f) emit(ev(tc, Step::merge, Op::global_load, Tensor::prefix_out).dims(d, 4).at(off * 4, 16).val(a0));
      if (wb > 0.f) emit(ev(tc, Step::merge, Op::global_load, Tensor::suffix_out).dims(d, 4).at(off * 4, 16).val(b0));
      emit(ev(tc, Step::merge, Op::global_store, Tensor::output).dims(d, 4).at(off * ob, 4 * ob).val(wa * a0 + wb * b0));
      if (d == 0) emit(ev(tc, Step::merge, Op::global_store, Tensor::state_lse).at(row * 4, 4).val(lse));
    }
  }
}

}  // namespace

void model_cascade(const PagedProblem& p, const std::vector<BlockId>& blocks, ModelValues& vals,
                   std::vector<Event>& out) {
  const ProblemSpec& spec = p.spec;
  const CascadeTracePlan plan = cascade_trace_plan(spec);
  std::vector<std::pair<int, int>> rows;
  for (const BlockId& b : blocks) rows.emplace_back(b.seq, b.head);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());

  if (plan.prefix_len == 0) {  // launch_cascade: plain V2 straight into the output, with lse
    V2Launch l;
    l.partition_size = spec.partition_size;
    l.max_partitions = plan.suffix_partitions;
    for (const BlockId& b : blocks) model_v2_partition_block(p, l, b.seq, b.head, b.partition, vals, out);
    for (const auto& [seq, head] : rows) model_v2_reduce_block(p, l, seq, head, vals, out);
    return;
  }
  // Prefix state [0, prefix): relabelled as the recording does (record_cascade.cu).
  V2Launch pre;
  pre.range = TokenRange{0, plan.prefix_len};
  pre.partition_size = plan.tensor_cores ? plan.chunk_len : spec.partition_size;
  pre.max_partitions = plan.prefix_partitions;
  pre.direct = !plan.tensor_cores;  // the prefix kernel never writes a final state
  pre.out = false;
  pre.out_state = true;
  pre.partition_base = kPrefixBlockBase;
  pre.reduce_label = kPrefixReduceBlock;
  pre.state_out_as = Tensor::prefix_out;
  pre.state_lse_as = Tensor::prefix_lse;
  if (plan.tensor_cores) {
    model_cascade_prefix_kernel(p, plan, blocks, vals, out);
  } else {
    for (const BlockId& b : blocks) {
      if (b.partition < plan.prefix_partitions) model_v2_partition_block(p, pre, b.seq, b.head, b.partition, vals, out);
    }
  }
  for (const auto& [seq, head] : rows) model_v2_reduce_block(p, pre, seq, head, vals, out);
  // Suffix state [prefix, context).
  V2Launch suf;
  suf.range = TokenRange{plan.prefix_len, -1};
  suf.partition_size = spec.partition_size;
  suf.max_partitions = plan.suffix_partitions;
  suf.out = false;
  suf.out_state = true;
  suf.state_out_as = Tensor::suffix_out;
  suf.state_lse_as = Tensor::suffix_lse;
  for (const BlockId& b : blocks) model_v2_partition_block(p, suf, b.seq, b.head, b.partition, vals, out);
  for (const auto& [seq, head] : rows) model_v2_reduce_block(p, suf, seq, head, vals, out);
  model_merge(p, rows, vals, out);
}

}  // namespace pa::trace::detail
