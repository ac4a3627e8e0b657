// The recording run that record_stage (record_stage.cu) and record_optimized
// (record_optimized.cu) share: a recording tracer counts every selected event
// on the device but stores only those that fit its buffer, so a run that
// overflowed is repeated once with a buffer of exactly the counted size.
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/trace/record.hpp"

namespace pa::trace::detail {

// Runs launch(t) with t a copy of `proto` that records `blocks` into a device
// buffer of initial_capacity events, waits for the device, and copies the
// events back into res.events in replay order; when the run counted more
// events than fit, once more with room for all of them. Each run adds one to
// res.launches. Throws std::runtime_error(changed) when the second run
// overflows too. `launch` resets the outputs it writes and starts the
// kernels; Tracer: kernels::RecordingTracer or a tracer with its buffer fields
// (events, count, capacity, num_blocks, blocks).
template <class Tracer, class Launch>
void record_events(const Tracer& proto, const std::vector<BlockId>& blocks, unsigned long long initial_capacity,
                   const char* changed, RecordResult& res, Launch&& launch) {
  kernels::DeviceBuffer counter(sizeof(unsigned long long));
  unsigned long long capacity = initial_capacity;
  for (int attempt = 0; attempt < 2; ++attempt) {
    kernels::DeviceBuffer buf(capacity * sizeof(Event));
    PA_CUDA_CHECK(cudaMemset(counter.get(), 0, sizeof(unsigned long long)));
    Tracer t = proto;
    t.events = static_cast<Event*>(buf.get());
    t.count = static_cast<unsigned long long*>(counter.get());
    t.capacity = capacity;
    t.num_blocks = static_cast<int>(blocks.size());
    for (std::size_t i = 0; i < blocks.size(); ++i) t.blocks[i] = {blocks[i].seq, blocks[i].head, blocks[i].partition};
    launch(t);
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    ++res.launches;
    unsigned long long n = 0;
    PA_CUDA_CHECK(cudaMemcpy(&n, counter.get(), sizeof n, cudaMemcpyDeviceToHost));
    if (n <= capacity) {
      res.events.resize(static_cast<std::size_t>(n));
      if (n) PA_CUDA_CHECK(cudaMemcpy(res.events.data(), buf.get(), n * sizeof(Event), cudaMemcpyDeviceToHost));
      sort_replay_order(res.events);
      return;
    }
    capacity = n;  // overflow: counted exactly, rerun with a buffer that fits
  }
  throw std::runtime_error(changed);
}

}  // namespace pa::trace::detail
