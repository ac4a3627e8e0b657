// Stage 8's host model: the plan (the kernel's split plan for the spec), the
// selection of CTAs, and the hand-over of the selected CTAs to the model's
// instances of the problem's head size (host_model_optimized.hpp has the
// model itself).
#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

#include "host_model_detail.hpp"
#include "host_model_optimized_configs.hpp"

namespace pa::trace::detail {
namespace {

void check_spec(const ProblemSpec& s) {
  if (s.num_threads != 128) {
    throw std::invalid_argument("stage optimized: num_threads " + std::to_string(s.num_threads) +
                                " (accepted: 128; stage 8 sizes its CTA itself: 4 warps, 8 where an fp8 step is 4 KB, "
                                "opt_num_warps)");
  }
}

}  // namespace

}  // namespace pa::trace::detail

namespace pa::trace {

OptimizedModelPlan optimized_model_plan(const ProblemSpec& spec, const OptimizedModelOptions& opt) {
  spec.validate();
  detail::check_spec(spec);
  if (opt.sm_count < 1) {
    throw std::invalid_argument("stage optimized model: sm_count " + std::to_string(opt.sm_count) + " (accepted: >= 1)");
  }
  if (!(opt.dram_gbps > 0)) {
    throw std::invalid_argument("stage optimized model: dram_gbps " + std::to_string(opt.dram_gbps) +
                                " (accepted: > 0, the device's DRAM peak in GB/s)");
  }
  OptimizedModelPlan plan;
  plan.group = spec.num_heads / spec.num_kv_heads;
  plan.head_tiles = opt_head_tiles(plan.group);
  plan.head_chunks = opt_head_chunks(plan.group);
  plan.units = spec.num_kv_heads * plan.head_chunks;
  plan.sm_count = opt.sm_count;
  detail::with_opt_config(spec, plan.head_tiles, [&](auto cfg) {
    using Cfg = decltype(cfg);
    plan.smem_bytes = Cfg::kSmemBytes;
    plan.stages = Cfg::kStages;
    plan.ctas_per_sm = std::max(1, opt.ctas_per_sm > 0 ? opt.ctas_per_sm : opt_ctas_per_sm_by_smem(Cfg::kSmemBytes));
    OptSplitInput in;
    in.num_seqs = spec.num_seqs();
    in.units = plan.units;
    in.head_size = spec.head_size;
    in.block_size = spec.block_size;
    in.elem_bytes = kv_elem_bytes(spec.dtype, spec.kv_dtype);
    in.blocks_per_step = Cfg::kBlocksPerStep;
    in.max_context_len = spec.max_context_len();
    in.context_lens = spec.context_lens.data();
    in.unit_heads = opt_unit_num_heads(0, plan.head_chunks, plan.group);  // the largest unit: the first
    in.sm_count = plan.sm_count;
    in.ctas_per_sm = plan.ctas_per_sm;
    in.dram_gbps = opt.dram_gbps;
    const OptSplit sp = opt_choose_split(in, opt.force_splits);
    plan.splits = sp.splits;
    plan.split_blocks = sp.split_blocks;
  });
  return plan;
}

namespace detail {

std::vector<BlockId> resolve_optimized_selection(const ProblemSpec& spec, const Selection& sel,
                                                 const OptimizedModelOptions& opt) {
  const OptimizedModelPlan plan = optimized_model_plan(spec, opt);
  std::vector<BlockId> blocks = sel.blocks;
  if (blocks.empty()) blocks.push_back(BlockId{});
  for (BlockId& b : blocks) {
    auto bad = [&](const std::string& what) {
      throw std::invalid_argument("trace selection (seq " + std::to_string(b.seq) + ", head " +
                                  std::to_string(b.head) + ", partition " + std::to_string(b.partition) +
                                  "), stage optimized: " + what);
    };
    if (b.seq < 0 || b.seq >= spec.num_seqs())
      bad("seq out of range (accepted: 0 .. " + std::to_string(spec.num_seqs() - 1) + ")");
    if (b.head < 0 || b.head >= spec.num_heads)
      bad("head out of range (accepted: 0 .. " + std::to_string(spec.num_heads - 1) + ")");
    if (b.partition < 0 || b.partition >= plan.splits)
      bad("partition (the split) out of range (accepted: 0 .. " + std::to_string(plan.splits - 1) +
          ": the plan has " + std::to_string(plan.splits) + " splits of " + std::to_string(plan.split_blocks) +
          " blocks)");
    // A CTA serves a unit of query heads: name it by the unit's first head.
    const int unit = opt_unit_of_head(b.head, plan.group, plan.head_chunks);
    b.head = opt_unit_first_head(unit, plan.head_chunks, plan.group);
  }
  std::sort(blocks.begin(), blocks.end(), [](const BlockId& a, const BlockId& b) {
    return std::tie(a.seq, a.head, a.partition) < std::tie(b.seq, b.head, b.partition);
  });
  blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
  return blocks;
}

void model_optimized(const PagedProblem& p, const std::vector<BlockId>& blocks, const OptimizedModelOptions& opt,
                     ModelValues& vals, std::vector<Event>& out) {
  const OptimizedModelPlan plan = optimized_model_plan(p.spec, opt);
  if (!with_head_size(p.spec.head_size,
                      [&](auto h) { model_optimized_head<decltype(h)::value>(p, blocks, plan, opt, vals, out); }))
    throw_no_opt_model(p.spec);
}

}  // namespace detail
}  // namespace pa::trace
