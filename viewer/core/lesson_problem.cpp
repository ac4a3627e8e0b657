#include "core/lesson_problem.hpp"

#include <algorithm>

#include "core/trace_load.hpp"
#include "pa/index/config.hpp"
#include "pa/kernels/api.hpp"

namespace pa::viewer {
namespace {
bool same_problem(const ProblemSpec& a, const ProblemSpec& b) {
  return a.context_lens == b.context_lens && a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.partition_size == b.partition_size && a.shared_prefix_len == b.shared_prefix_len &&
         a.kv_layout == b.kv_layout && a.page_table == b.page_table;
}
}  // namespace

LessonProblem lesson_problem(const ProblemSpec& current, trace::Stage stage, int sel_seq, const LessonProblemLocks& locks) {
  LessonProblem r;
  r.spec = current;
  ProblemSpec& spec = r.spec;
  // A stage is traced in the forms its kernels read (kernels::stage_reads):
  // a layout or table form chosen for another stage goes back to vLLM's
  // layout, or padded tables, where this one does not read it.
  if (!kernels::stage_reads(stage, spec.kv_layout)) spec.kv_layout = pa::KvLayout::vllm;
  if (!kernels::stage_reads(stage, spec.page_table)) spec.page_table = PageTableForm::padded;
  const int bs = std::max(1, spec.block_size);
  switch (stage) {
    case trace::Stage::cascade_merge:
      if (spec.shared_prefix_len == 0 && !locks.prefix) {
        if (spec.num_seqs() < 2 && !locks.context) spec.context_lens = {100, 140};
        spec.shared_prefix_len = 4 * bs;
        for (int c : spec.context_lens) spec.shared_prefix_len = std::min(spec.shared_prefix_len, (c - 1) / bs * bs);
        spec.shared_prefix_len = std::max(spec.shared_prefix_len, 0);
        r.changed = true;  // as before: regenerate even when no prefix fits
      }
      r.changed = r.changed || !same_problem(spec, current);
      return r;
    case trace::Stage::v2_partition: {
      r.changed = !same_problem(spec, current);
      if (spec.context_lens.empty()) return r;
      const int seq = std::clamp(sel_seq, 0, spec.num_seqs() - 1);
      int& ctx = spec.context_lens[seq];
      if (num_partitions(ctx, spec.partition_size) >= 2) return r;  // the reduce has work already (changed: above)
      if (spec.partition_size <= 0 && !locks.partition_size) spec.partition_size = kDefaultPartitionSize;
      const int ps = spec.partition_size;
      if (ps > 0 && num_partitions(ctx, ps) < 2) {
        if (!locks.context)
          ctx = 2 * ps + std::max(1, ps * 76 / kDefaultPartitionSize);  // 1100 for 512
        else if (!locks.partition_size && ctx > bs)
          spec.partition_size = std::max(bs, ctx / 3 / bs * bs);  // a multiple of the block size below ctx
      }
      break;
    }
    case trace::Stage::optimized:
      if (spec.num_heads == spec.num_kv_heads && !locks.heads) {
        if (spec.num_heads >= 4 && spec.num_heads % 4 == 0) {
          spec.num_kv_heads = spec.num_heads / 4;
        } else {
          spec.num_heads = 8;
          spec.num_kv_heads = 2;
        }
      }
      if (!locks.context && spec.context_lens == ProblemSpec{}.context_lens)
        spec.context_lens = {600};
      break;
    default:
      break;
  }
  r.changed = !same_problem(spec, current);
  return r;
}

LessonProblem lesson_problem_of(int lesson, const ProblemSpec& current, trace::Stage stage, int sel_seq,
                                const LessonProblemLocks& locks) {
  if (lesson == kLayoutsLesson && stage == trace::Stage::optimized) {
    // The layouts lesson opens on a token-row cache (HND), 16-bit, padded
    // tables: the KV tab draws its rows, the copies light whole token rows.
    LessonProblem r = lesson_problem(current, stage, sel_seq, locks);
    r.spec.kv_layout = pa::KvLayout::hnd;
    r.spec.page_table = PageTableForm::padded;
    r.spec.kv_dtype = KvDType::same;
    if (r.spec.dtype == DType::f32) r.spec.dtype = DType::f16;
    r.changed = r.changed || !same_problem(r.spec, current);
    return r;
  }
  if (lesson != 0) return lesson_problem(current, stage, sel_seq, locks);
  LessonProblem r;
  r.spec = current;
  if (!locks.context && current.context_lens == ProblemSpec{}.context_lens) {
    r.spec.context_lens = kLesson0Contexts;
    r.changed = true;
  }
  return r;
}

std::optional<ProblemSpec> problem_with_step(const ProblemSpec& spec, trace::Step step, trace::Stage stage) {
  ProblemSpec out = spec;
  if (step == trace::Step::alibi_bias && !spec.alibi) {
    out.alibi = true;
    return out;
  }
  if (step == trace::Step::q_scale) {
    // Only stage 8 rescales Q, and only for bf16 queries with an fp8 cache.
    if (stage != trace::Stage::optimized || (is_fp8(spec.kv_dtype) && spec.dtype == DType::bf16)) return std::nullopt;
    out.kv_dtype = is_fp8(spec.kv_dtype) ? spec.kv_dtype : KvDType::fp8_e4m3;
    out.dtype = DType::bf16;
    if (kv_cache_refusal(out, stage).empty()) return out;
    return std::nullopt;
  }
  if (step == trace::Step::dequant && !is_fp8(spec.kv_dtype)) {
    out.kv_dtype = KvDType::fp8_e4m3;
    if (out.dtype == DType::f32) out.dtype = DType::f16;  // fp8 caches take 16-bit queries
    if (kv_cache_refusal(out, stage).empty()) return out;
  }
  return std::nullopt;
}

std::string describe_step_change(const ProblemSpec& from, const ProblemSpec& to) {
  std::string r;
  auto add = [&](const std::string& part) { r += (r.empty() ? "" : " and ") + part; };
  if (to.alibi && !from.alibi) add("give it the paper's ALiBi slopes (the Problem tab's ALiBi checkbox)");
  if (to.kv_dtype != from.kv_dtype)
    add(std::string("store the KV cache in ") + kv_dtype_name(to.kv_dtype) + " (the Problem tab's KV cache choice)");
  if (to.dtype != from.dtype)
    add(std::string("make the queries ") + dtype_name(to.dtype) + " (the Problem tab's dtype)");
  return r;
}

LessonOpening lesson_opening(int lesson, trace::Stage stage) {
  LessonOpening o;
  if (lesson == 0) {
    o.tab = "kv";
    o.step = trace::Step::block_table_load;
    o.tensor = trace::Tensor::block_table;
  } else if (lesson == kLayoutsLesson) {
    o.tab = "kv";  // the cache's rows, lit by the first K copy
    o.step = trace::Step::k_load;
    o.tensor = trace::Tensor::k_cache;
  } else if (stage == trace::Stage::v2_partition || stage == trace::Stage::cascade_merge) {
    o.tab = "partitions";  // lessons 6 and 7 are about pictures of partitions and states
  }
  return o;
}

}  // namespace pa::viewer
