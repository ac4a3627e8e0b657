// Host API of stage 6 (V2 split-KV decode). Plain C++
// (no CUDA headers): pointers are device pointers in the layouts of
// pa/index/layout.hpp and pa/index/cascade.hpp; `stream` is a cudaStream_t
// (nullptr = default stream). Every launch is checked; errors are
// std::invalid_argument (bad configuration, naming it and what is accepted)
// or std::runtime_error (CUDA).
#pragma once

#include "pa/kernels/v2_partition_args.hpp"

namespace pa::kernels {

// Stage 6: the partition kernel (grid head x seq x a.max_partitions) then the
// reduce kernel. a.base.partition_size must be a positive multiple of the
// block size; a.range.begin a multiple of the block size.
void launch_v2(const V2Args& a, void* stream = nullptr);

// The largest context v1 (stage 5) can take on this device (shared-memory
// logits), for choose_decode_kernel().
int max_v1_context_len(int head_size, int num_warps = 4);

}  // namespace pa::kernels
