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
// Where a span goes: each warp owns per_warp consecutive slots of the buffer
// (warp w of the kernel: slots slot_base + [w * per_warp, (w + 1) * per_warp);
// a second kernel of the same recording starts after the first's slots) and
// fills them in order, so writing a span needs no atomic. A shared counter with one
// atomicAdd per span serialised every warp of the GPU on one address: with 90
// thousand spans in a 45 us decode it more than doubled the kernel's time, and
// reserving 16 slots per atomic still stalled every warp 1.5-4 us at each
// 16th span, when all of them reached it together (kernels/NOTES.md, "Timing
// tracer"). The slots a warp did not fill stay as the host zeroed them
// (t_end_ns == 0, never a real %globaltimer reading) and the host drops them
// (empty_slot).
//
// The buffer is bounded: a warp with more spans than per_warp writes the
// first per_warp and raises *count to the number it wanted (atomicMax, only
// then), so the host sees exactly how many slots the busiest warp needs and
// runs again with that many (never a silent truncation).
#pragma once
#include <cstdint>

#include "pa/core/timeline.hpp"

namespace pa::kernels {

struct TimingTracer {
  static constexpr bool kEnabled = false;  // no access events
  static constexpr bool kTiming = true;

  trace::Span* spans = nullptr;         // every kernel's slots, zeroed by the host
  unsigned long long* count = nullptr;  // 0, or the most spans one warp wanted when more than per_warp
  unsigned per_warp = 0;                // slots per warp of this kernel
  unsigned long long slot_base = 0;     // this kernel's first slot
  trace::Stage stage = trace::Stage::optimized;
  trace::KernelRole kernel = trace::KernelRole::main;
  // Per-thread state (each thread's copy of the kernel parameter); only lane
  // 0's is used: the clocks at the start of the current span and the number
  // of spans this warp has ended.
  std::uint64_t t_begin = 0, clk_begin = 0;
  unsigned used = 0;

  // The tracer of another kernel of the same recording (stage 6's reduce
  // after its partition kernel, the cascade's four kernels): its slots start
  // at first_slot, per_warp of them per warp.
  __host__ __device__ TimingTracer for_kernel(trace::KernelRole role, unsigned long long first_slot,
                                              unsigned slots_per_warp) const {
    TimingTracer t = *this;
    t.kernel = role;
    t.slot_base = first_slot;
    t.per_warp = slots_per_warp;
    return t;
  }
  // The slots a kernel of `warps` warps takes: the next kernel's first slot
  // is slot_base + slots(warps).
  __host__ __device__ unsigned long long slots(unsigned long long warps) const { return warps * per_warp; }
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
  // The timed kernels' blocks are one-dimensional with a multiple of 32
  // threads (128, 384): warp w of a block is threads [32 w, 32 w + 32), and a
  // block's warps are blockDim.x / 32, as the host counts them.
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
    const unsigned i = used++;
    if (i >= per_warp) {
      atomicMax(count, static_cast<unsigned long long>(i) + 1ull);
    } else {
      const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      const unsigned long long warp = static_cast<unsigned long long>(block) * (blockDim.x / 32u) + threadIdx.x / 32u;
      trace::Span s;
      s.t_begin_ns = t_begin;
      s.t_end_ns = t_end;
      s.clk_begin = clk_begin;
      s.clk_end = clk_end;
      s.block = block;
      s.sm = static_cast<std::uint16_t>(sm_id());
      s.warp = static_cast<std::uint16_t>(threadIdx.x / 32u);
      s.stage = stage;
      s.phase = ph;
      s.kernel = kernel;
      s.reserved = 0;
      s.iter = iter;
      spans[slot_base + warp * per_warp + i] = s;
    }
    t_begin = global_ns();
    clk_begin = static_cast<std::uint64_t>(clock64());
  }
};

}  // namespace pa::kernels
