// The timing tracer: a Tracer (pa/index/tracer.hpp) that measures WHEN each
// warp runs each step function, on the GPU's own clocks, instead of recording
// which bytes it touches. A kernel instantiated with it writes one Span
// (pa/core/timeline.hpp) per warp and PA_TIME_PHASE hook; every other
// instance (NullTracer, the recording tracer) compiles those hooks to nothing,
// so their machine code is unchanged.
//
// How a span is measured: lane 0 of each warp reads %globaltimer and clock64
// at PA_TIME_START and at each PA_TIME_PHASE; the span of a phase runs from
// the previous reading to this one. Writing the span happens after the end
// reading and before the next begin reading, so the tracer's own stores are
// not charged to any phase; what it still adds is the clock reads and lane 0
// falling a few instructions behind its warp (the overhead is measured against
// the untimed kernel, same GPU).
//
// Where a span goes: each warp reserves kChunk slots at a time with one
// atomicAdd on the shared counter and fills them in order. One atomic per
// span would serialise every warp of the GPU on one address (in L2, one after
// another): with 90 thousand spans in a 45 us decode that alone doubled the
// kernel's time (kernels/NOTES.md, "Timing tracer"). The slots a warp reserved
// but did not fill stay as the host zeroed them (t_end_ns == 0, never a real
// %globaltimer reading) and the host drops them (empty_slot).
//
// The buffer is bounded: a slot past the capacity is counted, not written, so
// the host sees exactly how many slots were asked for and can run again with a
// buffer that fits (never a silent truncation).
#pragma once
#include <cstdint>

#include "pa/core/timeline.hpp"

namespace pa::kernels {

struct TimingTracer {
  static constexpr bool kEnabled = false;  // no access events
  static constexpr bool kTiming = true;
  static constexpr unsigned kChunk = 16;   // slots a warp reserves at a time

  trace::Span* spans = nullptr;         // [capacity], zeroed by the host before the launch
  unsigned long long* count = nullptr;  // slots reserved, a multiple of kChunk (may exceed capacity)
  unsigned long long capacity = 0;
  trace::Stage stage = trace::Stage::optimized;
  trace::KernelRole kernel = trace::KernelRole::main;
  // Per-thread state (each thread's copy of the kernel parameter); only lane
  // 0's is used: the clocks at the start of the current span and the warp's
  // next slot (slot_next == slot_end: reserve a new chunk).
  std::uint64_t t_begin = 0, clk_begin = 0;
  unsigned long long slot_next = 0, slot_end = 0;

  // A slot no warp filled: the host drops these.
  __host__ __device__ static bool empty_slot(const trace::Span& s) { return s.t_end_ns == 0; }

  __device__ static std::uint64_t global_ns() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ static std::uint32_t sm_id() {
    std::uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
  }
  __device__ static bool lane0() { return (threadIdx.x & 31u) == 0; }

  __device__ void start() {
    if (!lane0()) return;
    t_begin = global_ns();
    clk_begin = static_cast<std::uint64_t>(clock64());
  }

  __device__ void phase(trace::Phase ph, int iter) {
    if (!lane0()) return;
    const std::uint64_t t_end = global_ns();
    const std::uint64_t clk_end = static_cast<std::uint64_t>(clock64());
    if (slot_next == slot_end) {
      slot_next = atomicAdd(count, static_cast<unsigned long long>(kChunk));
      slot_end = slot_next + kChunk;
    }
    const unsigned long long slot = slot_next++;
    if (slot < capacity) {
      trace::Span s;
      s.t_begin_ns = t_begin;
      s.t_end_ns = t_end;
      s.clk_begin = clk_begin;
      s.clk_end = clk_end;
      s.block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      s.sm = static_cast<std::uint16_t>(sm_id());
      s.warp = static_cast<std::uint16_t>(threadIdx.x / 32u);
      s.stage = stage;
      s.phase = ph;
      s.kernel = kernel;
      s.reserved = 0;
      s.iter = iter;
      spans[slot] = s;
    }
    t_begin = global_ns();
    clk_begin = static_cast<std::uint64_t>(clock64());
  }
};

}  // namespace pa::kernels
