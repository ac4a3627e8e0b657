// Launching a stage 1-6 kernel built with the recording tracer
// (record_dispatch.cu). Each returns false when the configuration has no
// recording instance (record_configs.hpp).
#pragma once
#include <cuda_runtime.h>

#include "pa/index/dtype.hpp"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/kernels/stage_args.hpp"
#include "pa/kernels/v2_partition_args.hpp"
#include "pa/core/event.hpp"

namespace pa::trace::detail {

// Stages 1-5 (q_to_smem .. warp_reduce).
bool record_launch_stage(Stage stage, DType dtype, int head_size, int block_size, const kernels::StageArgs& a,
                         const kernels::RecordingTracer& t, cudaStream_t s);
// Stage 6: the V2 partition kernel and its reduce.
bool record_launch_v2(DType dtype, int head_size, int block_size, const kernels::V2Args& a,
                      const kernels::RecordingTracer& t, cudaStream_t s);

}  // namespace pa::trace::detail
