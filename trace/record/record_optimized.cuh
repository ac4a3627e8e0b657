// Recording stage 8 (trace/record/record_optimized.cu): the tracer and the
// configurations that get a recording instance.
//
// OptRecordingTracer is the recording tracer of kernels/include/pa/kernels/
// recording_tracer.cuh with stage 8's CTA naming: the grid is (split, unit,
// seq) and a CTA is selected as BlockId{seq, head = the unit's first query
// head, partition = split} (trace/include/pa/trace/host_model.hpp).
#pragma once
#include <cuda_runtime.h>

#include "08_optimized.cuh"
#include "pa/kernels/recording_tracer.cuh"

namespace pa::trace::detail {

struct OptRecordingTracer {
  static constexpr bool kEnabled = true;

  Event* events = nullptr;
  unsigned long long* count = nullptr;
  unsigned long long capacity = 0;
  int num_blocks = 0;
  kernels::TracedBlock blocks[kernels::kMaxTracedBlocks] = {};
  int group = 1, head_chunks = 1;
  int epoch = 0;
  int seq = 0;

  __device__ bool selected() const {
    const int split = static_cast<int>(blockIdx.x), unit = static_cast<int>(blockIdx.y),
              sq = static_cast<int>(blockIdx.z);
    const int head0 = opt_unit_first_head(unit, head_chunks, group);
    for (int i = 0; i < num_blocks; ++i) {
      if (blocks[i].seq == sq && blocks[i].head == head0 && blocks[i].partition == split) return true;
    }
    return false;
  }
  // Not inlined: the kernel's fully unrolled loops hold hundreds of hooks,
  // and one call each keeps the recording instances quick to compile.
  __device__ __noinline__ void record(Event e) {
    if (!selected()) return;
    e.epoch = epoch;
    e.seq_in_thread = seq++;
    const unsigned long long slot = atomicAdd(count, 1ull);
    if (slot < capacity) events[slot] = e;
  }
  __device__ void barrier(Event e) {
    record(e);
    ++epoch;
  }
};

// Launch of one recording instance: returns false when (dtype, head, block,
// head tiles) has none. prepare: sets the shared-memory limit and returns the
// instance's resident CTAs per SM.
struct OptRecordFns {
  int (*prepare)();
  void (*launch)(const opt::OptParams&, dim3, const OptRecordingTracer&, cudaStream_t);
};
bool opt_record_fns(DType dt, KvDType kv, bool token_rows, int head_size, int block_size, int head_tiles,
                    OptRecordFns& f);

// The recording instances (a subset keeps the build short; the host model
// covers every configuration). X(dtype, head size, block size, head tiles,
// KV cache dtype, cache kind: vllm or rows, the token-row instance that
// serves nhd and hnd); trace/CMakeLists.txt generates one file per entry.
#define PA_TRACE_OPT_CONFIGS(X)                                                                                    \
  X(f16, 128, 16, 1, same, vllm) X(bf16, 128, 16, 2, same, vllm) X(f16, 64, 8, 1, same, vllm)                      \
  X(bf16, 256, 32, 1, same, vllm) X(f16, 256, 16, 2, same, vllm) X(bf16, 64, 32, 1, same, vllm)                    \
  X(f16, 128, 16, 1, fp8_e4m3, vllm) X(bf16, 128, 16, 2, fp8_e5m2, vllm) X(f16, 128, 16, 1, same, rows)            \
  X(bf16, 64, 32, 2, same, rows)

}  // namespace pa::trace::detail
