// One timeline span: when one warp ran one step function (a Phase) of a
// stage, measured on the GPU. Plain data, written by the timing tracer (pa/kernels/timing_tracer.cuh)
// on the GPU, read by the timeline file, the Perfetto export and the viewer.
//
// Two clocks, because neither alone answers every question: %globaltimer is
// one nanosecond clock for the whole GPU (spans of different SMs and of
// different kernels line up on it), but it may advance in steps coarser than
// a short step; clock64 counts the SM's cycles exactly but each SM has its
// own (compare clk_* only between spans of the same SM).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "pa/core/event.hpp"

namespace pa::trace {

// Which kernel of a stage a span belongs to: a stage may launch several
// (stage 6: the partition kernel and the reduce; the cascade: the prefix
// kernel, its chunk reduce, the suffix decode and the merge).
enum class KernelRole : std::uint8_t { main, reduce, prefix, prefix_reduce, suffix, merge, count_ };

// What a span times: one named step function of a stage's file (the unit a
// lesson points at), coarser than an event's Step, which names one access.
// Appended only, like Step: the values are part of the file format.
enum class Phase : std::uint8_t {
  // The v1 kernel (stages 1-5) and stage 6's partition and reduce kernels:
  // each stage's own step.
  q_to_smem, qk, softmax, lv, warp_reduce, partition_store, partition_reduce,
  // Stage 7: the prefix kernel's steps and the merge kernel.
  prefix_load, prefix_qk, prefix_softmax, prefix_pv, prefix_store, merge,
  // Stage 8's steps, in the order the kernel runs them; pipeline_wait is the
  // time a warp waits for its oldest cp.async step to land.
  opt_prologue, opt_q_frag, opt_pipeline_issue, opt_pipeline_wait, opt_qk_mma, opt_online_softmax, opt_pv_mma,
  opt_warp_merge, opt_split_arrive,
  // The split merge of earlier kernels in three steps (statistics into shared
  // memory, the weights, the weighted sum): only in files recorded before it
  // became one step, opt_merge_states.
  opt_merge_load_stats, opt_merge_weights, opt_merge_sum_store,
  opt_merge_states,
  count_
};

struct Span {
  std::uint64_t t_begin_ns;  // %globaltimer when the warp began the step
  std::uint64_t t_end_ns;    // %globaltimer when it ended it
  std::uint64_t clk_begin;   // clock64 of the SM at the same two moments
  std::uint64_t clk_end;
  std::uint32_t block;       // linear block index: x + gridDim.x * (y + gridDim.y * z)
  std::uint16_t sm;          // %smid of the SM the block ran on
  std::uint16_t warp;        // warp index in the block
  Stage stage;
  Phase phase;
  KernelRole kernel;
  std::uint8_t reserved;     // 0; keeps the layout explicit
  std::int32_t iter;         // the phase's loop iteration in this warp, -1 for a phase run once
};
static_assert(sizeof(Span) == 48, "Span is part of the timeline file format: change the version if it changes");
static_assert(alignof(Span) == 8);

const char* to_string(KernelRole);
std::optional<KernelRole> kernel_role_from_string(std::string_view);
const char* to_string(Phase);
std::optional<Phase> phase_from_string(std::string_view);

}  // namespace pa::trace
