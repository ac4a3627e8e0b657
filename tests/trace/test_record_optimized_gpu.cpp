// Stage 8: the recorded GPU trace equals the host model (label gpu; SKIPPED
// without a GPU or a CUDA build). Each selected CTA's threads must have the
// model's events, field for field and in program order; values (outputs,
// arrival flags) within the dtype's tolerance (pa/trace/compare.hpp). Every
// case has a recording instance in every CUDA build (trace/CMakeLists.txt
// compiles stage 8's recording list whatever PA_QUICK_KERNELS), so each runs.
//
// The arrival order at a (sequence, unit)'s counter is the one input the
// model cannot know: record_optimized reports which selected CTA's atomic
// saw the count complete (or that none of the selected did), and the model
// emits that CTA's merge. Everything else (the plan from this GPU's SM count
// and the kernel's occupancy, every address) the model derives itself.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "record_check.hpp"
#include "replay_check.hpp"
#include "gpu_skip.hpp"
#include "pa/index/optimized.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

struct Case {
  DType dt;
  int head, block;
  std::vector<int> ctx;
  int heads, kv_heads;
  int force_splits;           // 0: the heuristic for this GPU
  std::vector<BlockId> sel;   // empty: every CTA of the grid (at most 16)
  KvDType kv = KvDType::same;
  KvLayout layout = KvLayout::vllm;
  PageTableForm table = PageTableForm::padded;
};

}  // namespace

