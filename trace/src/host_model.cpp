// The host model's entry point: validates the problem and the selection,
// builds the paged problem (block tables, values) and enumerates each selected
// thread block's events with the stage's model.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "host_model_detail.hpp"
#include "pa/kernels/api.hpp"

namespace pa::trace {

void sort_replay_order(std::vector<Event>& events) {
  // Blocks by label in data-flow order (block_replay_rank: prefix, partitions,
  // reduce, merge), then program order.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    const long long ra = block_replay_rank(a.partition), rb = block_replay_rank(b.partition);
    return std::tie(a.seq, a.head, ra, a.epoch, a.warp, a.lane, a.seq_in_thread) <
           std::tie(b.seq, b.head, rb, b.epoch, b.warp, b.lane, b.seq_in_thread);
  });
}

bool stage_is_modelled(Stage stage) {
  switch (stage) {
    case Stage::q_to_smem:
    case Stage::qk:
    case Stage::softmax:
    case Stage::lv:
    case Stage::warp_reduce:
    case Stage::v2_partition:
    case Stage::cascade_merge:  // in part: model_coverage_note
    case Stage::optimized:
      return true;
    default:
      return false;
  }
}

CascadeTracePlan cascade_trace_plan(const ProblemSpec& spec) {
  CascadeTracePlan plan;
  plan.prefix_len = spec.shared_prefix_len;
  plan.tensor_cores = spec.dtype != DType::f32;
  const int max_ctx = spec.context_lens.empty() ? 1 : *std::max_element(spec.context_lens.begin(), spec.context_lens.end());
  if (plan.prefix_len > 0) {
    if (plan.tensor_cores) {
      plan.chunk_len = kCascadeTraceChunkLen;
      plan.prefix_partitions = ceil_div(plan.prefix_len, plan.chunk_len);
    } else {
      plan.prefix_partitions = num_partitions(plan.prefix_len, spec.partition_size);
    }
  }
  plan.suffix_partitions = std::max(1, num_partitions(std::max(1, max_ctx - plan.prefix_len), spec.partition_size));
  return plan;
}

std::string model_coverage_note(const ProblemSpec& spec, Stage stage) {
  if (stage == Stage::cascade_merge && spec.shared_prefix_len > 0 && spec.dtype != DType::f32) {
    std::string note = "the prefix kernel is traced as its mma.sync variant " +
                       std::to_string(kCascadeTracePrefixVariant) +
                       " (cascade_prefix_kernel); on sm_90a GPUs the cascade runs the wgmma variant, which records "
                       "timelines (pa-lab timeline) but no per-access events";
    // The suffix: traced as V2; the timed default (07_cascade_merge.cu,
    // CascadePlan::Suffix) runs it through stage 8, traced on its own.
    note += ". The suffix is traced as V2 (stage 6); where stage 8 is built for the configuration the "
            "timed cascade runs it through stage 8 instead (the optimized kernel over the tokens past the prefix, "
            "writing its state), whose own trace is stage 'optimized'";
    return note;
  }
  return {};
}

namespace {
// Partitions a selection may name: stage 6 the context's, stage 7 the suffix's.
int selectable_partitions(const ProblemSpec& spec, Stage stage, int seq) {
  const int ctx = spec.context_lens[seq];
  if (stage == Stage::v2_partition) return num_partitions(ctx, spec.partition_size);
  if (stage == Stage::cascade_merge) {
    const TokenRange r{spec.shared_prefix_len, -1};
    return std::max(1, num_partitions_in(r, ctx, spec.partition_size));
  }
  return 1;
}
}  // namespace

std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel) {
  return resolve_selection(spec, stage, sel, ModelOptions{});
}

std::vector<BlockId> resolve_selection(const ProblemSpec& spec, Stage stage, const Selection& sel,
                                       const ModelOptions& opt) {
  // Stage 8 names CTAs by (seq, unit's first head, split): host_model_optimized.cpp.
  if (stage == Stage::optimized) return detail::resolve_optimized_selection(spec, sel, opt.optimized);
  std::vector<BlockId> blocks = sel.blocks;
  if (blocks.empty()) blocks.push_back(BlockId{});
  const bool partitioned = stage == Stage::v2_partition || stage == Stage::cascade_merge;
  for (const BlockId& b : blocks) {
    auto bad = [&](const std::string& what) {
      throw std::invalid_argument("trace selection (seq " + std::to_string(b.seq) + ", head " +
                                  std::to_string(b.head) + ", partition " + std::to_string(b.partition) +
                                  "): " + what);
    };
    if (b.seq < 0 || b.seq >= spec.num_seqs()) {
      bad("seq out of range (accepted: 0 .. " + std::to_string(spec.num_seqs() - 1) + ")");
    }
    if (b.head < 0 || b.head >= spec.num_heads) {
      bad("head out of range (accepted: 0 .. " + std::to_string(spec.num_heads - 1) + ")");
    }
    const int parts = selectable_partitions(spec, stage, b.seq);
    if (b.partition < 0 || b.partition >= parts) {
      bad(partitioned ? "partition out of range (accepted: 0 .. " + std::to_string(parts - 1) +
                            (stage == Stage::cascade_merge ? " for this sequence's suffix)"
                                                           : " for this sequence's context)")
                      : "partition must be 0 for stage " + std::string(to_string(stage)) + " (one partition)");
    }
  }
  std::sort(blocks.begin(), blocks.end(), [](const BlockId& a, const BlockId& b) {
    return std::tie(a.seq, a.head, a.partition) < std::tie(b.seq, b.head, b.partition);
  });
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  return blocks;
}

