// The cascade prefix kernel's timing instances (wgmma, sm_90a only: built
// like kernels/stages/07_cascade_prefix_wgmma.cu, see trace/CMakeLists.txt):
// fp16 and bf16, head 128, block 16, the timeline's configuration.
#include <cuda_runtime.h>

#include "07_cascade_prefix_wgmma.cuh"
#include "pa/kernels/timing_tracer.cuh"
#include "timeline_cascade.hpp"

namespace pa::trace::detail {

bool timed_prefix_wgmma_built(DType dtype, int head_size, int block_size) {
  return (dtype == DType::f16 || dtype == DType::bf16) && head_size == 128 && block_size == 16;
}

namespace {
template <class Cfg>
PrefixShape shape_of(const kernels::PrefixArgs& a) {
  using Tl = kernels::WgmmaPrefixTiling<Cfg>;
  const dim3 g = kernels::WgmmaBlock<Tl>::grid(a);
  return {g.x * g.y * g.z * ((Tl::kNumThreads + kernels::kWgProducerThreads) / kWarpSize),
          static_cast<unsigned>(Tl::kTileTokens)};
}
}  // namespace

PrefixShape timed_prefix_wgmma_shape(DType dtype, int head_size, int block_size, const kernels::PrefixArgs& a) {
  if (!timed_prefix_wgmma_built(dtype, head_size, block_size)) return {};
  return dtype == DType::f16 ? shape_of<KernelConfig<DType::f16, 128, 16, 128>>(a)
                             : shape_of<KernelConfig<DType::bf16, 128, 16, 128>>(a);
}

unsigned launch_timed_prefix_wgmma(DType dtype, int head_size, int block_size, const kernels::PrefixArgs& a,
                                   const kernels::TimingTracer& t, cudaStream_t s) {
  if (!timed_prefix_wgmma_built(dtype, head_size, block_size)) return 0;
  if (dtype == DType::f16)
    return kernels::launch_cascade_prefix_wgmma<KernelConfig<DType::f16, 128, 16, 128>>(a, s, t);
  return kernels::launch_cascade_prefix_wgmma<KernelConfig<DType::bf16, 128, 16, 128>>(a, s, t);
}

}  // namespace pa::trace::detail
