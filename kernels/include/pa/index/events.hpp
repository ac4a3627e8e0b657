// Building trace events, shared by the kernels (device) and the host model
// (host), so that both fill the fields the same way. A hook in a kernel is one
// line:
//
//   PA_TRACE(tracer, ev(tc, Step::k_load, Op::global_load, Tensor::k_cache)
//                        .it(n).tok(token).blk(lblock, pblock).dims(d, Cfg::kVecSize)
//                        .at(byte_offset, Cfg::kVecBytes));
//
// Fields a hook does not set keep the "none" values: iter -1, token -1,
// logical/physical block -1, dim_begin -1, dim_count 0, byte_offset -1,
// bytes 0, value NaN. epoch and seq_in_thread are the tracer's (left 0 here).
// The emission contract (who emits what, with which iter) is in
// kernels/stages/EVENTS.md and next to each hook in kernels/stages/*.cuh.
#pragma once
#include <cstdint>

#include "pa/index/hd.hpp"
#include "pa/trace/event.hpp"

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
    e.dim_count = count;
    return *this;
  }
  PA_HD EventBuilder& at(std::int64_t byte_offset, int bytes) {
    e.byte_offset = byte_offset;
    e.bytes = bytes;
    return *this;
  }
  PA_HD EventBuilder& val(float v) { e.value = v; return *this; }
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
  b.e.byte_offset = -1;
  b.e.bytes = 0;
  b.e.value = trace_nan();
  return b;
}

// The event passed to Tracer::barrier right after each __syncthreads.
PA_HD trace::Event barrier_event(const TraceCtx& c) {
  return ev(c, trace::Step::barrier, trace::Op::barrier, trace::Tensor::none);
}

}  // namespace pa
