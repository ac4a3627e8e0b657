// Host helpers of stage 7, shared by the two-level cascade (07_cascade_merge.cu,
// its pipeline 07_cascade_pipeline.cuh) and the multi-level cascade
// (07_multilevel_cascade.cu): laying buffers out in a workspace, addressing
// them by byte offset, and the SM count that chunk sizes are planned against.
// Kept in one place so that both cascades carve and address their workspaces
// the same way. Host C++ only.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "pa/kernels/cuda_check.hpp"

namespace pa::kernels::detail {

// Every buffer carved from a workspace starts on this boundary (bytes), the
// alignment cudaMalloc gives: each buffer is aligned as its own allocation would be.
inline constexpr std::size_t kAlign = 256;

// Reserves `bytes` at `cursor` and moves the cursor past them, rounded up to
// kAlign; returns the buffer's offset.
inline std::size_t carve(std::size_t& cursor, std::size_t bytes) {
  const std::size_t offset = cursor;
  cursor += (bytes + kAlign - 1) / kAlign * kAlign;
  return offset;
}

// The buffer at byte offset `off` of a workspace, as T.
template <class T>
T* at(void* base, std::size_t off) {
  return reinterpret_cast<T*>(static_cast<char*>(base) + off);
}

// The current device's SMs: a prefix is cut into enough chunks to fill them.
inline int device_sm_count() {
  int dev = 0, sms = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace pa::kernels::detail
