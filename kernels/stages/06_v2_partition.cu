// Host side of stage 6: the launch's argument checks and the dtype dispatch
// to the instance files (06_v2_partition_<dtype>[_<cache dtype>].cu), which launch the
// partition kernel and then the reduce kernel (06_v2_partition.cuh).
#include <cuda_runtime.h>

#include <string>

#include "host_checks.hpp"
#include "pa/kernels/v2_partition.hpp"

namespace pa::kernels::detail {
bool launch_v2_f32_same(int, int, const V2Args&, cudaStream_t);
bool launch_v2_f16_same(int, int, const V2Args&, cudaStream_t);
bool launch_v2_bf16_same(int, int, const V2Args&, cudaStream_t);
bool launch_v2_f16_fp8_e4m3(int, int, const V2Args&, cudaStream_t);
bool launch_v2_f16_fp8_e5m2(int, int, const V2Args&, cudaStream_t);
bool launch_v2_bf16_fp8_e4m3(int, int, const V2Args&, cudaStream_t);
bool launch_v2_bf16_fp8_e5m2(int, int, const V2Args&, cudaStream_t);
}  // namespace pa::kernels::detail

namespace pa::kernels {

using detail::bad;

void launch_v2(const V2Args& a, void* stream) {
  const StageArgs& b = a.base;
  detail::check_base(b);
  if (b.partition_size <= 0 || b.partition_size % b.block_size != 0)
    bad("v2_partition: partition size " + std::to_string(b.partition_size) +
        " must be a positive multiple of the block size " + std::to_string(b.block_size));
  if (a.range.begin < 0 || a.range.begin % b.block_size != 0)
    bad("v2_partition: range begin " + std::to_string(a.range.begin) +
        " must be >= 0 and a multiple of the block size " + std::to_string(b.block_size));
  if (const std::string why = cache_geometry_refusal(b); !why.empty()) bad("v2_partition: " + why);
  if (a.max_partitions < 1 || a.max_partitions > 65535)
    bad("v2_partition: max_partitions " + std::to_string(a.max_partitions) + " must be in [1, 65535]");
  if (a.pg.max_partitions < a.max_partitions)
    bad("v2_partition: partition buffers hold " + std::to_string(a.pg.max_partitions) +
        " partitions, the launch needs " + std::to_string(a.max_partitions));
  const auto s = static_cast<cudaStream_t>(stream);
  using Fn = bool (*)(int, int, const V2Args&, cudaStream_t);
  struct Inst {
    DType dtype;
    KvDType kv;
    Fn fn;
  };
  static constexpr Inst kInsts[] = {
      {DType::f32, KvDType::same, &detail::launch_v2_f32_same},
      {DType::f16, KvDType::same, &detail::launch_v2_f16_same},
      {DType::bf16, KvDType::same, &detail::launch_v2_bf16_same},
      {DType::f16, KvDType::fp8_e4m3, &detail::launch_v2_f16_fp8_e4m3},
      {DType::f16, KvDType::fp8_e5m2, &detail::launch_v2_f16_fp8_e5m2},
      {DType::bf16, KvDType::fp8_e4m3, &detail::launch_v2_bf16_fp8_e4m3},
      {DType::bf16, KvDType::fp8_e5m2, &detail::launch_v2_bf16_fp8_e5m2},
  };
  bool ok = false;
  for (const Inst& i : kInsts)
    if (i.dtype == b.dtype && i.kv == b.kv_dtype) ok = i.fn(b.head_size, b.block_size, a, s);
  if (!ok) bad("v2_partition: configuration " + detail::config_text(b) + " is not built (PA_V2_FOR_EACH_HEAD_BLOCK)");
}

}  // namespace pa::kernels
