// The recording run that record_stage (record_stage.cu) and record_optimized
// (record_optimized.cu) share: a tracer counts every event on the device but
// stores only those that fit its buffer, so a run that overflowed is repeated
// once with a buffer of exactly the counted size. (A timeline gives each warp
// its own slots instead, so that timing needs no shared counter:
// timing_tracer.cuh, timeline_record.cu.)
#pragma once
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "pa/kernels/api.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/trace/record.hpp"

namespace pa::trace::detail {

// The rerun rule of every recording: launch(items, count, capacity) runs the
// traced kernels into a device buffer of `capacity` items, the tracer
// counting every item at *count but storing only those that fit; after the
// device is done the items come back, and when more were counted than fit,
// everything runs once more with room for exactly the counted number. Each run
// adds one to `launches`. Throws std::runtime_error(changed) when the second
// run overflows too.
template <class Item, class Launch>
std::vector<Item> collect_counted(unsigned long long capacity, int& launches, const char* changed, Launch&& launch) {
  kernels::DeviceBuffer counter(sizeof(unsigned long long));
  for (int attempt = 0; attempt < 2; ++attempt) {
    kernels::DeviceBuffer buf(capacity * sizeof(Item));
    PA_CUDA_CHECK(cudaMemset(counter.get(), 0, sizeof(unsigned long long)));
    launch(static_cast<Item*>(buf.get()), static_cast<unsigned long long*>(counter.get()), capacity);
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    ++launches;
    unsigned long long n = 0;
    PA_CUDA_CHECK(cudaMemcpy(&n, counter.get(), sizeof n, cudaMemcpyDeviceToHost));
    if (n <= capacity) {
      std::vector<Item> items(static_cast<std::size_t>(n));
      if (n) PA_CUDA_CHECK(cudaMemcpy(items.data(), buf.get(), n * sizeof(Item), cudaMemcpyDeviceToHost));
      return items;
    }
    capacity = n;  // overflow: counted exactly, rerun with a buffer that fits
  }
  throw std::runtime_error(changed);
}

// Runs launch(t) with t a copy of `proto` that records `blocks` (collect_counted's
// rule: initial_capacity events, once more with room for all of them after an
// overflow) and puts the events into res.events in replay order, counting the
// runs in res.launches. `launch` resets the outputs it writes and starts the
// kernels; Tracer: kernels::RecordingTracer or a tracer with its buffer fields
// (events, count, capacity, num_blocks, blocks).
template <class Tracer, class Launch>
void record_events(const Tracer& proto, const std::vector<BlockId>& blocks, unsigned long long initial_capacity,
                   const char* changed, RecordResult& res, Launch&& launch) {
  res.events = collect_counted<Event>(initial_capacity, res.launches, changed,
                                      [&](Event* events, unsigned long long* count, unsigned long long capacity) {
                                        Tracer t = proto;
                                        t.events = events;
                                        t.count = count;
                                        t.capacity = capacity;
                                        t.num_blocks = static_cast<int>(blocks.size());
                                        for (std::size_t i = 0; i < blocks.size(); ++i)
                                          t.blocks[i] = {blocks[i].seq, blocks[i].head, blocks[i].partition};
                                        launch(t);
                                      });
  sort_replay_order(res.events);
}

}  // namespace pa::trace::detail
