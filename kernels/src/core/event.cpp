// Names of the event enums and of the timeline's kernel roles. The Step and
// Stage names are the ones lessons use in their markers (<!-- pa:step
// stage=qk step=k_load ... -->), so they must match the enumerator spelling
// exactly.
#include "pa/core/event.hpp"

#include "pa/core/timeline.hpp"

#include <string>

namespace pa::trace {

const char* to_string(Stage s) {
  switch (s) {
    case Stage::q_to_smem: return "q_to_smem";
    case Stage::qk: return "qk";
    case Stage::softmax: return "softmax";
    case Stage::lv: return "lv";
    case Stage::warp_reduce: return "warp_reduce";
    case Stage::v2_partition: return "v2_partition";
    case Stage::cascade_merge: return "cascade_merge";
    case Stage::optimized: return "optimized";
  }
  return "invalid_stage";
}

const char* to_string(Step s) {
  switch (s) {
    case Step::q_load: return "q_load";
    case Step::q_smem_store: return "q_smem_store";
    case Step::q_smem_load: return "q_smem_load";
    case Step::block_table_load: return "block_table_load";
    case Step::k_load: return "k_load";
    case Step::qk_dot: return "qk_dot";
    case Step::qk_group_reduce: return "qk_group_reduce";
    case Step::logit_store: return "logit_store";
    case Step::max_reduce: return "max_reduce";
    case Step::exp_sum_reduce: return "exp_sum_reduce";
    case Step::prob_store: return "prob_store";
    case Step::logit_load: return "logit_load";
    case Step::v_load: return "v_load";
    case Step::accumulate: return "accumulate";
    case Step::warp_reduce: return "warp_reduce";
    case Step::out_store: return "out_store";
    case Step::partition_store: return "partition_store";
    case Step::partition_reduce: return "partition_reduce";
    case Step::merge: return "merge";
    case Step::stage_output: return "stage_output";
    case Step::barrier: return "barrier";
    case Step::k_smem_load: return "k_smem_load";
    case Step::v_smem_load: return "v_smem_load";
    case Step::rescale: return "rescale";
    case Step::split_arrive: return "split_arrive";
    case Step::alibi_bias: return "alibi_bias";
    case Step::dequant: return "dequant";
    case Step::q_scale: return "q_scale";
    case Step::count_: break;
  }
  return "invalid_step";
}

const char* to_string(Op o) {
  switch (o) {
    case Op::global_load: return "global_load";
    case Op::global_store: return "global_store";
    case Op::shared_load: return "shared_load";
    case Op::shared_store: return "shared_store";
    case Op::shuffle: return "shuffle";
    case Op::barrier: return "barrier";
    case Op::compute: return "compute";
    case Op::async_copy: return "async_copy";
    case Op::mma: return "mma";
    case Op::atomic: return "atomic";
  }
  return "invalid_op";
}

const char* to_string(Tensor t) {
  switch (t) {
    case Tensor::none: return "none";
    case Tensor::q: return "q";
    case Tensor::k_cache: return "k_cache";
    case Tensor::v_cache: return "v_cache";
    case Tensor::block_table: return "block_table";
    case Tensor::context_lens: return "context_lens";
    case Tensor::q_smem: return "q_smem";
    case Tensor::logits: return "logits";
    case Tensor::red_scratch: return "red_scratch";
    case Tensor::out_scratch: return "out_scratch";
    case Tensor::output: return "output";
    case Tensor::part_out: return "part_out";
    case Tensor::part_max: return "part_max";
    case Tensor::part_sum: return "part_sum";
    case Tensor::state_out: return "state_out";
    case Tensor::state_lse: return "state_lse";
    case Tensor::stage_out: return "stage_out";
    case Tensor::kv_smem: return "kv_smem";
    case Tensor::workspace: return "workspace";
    case Tensor::counter: return "counter";
    case Tensor::prefix_out: return "prefix_out";
    case Tensor::prefix_lse: return "prefix_lse";
    case Tensor::suffix_out: return "suffix_out";
    case Tensor::suffix_lse: return "suffix_lse";
    case Tensor::alibi_slopes: return "alibi_slopes";
    case Tensor::kv_indptr: return "kv_indptr";
    case Tensor::kv_last_page_len: return "kv_last_page_len";
  }
  return "invalid_tensor";
}

bool is_valid(Stage s) {
  const auto v = static_cast<unsigned>(s);
  return v >= static_cast<unsigned>(Stage::q_to_smem) && v <= static_cast<unsigned>(Stage::optimized);
}
bool is_valid(Step s) { return static_cast<unsigned>(s) < static_cast<unsigned>(Step::count_); }
bool is_valid(Op o) { return static_cast<unsigned>(o) <= static_cast<unsigned>(Op::atomic); }
bool is_valid(Tensor t) { return static_cast<unsigned>(t) <= static_cast<unsigned>(Tensor::kv_last_page_len); }

const char* to_string(KernelRole k) {
  switch (k) {
    case KernelRole::main: return "main";
    case KernelRole::reduce: return "reduce";
    case KernelRole::prefix: return "prefix";
    case KernelRole::prefix_reduce: return "prefix_reduce";
    case KernelRole::suffix: return "suffix";
    case KernelRole::merge: return "merge";
    case KernelRole::count_: break;
  }
  return "invalid_kernel_role";
}

const char* to_string(Phase ph) {
  switch (ph) {
    case Phase::q_to_smem: return "q_to_smem";
    case Phase::qk: return "qk";
    case Phase::softmax: return "softmax";
    case Phase::lv: return "lv";
    case Phase::warp_reduce: return "warp_reduce";
    case Phase::partition_store: return "partition_store";
    case Phase::partition_reduce: return "partition_reduce";
    case Phase::prefix_load: return "prefix_load";
    case Phase::prefix_qk: return "prefix_qk";
    case Phase::prefix_softmax: return "prefix_softmax";
    case Phase::prefix_pv: return "prefix_pv";
    case Phase::prefix_store: return "prefix_store";
    case Phase::merge: return "merge";
    case Phase::opt_prologue: return "opt_prologue";
    case Phase::opt_q_frag: return "opt_q_frag";
    case Phase::opt_pipeline_issue: return "opt_pipeline_issue";
    case Phase::opt_pipeline_wait: return "opt_pipeline_wait";
    case Phase::opt_qk_mma: return "opt_qk_mma";
    case Phase::opt_online_softmax: return "opt_online_softmax";
    case Phase::opt_pv_mma: return "opt_pv_mma";
    case Phase::opt_warp_merge: return "opt_warp_merge";
    case Phase::opt_split_arrive: return "opt_split_arrive";
    case Phase::opt_merge_load_stats: return "opt_merge_load_stats";
    case Phase::opt_merge_weights: return "opt_merge_weights";
    case Phase::opt_merge_sum_store: return "opt_merge_sum_store";
    case Phase::opt_merge_states: return "opt_merge_states";
    case Phase::count_: break;
  }
  return "invalid_phase";
}

namespace {
template <class E>
std::optional<E> parse_enum(std::string_view name, unsigned first, unsigned last) {
  for (unsigned v = first; v <= last; ++v) {
    if (name == to_string(static_cast<E>(v))) return static_cast<E>(v);
  }
  return std::nullopt;
}
}  // namespace

std::optional<Stage> stage_from_string(std::string_view name) {
  return parse_enum<Stage>(name, 1, static_cast<unsigned>(Stage::optimized));
}
std::optional<Step> step_from_string(std::string_view name) {
  return parse_enum<Step>(name, 0, static_cast<unsigned>(Step::count_) - 1);
}
std::optional<Op> op_from_string(std::string_view name) {
  return parse_enum<Op>(name, 0, static_cast<unsigned>(Op::atomic));
}
std::optional<Tensor> tensor_from_string(std::string_view name) {
  return parse_enum<Tensor>(name, 0, static_cast<unsigned>(Tensor::kv_last_page_len));
}
std::optional<KernelRole> kernel_role_from_string(std::string_view name) {
  return parse_enum<KernelRole>(name, 0, static_cast<unsigned>(KernelRole::count_) - 1);
}
std::optional<Phase> phase_from_string(std::string_view name) {
  return parse_enum<Phase>(name, 0, static_cast<unsigned>(Phase::count_) - 1);
}

std::string describe(const Event& e) {
  std::string s;
  s.reserve(160);
  s += to_string(e.stage);
  s += '/';
  s += to_string(e.step);
  s += ' ';
  s += to_string(e.op);
  s += ' ';
  s += to_string(e.tensor);
  s += " blk(" + std::to_string(e.seq) + ',' + std::to_string(e.head) + ',' +
       std::to_string(e.partition) + ") w" + std::to_string(e.warp) + " l" +
       std::to_string(e.lane) + " it" + std::to_string(e.iter) + " ep" + std::to_string(e.epoch) +
       " #" + std::to_string(e.seq_in_thread) + " tok" + std::to_string(e.token) + " lb" +
       std::to_string(e.logical_block) + " pb" + std::to_string(e.physical_block) + " d[" +
       std::to_string(e.dim_begin) + "+" + std::to_string(e.dim_count) + "] @" +
       std::to_string(e.byte_offset) + " " + std::to_string(e.bytes) + "B";
  if (e.src_lane >= 0) s += " from l" + std::to_string(e.src_lane);
  return s;
}

}  // namespace pa::trace