std::vector<BlockId> traced_blocks(const ProblemSpec& spec, Stage stage, const std::vector<BlockId>& resolved) {
  std::vector<BlockId> out;
  for (const BlockId& b : resolved) {
    if (stage == Stage::v2_partition) {
      out.push_back(b);
      out.push_back({b.seq, b.head, kReduceBlock});
    } else if (stage == Stage::cascade_merge) {
      const CascadeTracePlan plan = cascade_trace_plan(spec);
      out.push_back(b);
      out.push_back({b.seq, b.head, kReduceBlock});
      if (plan.prefix_len > 0) {
        if (!plan.tensor_cores && b.partition < plan.prefix_partitions)
          out.push_back({b.seq, b.head, kPrefixBlockBase + b.partition});
        if (plan.tensor_cores && b.partition < plan.prefix_partitions) {  // the prefix kernel block of the row's chunk
          const int ratio = spec.num_heads / spec.num_kv_heads;
          const PrefixBlockLabel lab = prefix_block_label_of(
              b.seq, b.head, ratio, prefix_rows_per_block(kCascadeTracePrefixVariant, spec.head_size));
          out.push_back({lab.seq, lab.head, kPrefixBlockBase + b.partition});
        }
        out.push_back({b.seq, b.head, kPrefixReduceBlock});
        out.push_back({b.seq, b.head, kMergeBlock});
      }
    } else {
      out.push_back(b);
    }
  }
  std::sort(out.begin(), out.end(), [](const BlockId& a, const BlockId& b) {
    return std::tie(a.seq, a.head, a.partition) < std::tie(b.seq, b.head, b.partition);
  });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string kv_cache_refusal(const ProblemSpec& spec, Stage stage) {
  // The forms the stage's kernels read are the forms it is traced in.
  if (std::string why = kernels::stage_reads_refusal(stage, spec.kv_layout, spec.page_table); !why.empty())
    return why;
  if (!is_fp8(spec.kv_dtype)) return {};
  if (stage == Stage::cascade_merge)
    return std::string("stage 7 (cascade_merge) takes no ") + kv_dtype_name(spec.kv_dtype) +
           " KV cache: its prefix kernels read K and V in the query's dtype, and the kernel refuses an fp8 cache "
           "(accepted: KV cache auto for stage 7; stages 1-6 and 8 take fp8)";
  if (stage == Stage::optimized) {
    // The model's own check (its configurations: no fp8 with block size 8),
    // blamed on the cache only when the same problem with a cache in the
    // query's dtype plans.
    try {
      optimized_model_plan(spec);
    } catch (const std::exception& e) {
      ProblemSpec same = spec;
      same.kv_dtype = KvDType::same;
      try {
        optimized_model_plan(same);
      } catch (const std::exception&) {
        return {};
      }
      return e.what();
    }
  }
  return {};
}

std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel) {
  return model_events(spec, stage, sel, ModelOptions{});
}

std::vector<Event> model_events(const ProblemSpec& spec, Stage stage, const Selection& sel, const ModelOptions& opt) {
  if (!is_valid(stage)) {
    throw std::invalid_argument("model_events: stage value " + std::to_string(static_cast<int>(stage)) +
                                " is not a stage (accepted: 1 .. 8)");
  }
  if (!stage_is_modelled(stage)) {
    throw std::invalid_argument(std::string("model_events: stage ") + to_string(stage) +
                                " has no host model (modelled: q_to_smem, qk, softmax, lv, warp_reduce, v2_partition, "
                                "cascade_merge, optimized)");
  }
  spec.validate();
  if (const std::string why = kv_cache_refusal(spec, stage); !why.empty())
    throw std::invalid_argument("model_events: " + why);
  const std::vector<BlockId> blocks = resolve_selection(spec, stage, sel, opt);
  const PagedProblem p = make_problem(spec);
  detail::ModelValues vals(p);
  std::vector<Event> out;
  if (stage == Stage::v2_partition) {
    const detail::V2Launch l = detail::stage6_launch(spec);
    for (const BlockId& b : blocks) detail::model_v2_partition_block(p, l, b.seq, b.head, b.partition, vals, out);
    std::vector<BlockId> rows = blocks;  // one reduce block per (seq, head)
    for (BlockId& b : rows) b.partition = 0;
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    for (const BlockId& b : rows) detail::model_v2_reduce_block(p, l, b.seq, b.head, vals, out);
  } else if (stage == Stage::cascade_merge) {
    detail::model_cascade(p, blocks, vals, out);
  } else if (stage == Stage::optimized) {
    detail::model_optimized(p, blocks, opt.optimized, vals, out);  // host_model_optimized.cpp
  } else {
    for (const BlockId& b : blocks) detail::model_v1_block(p, stage, b, vals, out);
  }
  sort_replay_order(out);
  return out;
}

}  // namespace pa::trace
