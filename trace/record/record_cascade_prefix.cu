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
#include "pa/kernels/v2_cascade.hpp"
#include "pa/kernels/v2_cascade_instances.hpp"
#include "pa/core/paged_cache.hpp"

namespace pa::trace::detail {

// Writes the prefix chunks' partitions (part_out/max/sum) into the cascade's
// workspace `ws` as launch_cascade would; false when the configuration is not
// built (PA_V2C_FOR_EACH_HEAD_BLOCK) or the dtype has no prefix kernel (fp32).
bool record_cascade_prefix(const PagedProblem& p, const kernels::StageArgs& b, const kernels::CascadePlan& plan,
                           void* ws, const kernels::RecordingTracer& t) {
  (void)p;
  if (!plan.tensor_cores || plan.prefix_len == 0) return false;
  kernels::PrefixArgs pa;
  pa.q = b.q;
  pa.k_cache = b.k_cache;
  pa.v_cache = b.v_cache;
  pa.prefix_blocks = b.block_tables + b.btg.offset(0, 0);
  pa.qg = b.qg;
  pa.cg = b.cg;
  pa.num_seqs = b.num_seqs;
  pa.num_heads = b.num_heads;
  pa.num_kv_heads = b.num_kv_heads;
  pa.prefix_len = plan.prefix_len;
  pa.chunk_len = plan.chunk_len;
  pa.scale = b.scale;
  char* w = static_cast<char*>(ws);
  pa.part_out = reinterpret_cast<float*>(w + plan.prefix_part_out);
  pa.part_max = reinterpret_cast<float*>(w + plan.prefix_part_max);
  pa.part_sum = reinterpret_cast<float*>(w + plan.prefix_part_sum);
  pa.pg = PartitionGeometry{b.num_heads, plan.prefix_partitions, b.head_size};
  kernels::RecordingTracer tp = t;
  tp.partition_base = kPrefixBlockBase;
  constexpr int V = kCascadeTracePrefixVariant;
  bool ok = false;
#define PA_X(H, B)                                                                                          \
  if (!ok && b.head_size == H && b.block_size == B) {                                                      \
    if (b.dtype == DType::f16)                                                                             \
      kernels::launch_cascade_prefix<KernelConfig<DType::f16, H, B, 128>, V, kernels::RecordingTracer>(pa, nullptr, tp); \
    else                                                                                                   \
      kernels::launch_cascade_prefix<KernelConfig<DType::bf16, H, B, 128>, V, kernels::RecordingTracer>(pa, nullptr, tp); \
    ok = true;                                                                                             \
  }
  PA_V2C_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return ok;
}

}  // namespace pa::trace::detail
