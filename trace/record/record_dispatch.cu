// Runtime (stage, dtype, head size, block size) -> the recording instance that
// holds it: each generated record_instances/<stage>_part<K>.cu launches entry K
// of record_configs.hpp and says whether the configuration was its own.
#include "record_dispatch.hpp"

#include "record_configs.hpp"

namespace pa::trace::detail {

#define PA_REC_PART(STAGE, K)                                                                         \
  bool record_launch_##STAGE##_part##K(DType, int, int, const kernels::StageArgs&,                   \
                                       const kernels::RecordingTracer&, cudaStream_t);
#define PA_REC_PART_V2(K)                                                                             \
  bool record_launch_v2_partition_part##K(DType, int, int, const kernels::V2Args&,                   \
                                          const kernels::RecordingTracer&, cudaStream_t);
#define PA_REC_PART_PREFIX(K)
#include "record_parts.inc"
#undef PA_REC_PART_PREFIX
#undef PA_REC_PART
#undef PA_REC_PART_V2

// trace/CMakeLists.txt makes PA_TRACE_RECORD_PARTS files per stage; the list
// in record_configs.hpp decides how many entries there are.
static_assert(kNumRecordConfigs == PA_TRACE_RECORD_PARTS,
              "trace/CMakeLists.txt's part count differs from record_configs.hpp's list: update "
              "PA_TRACE_RECORD_PARTS there");
static_assert(kNumAllStageRecordConfigs == PA_TRACE_RECORD_ALL_STAGE_PARTS,
              "trace/CMakeLists.txt's count of entries recorded for stages 1-4 differs from "
              "record_configs.hpp's kNumAllStageRecordConfigs: update PA_TRACE_RECORD_ALL_STAGE_PARTS there");

bool record_launch_stage(Stage stage, DType dtype, int head_size, int block_size, const kernels::StageArgs& a,
                         const kernels::RecordingTracer& t, cudaStream_t s) {
#define PA_REC_PART(STAGE, K) \
  if (stage == Stage::STAGE && record_launch_##STAGE##_part##K(dtype, head_size, block_size, a, t, s)) return true;
#define PA_REC_PART_V2(K)
#define PA_REC_PART_PREFIX(K)
#include "record_parts.inc"
#undef PA_REC_PART_PREFIX
#undef PA_REC_PART
#undef PA_REC_PART_V2
  return false;
}

bool record_launch_v2(DType dtype, int head_size, int block_size, const kernels::V2Args& a,
                      const kernels::RecordingTracer& t, cudaStream_t s) {
#define PA_REC_PART(STAGE, K)
#define PA_REC_PART_V2(K) \
  if (record_launch_v2_partition_part##K(dtype, head_size, block_size, a, t, s)) return true;
#define PA_REC_PART_PREFIX(K)
#include "record_parts.inc"
#undef PA_REC_PART_PREFIX
#undef PA_REC_PART
#undef PA_REC_PART_V2
  return false;
}

}  // namespace pa::trace::detail