TEST_CASE("stage 8: recorded GPU events equal the host model", "[gpu][trace][record][optimized]") {
  PA_REQUIRE_GPU();
  const Case cases[] = {
      // GQA 4:1, ragged (600, 1, 37), 4 splits: all of (seq 0, unit 1), a split with no work.
      {DType::f16, 128, 16, {600, 1, 37}, 8, 2, 4, {{0, 5, 0}, {0, 5, 1}, {0, 5, 2}, {0, 5, 3}, {1, 0, 0}, {1, 0, 2}, {2, 4, 0}}},
      // The planner's own split for this GPU.
      {DType::f16, 128, 16, {100}, 8, 2, 0, {}},
      // MQA with 16 query heads (2 head tiles), 3 splits; sequence 1 has one active split.
      {DType::bf16, 128, 16, {300, 17}, 16, 1, 3, {}},
      // MHA, block 8 (two blocks per step), context 1.
      {DType::f16, 64, 8, {100, 9, 1}, 4, 4, 0, {{0, 0, 0}, {0, 3, 0}, {1, 2, 0}, {2, 1, 0}}},
      // GQA 2:1, head 256 x block 32 (one pipeline stage), 2 splits.
      {DType::bf16, 256, 32, {65, 200}, 4, 2, 2, {{0, 0, 0}, {0, 0, 1}, {1, 2, 0}, {1, 2, 1}}},
      // A group of 32: two units (head chunks) per kv head.
      {DType::f16, 256, 16, {50}, 32, 1, 0, {}},
      // MQA group 8, block 32, 3 splits.
      {DType::bf16, 64, 32, {1000}, 8, 1, 3, {}},
      // fp8 caches: 4-byte fragment loads and their conversion; GQA 4:1 with 2
      // splits, and 16 heads per KV head (2 head tiles) with the planner's split.
      {DType::f16, 128, 16, {300, 20}, 8, 2, 2, {{0, 1, 0}, {0, 1, 1}, {1, 0, 0}}, KvDType::fp8_e4m3},
      {DType::bf16, 128, 16, {77}, 16, 1, 0, {}, KvDType::fp8_e5m2},
      // Token-row caches (one instance for both): K and V copied token-major,
      // V read by ldmatrix.trans. NHD with GQA 4:1, ragged, 4 splits; HND with
      // the planner's split; HND with 16 query heads on one KV head (2 head
      // tiles), block 32, head 64, 3 splits.
      {DType::f16, 128, 16, {600, 1, 37}, 8, 2, 4, {{0, 5, 0}, {0, 5, 3}, {1, 0, 0}, {2, 4, 0}}, KvDType::same,
       KvLayout::nhd},
      {DType::f16, 128, 16, {100}, 8, 2, 0, {}, KvDType::same, KvLayout::hnd},
      {DType::bf16, 64, 32, {300, 17}, 16, 1, 3, {}, KvDType::same, KvLayout::hnd},
      // CSR page tables: the row bounds, the indices and the last page's
      // length. vLLM's layout, ragged, 4 splits; HND with one split over 188
      // blocks (47 per warp), so the warps reload their row start at step 32.
      {DType::f16, 128, 16, {600, 1, 37}, 8, 2, 4, {{0, 5, 0}, {0, 5, 3}, {1, 0, 0}, {2, 4, 0}}, KvDType::same,
       KvLayout::vllm, PageTableForm::csr},
      {DType::f16, 128, 16, {3000, 40}, 8, 2, 1, {}, KvDType::same, KvLayout::hnd, PageTableForm::csr},
      // The split merge's largest batch (opt_merge_batch): 16 heads of 256
      // dims are 8 items a thread, merged 8 at a time over 3 splits (the MQA
      // case of 16 heads of 128 above merges 4 at a time over 3).
      {DType::f16, 256, 16, {300, 40}, 16, 1, 3, {}},
  };
  std::size_t compared = 0;
  for (const Case& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.context_lens = c.ctx;
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv_heads;
    s.seed = 23;
    s.alibi = (&c - cases) % 2 == 1;  // every other case with ALiBi (its slope loads and biased logits)
    s.kv_dtype = c.kv;
    s.kv_layout = c.layout;
    s.page_table = c.table;
    INFO(s.describe() << " layout " << kv_layout_name(c.layout) << " table " << page_table_name(c.table)
                      << " force_splits " << c.force_splits);
    REQUIRE(can_record(Stage::optimized, s));
    const PagedProblem p = make_problem(s);
    Selection sel{c.sel};
    if (sel.blocks.empty()) {  // every CTA of the planned grid
      const RecordResult r0 = record_optimized(p, Selection{}, c.force_splits);
      const OptimizedModelPlan plan = optimized_model_plan(s, r0.model_options.optimized);
      for (int q = 0; q < s.num_seqs(); ++q)
        for (int u = 0; u < plan.units; ++u)
          for (int sp = 0; sp < plan.splits; ++sp)
            sel.blocks.push_back({q, opt_unit_first_head(u, plan.head_chunks, plan.group), sp});
      REQUIRE(sel.blocks.size() <= 16);
    }
    const RecordResult rec = record_optimized(p, sel, c.force_splits);
    PA_CHECK_REPLAY_ORDER(rec.events);
    const OptimizedModelPlan plan = optimized_model_plan(s, rec.model_options.optimized);
    INFO("plan: splits " << plan.splits << " x " << plan.split_blocks << " blocks, units " << plan.units
                         << ", ctas/SM " << plan.ctas_per_sm << ", SMs " << plan.sm_count);
    PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, Stage::optimized, sel, rec.model_options), s.dtype);
    // Exactly one merger per (sequence, unit) whose splits are all selected and active.
    for (const auto& la : rec.model_options.optimized.last_arrivals) {
      const int n_active = opt_active_splits(s.context_lens[la.seq], s.block_size, plan.split_blocks);
      bool all_selected = plan.splits > 1;
      for (int sp = 0; sp < n_active && all_selected; ++sp) {
        const BlockId b{la.seq, opt_unit_first_head(la.unit, plan.head_chunks, plan.group), sp};
        all_selected = std::find(sel.blocks.begin(), sel.blocks.end(), b) != sel.blocks.end();
      }
      if (all_selected) CHECK(la.split >= 0);
    }
    ++compared;
  }
  CHECK(compared == std::size(cases));
}

TEST_CASE("stage 8: a small event buffer is rerun exactly", "[gpu][trace][record][optimized]") {
  PA_REQUIRE_GPU();
  ProblemSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.context_lens = {70};
  REQUIRE(can_record(Stage::optimized, s));  // fp16/128/16, head tiles 1: in every CUDA build
  const PagedProblem p = make_problem(s);
  const RecordResult big = record_optimized(p, {}, 1);
  REQUIRE(big.launches == 1);
  const RecordResult small = record_optimized(p, {}, 1, 100);
  CHECK(small.launches == 2);
  REQUIRE(small.events.size() == big.events.size());
  CHECK(std::memcmp(small.events.data(), big.events.data(), big.events.size() * sizeof(Event)) == 0);
}
