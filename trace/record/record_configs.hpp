// The (dtype, head size, block size) configurations that get a recording
// instance (X-macro shared by the instance files and the dispatcher). A subset
// of the kernels' list keeps the build fast; it covers each dtype, each block
// size and small, odd and large head sizes.
//
// Stages 5-7 record every entry; stages 1-4 only the first
// kNumAllStageRecordConfigs (each dtype and each block size, heads 64, 96
// and 128): their kernels run the first steps of stage 5's, which records the
// rest, and recording all four on every entry was a quarter of the full
// build's compile time. The costly corner stays out altogether: fp32 with
// block 32 gives every thread a whole head of K (thread group 1, 64 vectors
// per token at head 256), and its recording instances took over 4 minutes
// each to compile (fp32 head 256 records with block 8 instead).
#pragma once

// PA_QUICK_KERNELS builds keep 3 configurations, unless PA_TRACE_FULL_RECORD
// (CMake option PA_TRACE_FULL_RECORDING) asks for the whole list anyway.
// trace/CMakeLists.txt's PA_TRACE_RECORD_PARTS and PA_TRACE_RECORD_ALL_STAGE_PARTS
// must match the two counts (record_dispatch.cu checks).
// Entries: (dtype, head size, block size, KV cache dtype); the fp8 caches
// with each format and each 16-bit dtype once.
#if defined(PA_QUICK_KERNELS) && PA_QUICK_KERNELS && !(defined(PA_TRACE_FULL_RECORD) && PA_TRACE_FULL_RECORD)
#define PA_TRACE_FOR_EACH_CONFIG(X)                                                                   \
  X(f16, 128, 16, same) X(bf16, 128, 16, same) X(f32, 128, 16, same) X(f16, 128, 16, fp8_e4m3)      \
  X(bf16, 128, 16, fp8_e5m2)
#define PA_TRACE_ALL_STAGE_CONFIGS 5
#else
#define PA_TRACE_FOR_EACH_CONFIG(X)                                                                   \
  X(f16, 128, 16, same) X(bf16, 128, 16, same) X(f32, 128, 16, same) X(f16, 128, 16, fp8_e4m3)      \
  X(bf16, 128, 16, fp8_e5m2) X(f16, 128, 8, same) X(f16, 96, 32, same) X(f32, 64, 8, same)          \
  X(f16, 128, 32, same) X(f16, 64, 16, same) X(f16, 256, 16, same) X(f16, 80, 8, same)              \
  X(f16, 112, 16, same) X(f16, 192, 32, same) X(bf16, 64, 8, same) X(bf16, 96, 32, same)            \
  X(f32, 256, 8, same) X(f32, 80, 16, same) X(bf16, 64, 8, fp8_e4m3) X(f16, 256, 32, fp8_e5m2)
#define PA_TRACE_ALL_STAGE_CONFIGS 8
#endif

#include "pa/core/event.hpp"
#include "pa/index/dtype.hpp"

namespace pa::trace::detail {

// The same list as values. The build compiles one file per (stage, entry)
// (trace/CMakeLists.txt: record_instances/<stage>_part<K>.cu instantiates entry
// K), so the heavy recording instances compile in parallel; record_dispatch.cu
// checks that the build made one part per entry.
struct RecordConfig {
  DType dtype;
  int head_size;
  int block_size;
  KvDType kv_dtype;
};
inline constexpr RecordConfig kRecordConfigs[] = {
#define PA_X(DT, H, B, KV) RecordConfig{DType::DT, H, B, KvDType::KV},
    PA_TRACE_FOR_EACH_CONFIG(PA_X)
#undef PA_X
};
inline constexpr int kNumRecordConfigs = static_cast<int>(sizeof(kRecordConfigs) / sizeof(kRecordConfigs[0]));
// Entries [0, kNumAllStageRecordConfigs) are recorded for stages 1-4 too.
inline constexpr int kNumAllStageRecordConfigs = PA_TRACE_ALL_STAGE_CONFIGS;

// Stage 5 also records its token-row instance (nhd, hnd: KernelConfig's
// TOKEN_ROWS) for the entries of the first kNumAllStageRecordConfigs with a
// 2-byte cache: each 16-bit dtype and each block size, at no cost to the
// other stages.
constexpr bool record_token_rows(Stage stage, int entry) {
  const RecordConfig& c = kRecordConfigs[entry];
  return stage == Stage::warp_reduce && entry < kNumAllStageRecordConfigs && c.kv_dtype == KvDType::same &&
         c.dtype != DType::f32;
}

}  // namespace pa::trace::detail

