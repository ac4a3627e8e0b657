// The recording tracer (trace module): a Tracer (pa/index/tracer.hpp) that
// writes the events of selected thread blocks into a device buffer.
//
// Each thread holds its own copy (kernels take the tracer by value), so
// epoch and seq_in_thread are per-thread counters with no synchronization.
// The buffer slot comes from one global atomic counter; a slot past the
// capacity is not written but still counted, so the host sees the exact
// number of events and reruns with a buffer that fits: never a silent
// truncation (trace/src/record_stage.cu).
//
// Program-order rules, the same as the host model's (trace/src/host_model_detail.hpp):
//   record(e): e.epoch = epoch, e.seq_in_thread = seq++, then stored;
//   barrier(e): record(e), then epoch += 1.
#pragma once
#include <cstdint>

#include "pa/trace/event.hpp"

namespace pa::kernels {

inline constexpr int kMaxTracedBlocks = 16;

struct TracedBlock {
  int seq, head, partition;
};

struct RecordingTracer {
  static constexpr bool kEnabled = true;

  trace::Event* events = nullptr;           // [capacity]
  unsigned long long* count = nullptr;      // events seen (may exceed capacity)
  unsigned long long capacity = 0;
  int num_blocks = 0;
  TracedBlock blocks[kMaxTracedBlocks] = {};
  // Per-thread state (each thread's copy of the kernel parameter).
  int epoch = 0;
  int seq = 0;

  __device__ bool selected() const {
    const int head = static_cast<int>(blockIdx.x), sq = static_cast<int>(blockIdx.y),
              part = static_cast<int>(blockIdx.z);
    for (int i = 0; i < num_blocks; ++i) {
      if (blocks[i].seq == sq && blocks[i].head == head && blocks[i].partition == part) return true;
    }
    return false;
  }

  __device__ void record(trace::Event e) {
    if (!selected()) return;
    e.epoch = epoch;
    e.seq_in_thread = seq++;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) events[slot] = e;
  }

  __device__ void barrier(trace::Event e) {
    record(e);
    ++epoch;
  }
};

}  // namespace pa::kernels
