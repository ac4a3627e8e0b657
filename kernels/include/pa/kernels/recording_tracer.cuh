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

#include "pa/index/events.hpp"
#include "pa/core/event.hpp"

namespace pa::kernels {

// Blocks a recording can select: a stage 6 selection of (seq, head, p) traces
// the partition block p and the reduce block; a cascade one up to 5 blocks.
inline constexpr int kMaxTracedBlocks = 64;

// A traced block by its labels: (seq, head) and the block label of
// Event::partition (a partition index >= 0, or kReduceBlock, kMergeBlock, ...:
// pa/index/events.hpp).
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
  // Relabelling for kernels that run in several roles (the cascade runs stage
  // 6's kernels for its prefix and its suffix): a partition label p >= 0
  // becomes partition_base + p, kReduceBlock becomes reduce_label, and the
  // state tensors are renamed. The defaults change nothing.
  int partition_base = 0;
  int reduce_label = kReduceBlock;
  trace::Tensor state_out_as = trace::Tensor::state_out;
  trace::Tensor state_lse_as = trace::Tensor::state_lse;
  // Per-thread state (each thread's copy of the kernel parameter).
  int epoch = 0;
  int seq = 0;

  // Selection by the event's own labels, not blockIdx: the reduce kernel's
  // block (head, seq) carries the label kReduceBlock, a merge thread the row it
  // merges (its grid is 1-D and grid-stride).
  __device__ bool selected(const trace::Event& e) const {
    for (int i = 0; i < num_blocks; ++i) {
      if (blocks[i].seq == e.seq && blocks[i].head == e.head && blocks[i].partition == e.partition) return true;
    }
    return false;
  }

  __device__ void record(trace::Event e) {
    if (e.partition >= 0) e.partition += partition_base;
    else if (e.partition == kReduceBlock) e.partition = reduce_label;
    if (e.tensor == trace::Tensor::state_out) e.tensor = state_out_as;
    else if (e.tensor == trace::Tensor::state_lse) e.tensor = state_lse_as;
    if (!selected(e)) return;
    e.epoch = epoch;
    e.seq_in_thread = seq++;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) events[slot] = e;
  }

  // A barrier is passed by every thread of the block, selected or not: the
  // epoch advances either way (an unselected thread records nothing anyway).
  __device__ void barrier(trace::Event e) {
    record(e);
    ++epoch;
  }
};

}  // namespace pa::kernels
