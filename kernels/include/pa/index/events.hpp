// Building trace events, shared by the kernels (device) and the host model
// (host), so that both fill the fields the same way. A hook in a kernel is one
// line:
//
//   PA_TRACE(tracer, ev(tc, Step::k_load, Op::global_load, Tensor::k_cache)
//                        .it(n).tok(token).blk(lblock, pblock).dims(d, Cfg::kVecSize)
//                        .at(byte_offset, Cfg::kVecBytes));
//
// Fields a hook does not set keep the "none" values: iter -1, token -1,
// logical/physical block -1, dim_begin -1, dim_count 0, src_lane -1,
// lane_iter -1, byte_offset -1, bytes 0, value NaN. A shuffle names its source lane with
// .src(lane ^ mask) (or the broadcasting lane); its iter is the enclosing
// loop's iteration like any other event's, so the rounds of a butterfly are
// successive instructions of one iteration, never separate iterations. epoch and seq_in_thread are the tracer's (left 0 here).
// The emission contract (who emits what, with which iter) is in
// kernels/stages/EVENTS.md and next to each hook in kernels/stages/*.cuh.
#pragma once
#include <cstdint>

#include "pa/index/hd.hpp"
#include "pa/core/event.hpp"

namespace pa {

// Who is emitting: one thread of one thread block of one stage kernel.
// stage is the stage of the kernel that runs (the v1 kernel of stage 5 emits
// its QK events with stage = warp_reduce), so a trace names its kernel.
struct TraceCtx {
  trace::Stage stage;
  int warp, lane;
  int seq, head, partition, kv_head;
};

PA_HD float trace_nan() { return __builtin_nanf(""); }

// An Event with builder-style setters (each returns *this).
struct EventBuilder {
  trace::Event e;
  PA_HD EventBuilder& it(int iter) { e.iter = iter; return *this; }
  PA_HD EventBuilder& tok(int token) { e.token = token; return *this; }
  PA_HD EventBuilder& blk(int logical, int physical) {
    e.logical_block = logical;
    e.physical_block = physical;
    return *this;
  }
  PA_HD EventBuilder& dims(int begin, int count) {
    e.dim_begin = begin;
    e.dim_count = static_cast<std::int16_t>(count);
    return *this;
  }
  PA_HD EventBuilder& at(std::int64_t byte_offset, int bytes) {
    e.byte_offset = byte_offset;
    e.bytes = bytes;
    return *this;
  }
  PA_HD EventBuilder& val(float v) { e.value = v; return *this; }
  // A shuffle's source lane: the lane whose value this lane receives.
  PA_HD EventBuilder& src(int lane) { e.src_lane = static_cast<std::int8_t>(lane); return *this; }
  // The iteration of a lane-strided loop (L = lane, lane + 32, ...) inside
  // the step's iteration: lanes run different counts of it.
  PA_HD EventBuilder& lane_it(int k) { e.lane_iter = static_cast<std::int8_t>(k); return *this; }
  PA_HD operator trace::Event() const { return e; }
};

PA_HD EventBuilder ev(const TraceCtx& c, trace::Step step, trace::Op op, trace::Tensor tensor) {
  EventBuilder b{};
  b.e.stage = c.stage;
  b.e.step = step;
  b.e.op = op;
  b.e.tensor = tensor;
  b.e.warp = static_cast<std::uint16_t>(c.warp);
  b.e.lane = static_cast<std::uint16_t>(c.lane);
  b.e.seq = c.seq;
  b.e.head = c.head;
  b.e.partition = c.partition;
  b.e.kv_head = c.kv_head;
  b.e.iter = -1;
  b.e.epoch = 0;
  b.e.seq_in_thread = 0;
  b.e.token = -1;
  b.e.logical_block = -1;
  b.e.physical_block = -1;
  b.e.dim_begin = -1;
  b.e.dim_count = 0;
  b.e.src_lane = -1;
  b.e.lane_iter = -1;
  b.e.byte_offset = -1;
  b.e.bytes = 0;
  b.e.value = trace_nan();
  return b;
}

// Block labels in Event::partition (trace/FORMAT.md). A V2 partition block
// (stage 6's partition kernel) is labelled by its partition index >= 0; the
// other kernels of stages 6 and 7 get these negative labels, so one trace can
// hold several kernels' thread blocks of the same (seq, head) and a replay
// knows each one. kernels/stages/EVENTS.md says who emits which.
inline constexpr int kReduceBlock = -1;         // stage 6 reduce kernel; in a cascade: the suffix's reduce
inline constexpr int kPrefixReduceBlock = -2;   // cascade: the reduce of the prefix's chunks / partitions
inline constexpr int kMergeBlock = -3;          // cascade: the merge kernel's threads of row (seq, head)
// Cascade prefix blocks: prefix partition (fp32) or chunk c is labelled
// kPrefixBlockBase + c (the recording tracer and the host model relabel them).
inline constexpr int kPrefixBlockBase = -(1 << 30);
PA_HD constexpr bool is_prefix_block(int label) { return label >= kPrefixBlockBase && label < kPrefixBlockBase + (1 << 29); }
// What kind of kernel a block label names (lesson markers' `block=`, the viewer).
enum class BlockRole : std::uint8_t { main, reduce, prefix_reduce, merge, prefix };
PA_HD constexpr BlockRole block_role(int label) {
  if (label >= 0) return BlockRole::main;  // the stage's own kernel (a V2 partition, a stage 8 split)
  if (label == kReduceBlock) return BlockRole::reduce;
  if (label == kPrefixReduceBlock) return BlockRole::prefix_reduce;
  if (label == kMergeBlock) return BlockRole::merge;
  return BlockRole::prefix;  // is_prefix_block(label); unknown labels are not produced
}
// Replay order of the kernels of one (seq, head): prefix blocks, prefix
// reduce, partition blocks, reduce, merge (the order of their data flow).
PA_HD constexpr long long block_replay_rank(int label) {
  if (is_prefix_block(label)) return static_cast<long long>(label - kPrefixBlockBase);
  if (label == kPrefixReduceBlock) return 1LL << 30;
  if (label >= 0) return (1LL << 31) + label;
  if (label == kReduceBlock) return 1LL << 33;
  if (label == kMergeBlock) return (1LL << 33) + 1;
  return (1LL << 34) + static_cast<long long>(-static_cast<long long>(label));  // unknown labels last
}

// The event passed to Tracer::barrier right after each __syncthreads.
PA_HD trace::Event barrier_event(const TraceCtx& c) {
  return ev(c, trace::Step::barrier, trace::Op::barrier, trace::Tensor::none);
}

}  // namespace pa
