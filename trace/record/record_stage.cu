// record_stage: runs a stage 1-5 kernel instantiated with the recording
// tracer and returns the selected blocks' events in replay order.
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>
#include <string>

#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/kernels/runner.hpp"
#include "pa/kernels/v2_partition_args.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"
#include "record_configs.hpp"
#include "record_dispatch.hpp"
#include "record_events.cuh"

namespace pa::trace {
namespace detail {
bool record_cascade_launch(const PagedProblem&, const kernels::StageArgs&, const kernels::RecordingTracer&);

}  // namespace detail

bool recording_built() { return true; }

namespace detail {
bool can_record_optimized(const ProblemSpec& s);  // record_optimized.cu
std::string recordable_optimized_text();
}  // namespace detail

bool can_record(Stage stage, const ProblemSpec& spec) {
  if (stage == Stage::optimized) return detail::can_record_optimized(spec);
  const int s = static_cast<int>(stage);
  if (s < 1 || s > 7 || spec.num_threads != 128) return false;
  if (stage == Stage::cascade_merge && is_fp8(spec.kv_dtype)) return false;  // the cascade takes no fp8 cache
  if (!kv_cache_refusal(spec, stage).empty()) return false;  // the forms the stage reads (stage_reads)
  // Stages 1-4 record the first kNumAllStageRecordConfigs entries only;
  // stage 5's token-row layouts the entries record_token_rows names.
  const int entries = s <= 4 ? detail::kNumAllStageRecordConfigs : detail::kNumRecordConfigs;
  const bool rows = kv_layout_token_rows(spec.kv_layout);
  bool listed = false;
  for (int i = 0; i < entries; ++i) {
    const detail::RecordConfig& c = detail::kRecordConfigs[i];
    listed = listed || (c.dtype == spec.dtype && c.head_size == spec.head_size && c.block_size == spec.block_size &&
                        c.kv_dtype == spec.kv_dtype && (!rows || detail::record_token_rows(stage, i)));
  }
  if (!listed) return false;
  // The inputs go up through kernels::DeviceProblem, which accepts only the
  // configurations pa_kernels holds (PA_QUICK_KERNELS builds: head 128 x block 16).
  const kernels::KernelKey key{spec.dtype, spec.head_size, spec.block_size, spec.num_threads, spec.kv_dtype};
  for (const auto& k : kernels::built_configs()) {
    if (k == key) return true;
  }
  return false;
}

std::string recordable_configs_text() {
  auto list = [](int from, int to) {
    std::string l;
    for (int i = from; i < to; ++i) {
      const detail::RecordConfig& c = detail::kRecordConfigs[i];
      l += std::string(" ") + dtype_name(c.dtype) + "/" + std::to_string(c.head_size) + "/" +
           std::to_string(c.block_size) + (is_fp8(c.kv_dtype) ? std::string("/") + kv_dtype_name(c.kv_dtype) : "");
    }
    return l;
  };
  std::string s = "stages q_to_smem, qk, softmax, lv, warp_reduce, v2_partition, cascade_merge (its tensor-core prefix "
                  "kernel as mma.sync variant 1) in the configurations (dtype/head/block[/fp8 cache])" +
                  list(0, detail::kNumAllStageRecordConfigs);
  if (detail::kNumAllStageRecordConfigs < detail::kNumRecordConfigs)
    s += "; warp_reduce, v2_partition and cascade_merge also in" +
         list(detail::kNumAllStageRecordConfigs, detail::kNumRecordConfigs);
  std::string rows;
  for (int i = 0; i < detail::kNumRecordConfigs; ++i)
    if (detail::record_token_rows(Stage::warp_reduce, i)) rows += list(i, i + 1);
  s += "; warp_reduce on layouts nhd and hnd in" + rows;
  return s + "; " + detail::recordable_optimized_text();
}

RecordResult record_stage(Stage stage, const PagedProblem& p, const Selection& sel,
                          unsigned long long initial_capacity) {
  if (stage == Stage::optimized) return record_optimized(p, sel, 0, initial_capacity);
  if (const std::string why = kv_cache_refusal(p.spec, stage); !why.empty())
    throw std::invalid_argument("record_stage: " + why);
  if (!can_record(stage, p.spec)) {
    throw std::invalid_argument(std::string("record_stage: no recording instance for stage ") + to_string(stage) +
                                " with " + dtype_name(p.spec.dtype) + " head " + std::to_string(p.spec.head_size) +
                                " block " + std::to_string(p.spec.block_size) + " (recordable: " +
                                recordable_configs_text() + "); the host model covers every configuration");
  }
  // By label: stage 6 adds the reduce blocks, stage 7 the cascade's other kernels (host_model.hpp).
  const std::vector<BlockId> blocks = traced_blocks(p.spec, stage, resolve_selection(p.spec, stage, sel));
  if (blocks.size() > static_cast<std::size_t>(kernels::kMaxTracedBlocks)) {
    throw std::invalid_argument("record_stage: " + std::to_string(blocks.size()) +
                                " selected blocks (accepted: at most " +
                                std::to_string(kernels::kMaxTracedBlocks) + ")");
  }
  RecordResult res;
  res.gpu_name = kernels::gpu_info().name;  // throws NoGpuError without a GPU

  // The arguments pa-lab run launches with (kernels::StageRunner: stage 6 over
  // the whole context, out and lse written, single-partition sequences direct),
  // here for the recording instances.
  kernels::StageRunner runner(p, stage);
  const kernels::StageArgs& args = runner.stage_args();
  // One run: the outputs poisoned, then the stage's kernels with the recording tracer t.
  const auto launch = [&](const kernels::RecordingTracer& t) {
    runner.poison_outputs();
    bool launched = false;
    if (stage == Stage::cascade_merge) {
      launched = detail::record_cascade_launch(p, args, t);  // record_cascade.cu: the cascade's kernels, traced
    } else if (stage == Stage::v2_partition) {
      launched = detail::record_launch_v2(p.spec.dtype, p.spec.head_size, p.spec.block_size, runner.v2_args(), t,
                                          nullptr);
    } else {
      launched =
          detail::record_launch_stage(stage, p.spec.dtype, p.spec.head_size, p.spec.block_size, args, t, nullptr);
    }
    if (!launched) throw std::logic_error("record_stage: can_record and the instance list disagree");
  };
  detail::record_events(kernels::RecordingTracer{}, blocks, initial_capacity,
                        "record_stage: the event count changed between two runs of the same stage", res, launch);
  return res;
}

}  // namespace pa::trace
