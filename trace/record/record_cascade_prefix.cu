// Recording cascade_prefix_kernel (stage 7's tensor-core prefix kernel) with
// the recording tracer: variant kCascadeTracePrefixVariant over the cascade's
// chunks, as the host model (trace/src/host_model_cascade_prefix.cpp) runs it.
// Its blocks' events are labelled partition = chunk by the kernel and
// relabelled kPrefixBlockBase + chunk here (the tracer's partition_base).
// Called by record_cascade_launch (record_cascade.cu) in place of the
// untraced prefix launch.
#include <cuda_runtime.h>

#include "07_cascade_merge.cuh"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/kernels/cascade.hpp"
#include "pa/core/paged_cache.hpp"

namespace pa::trace::detail {

// One per entry of record_configs.hpp (generated: record_prefix_instances.cu.in).
#define PA_REC_PART(STAGE, K)
#define PA_REC_PART_V2(K)
#define PA_REC_PART_PREFIX(K)                                                                       \
  bool record_launch_cascade_prefix_part##K(DType, int, int, const kernels::PrefixArgs&,          \
                                            const kernels::RecordingTracer&);
#include "record_parts.inc"
#undef PA_REC_PART
#undef PA_REC_PART_V2
#undef PA_REC_PART_PREFIX

// Writes the prefix chunks' partitions (part_out/max/sum) into the cascade's
// workspace `ws` as launch_cascade would; false when the configuration has no
// recording instance (record_configs.hpp) or the dtype no prefix kernel (fp32).
bool record_cascade_prefix(const PagedProblem& p, const kernels::StageArgs& b, const kernels::CascadePlan& plan,
                           void* ws, const kernels::RecordingTracer& t) {
  (void)p;
  if (!plan.tensor_cores || plan.prefix_len == 0) return false;
  const kernels::PrefixArgs pa = kernels::prefix_args(b, plan, ws);
  kernels::RecordingTracer tp = t;
  tp.partition_base = kPrefixBlockBase;
  bool ok = false;
#define PA_REC_PART(STAGE, K)
#define PA_REC_PART_V2(K)
#define PA_REC_PART_PREFIX(K) \
  ok = ok || record_launch_cascade_prefix_part##K(b.dtype, b.head_size, b.block_size, pa, tp);
#include "record_parts.inc"
#undef PA_REC_PART
#undef PA_REC_PART_V2
#undef PA_REC_PART_PREFIX
  return ok;
}

}  // namespace pa::trace::detail
