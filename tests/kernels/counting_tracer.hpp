// Host side of counting_tracer.cu (plain C++).
#pragma once
#include <vector>

#include "pa/kernels/stage_args.hpp"
#include "pa/core/event.hpp"

namespace pa::test {
inline constexpr int kOps = 7, kTensors = 17;
inline constexpr int kEventSlots = static_cast<int>(trace::Step::count_) * kOps * kTensors;
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int event_slot(int step, int op, int tensor) { return (step * kOps + op) * kTensors + tensor; }

// Event counts of one launch of the stage's fp16 / head 128 / block 16 kernel.
std::vector<unsigned long long> count_events_f16_128_16(trace::Stage stage, const kernels::StageArgs& a);
}  // namespace pa::test
