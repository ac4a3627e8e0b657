// Host side of stage 7: argument validation, dtype dispatch to the prefix
// kernel's instance files (07_cascade_prefix_<dtype>.cu, the wgmma kernel's
// 07_cascade_prefix_wgmma.cu), the merge launch and the cascade pipeline
// (pa/kernels/cascade.hpp). Stage 6's launch is in 06_v2_partition.cu.
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "07_cascade_host.cuh"
#include "07_cascade_merge.cuh"
#include "07_cascade_pipeline.cuh"
#include "host_checks.hpp"
#include "pa/kernels/cascade.hpp"

namespace pa::kernels::detail {
bool launch_cascade_prefix_f16(int, int, int, const PrefixArgs&, cudaStream_t);
bool launch_cascade_prefix_bf16(int, int, int, const PrefixArgs&, cudaStream_t);
#if PA_CASCADE_WGMMA
bool launch_cascade_prefix_wgmma_any(DType, int, int, const PrefixArgs&, cudaStream_t);
bool cascade_wgmma_built(int, int);
#endif
}  // namespace pa::kernels::detail

namespace pa::kernels {
namespace {

using detail::bad;
using detail::carve;
using detail::check_base;
using detail::config_text;

// The defaults are the fastest of what was measured on an H100 (kernels/NOTES.md,
// "cascade changes", each with its figures). The prefix kernel: variant 8
// (wgmma, a producer warpgroup, P V during the softmax) is the fastest where
// wgmma runs; elsewhere variant 3 (mma.sync, 8 warps, 64-token tiles) beat
// variants 0-2, since every K/V tile feeds 128 query rows.
constexpr PrefixKernel kDefaultPrefix = PrefixKernel::wgmma;  // where usable, else mma_8warps
// Suffix kernel (V2, stage 8, stage 8 with the lean pipeline) and stream
// mode: stage 8 lean was the fastest suffix measured.
// Placing the prefix first on a high-priority stream (streams 2)
// pays only when a suffix CTA fits beside a prefix block; with variant 8 the
// registers are full, so a plain side stream (streams 1) is the better one.
constexpr CascadeOptions::Suffix kDefaultSuffix = CascadeOptions::Suffix::optimized_lean;
constexpr int kDefaultStreamsLean = 2, kDefaultStreams = 1;

// The wgmma prefix kernel runs where it was built (sm_90a objects, prefix_wgmma_head_ok heads)
// and the device is compute 9.0 (sm_90a code runs on nothing else).
bool wgmma_usable(const StageArgs& b) {
#if PA_CASCADE_WGMMA
  if (b.dtype == DType::f32 || !detail::cascade_wgmma_built(b.head_size, b.block_size)) return false;
  int dev = 0, major = 0, minor = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  return major == 9 && minor == 0;
#else
  (void)b;
  return false;
#endif
}

}  // namespace

void launch_merge_states(const MergeArgs& m, void* stream) {
  if (m.head_size % 4 != 0) bad("merge: head size " + std::to_string(m.head_size) + " must be a multiple of 4");
  if (m.a_out == nullptr || m.a_lse == nullptr || m.b_out == nullptr || m.b_lse == nullptr || m.out == nullptr)
    bad("merge: null state pointer (a_out, a_lse, b_out, b_lse, out are required)");
  const auto s = static_cast<cudaStream_t>(stream);
  switch (m.out_dtype) {
    case DType::f32: launch_merge_kernel<float>(m, s); break;
    case DType::f16: launch_merge_kernel<__half>(m, s); break;
    case DType::bf16: launch_merge_kernel<__nv_bfloat16>(m, s); break;
  }
}

namespace detail {
PrefixKernel resolve_prefix_kernel(const StageArgs& b, PrefixKernel asked) {
  const PrefixKernel k = asked == PrefixKernel::automatic ? kDefaultPrefix : asked;
  return k == PrefixKernel::wgmma && !wgmma_usable(b) ? PrefixKernel::mma_8warps : k;
}

void launch_prefix_kernel(const StageArgs& b, PrefixKernel kernel, const PrefixArgs& pa, cudaStream_t s) {
  const int v = static_cast<int>(kernel);
  bool ok = false;
#if PA_CASCADE_WGMMA
  if (kernel == PrefixKernel::wgmma)
    ok = launch_cascade_prefix_wgmma_any(b.dtype, b.head_size, b.block_size, pa, s);
  else
#endif
    ok = b.dtype == DType::f16 ? launch_cascade_prefix_f16(b.head_size, b.block_size, v, pa, s)
                               : launch_cascade_prefix_bf16(b.head_size, b.block_size, v, pa, s);
  if (!ok) bad("cascade: configuration " + config_text(b) + " is not built (PA_V2_FOR_EACH_HEAD_BLOCK)");
}

// sm_share: the SMs the span's chunks are sized to fill, its share of the GPU
// when several spans run at once (0: every SM of the device).
int prefix_chunk_len(const StageArgs& b, PrefixKernel kernel, int prefix_len, int query_tiles, int sm_share,
                     int forced_chunks) {
  const int variant = static_cast<int>(kernel);
  const int tile = prefix_variant_tile_tokens(variant, b.head_size, b.block_size);
  const int ctas_per_chunk = b.num_kv_heads * query_tiles;
  if (forced_chunks > 0) return ceil_div(ceil_div(prefix_len, forced_chunks), tile) * tile;
  const int sms = sm_share > 0 ? sm_share : device_sm_count();
  if (const int per_sm = prefix_blocks_per_sm(variant, b.head_size); per_sm > 0)
    return cascade_chunk_len_one_wave(prefix_len, tile, ctas_per_chunk, per_sm * sms);
  return cascade_chunk_len(prefix_len, prefix_tile_tokens(b.head_size, b.block_size), ctas_per_chunk, sms);
}
}  // namespace detail

CascadePlan plan_cascade(const StageArgs& b, int prefix_len, int chunk_len, const CascadeOptions& opt) {
  check_base(b);
  if (is_fp8(b.kv_dtype))
    bad(std::string("cascade: a ") + kv_dtype_name(b.kv_dtype) +
        " KV cache is not supported by stage 7's prefix kernels (accepted: kv dtype auto, a cache in the query's "
        "dtype); stages 1-6 and 8 take fp8 caches");
  if (prefix_len < 0 || prefix_len % b.block_size != 0 || prefix_len > b.max_context_len)
    bad("cascade: prefix length " + std::to_string(prefix_len) + " must be >= 0, a multiple of the block size " +
        std::to_string(b.block_size) + " and <= every context length");
  if (b.partition_size <= 0 || b.partition_size % b.block_size != 0)
    bad("cascade: partition size " + std::to_string(b.partition_size) +
        " must be a positive multiple of the block size " + std::to_string(b.block_size));
  if (chunk_len < 0 || chunk_len % b.block_size != 0)
    bad("cascade: chunk length " + std::to_string(chunk_len) + " must be 0 (auto) or a multiple of the block size");
  CascadePlan p;
  p.prefix_len = prefix_len;
  p.partition_size = b.partition_size;
  p.tensor_cores = b.dtype != DType::f32;
  if (opt.streams < -1 || opt.streams > 2)
    bad("cascade: streams " + std::to_string(opt.streams) + " (accepted: -1 automatic, 0, 1, 2)");
  if (opt.chunks < 0) bad("cascade: chunks " + std::to_string(opt.chunks) + " (accepted: 0 automatic or > 0)");
  // The prefix kernel: wgmma only where it runs, else its mma.sync form.
  p.prefix_kernel = detail::resolve_prefix_kernel(b, opt.prefix);
  const int variant = static_cast<int>(p.prefix_kernel);
  const int ratio = b.num_heads / b.num_kv_heads;
  p.query_tiles = prefix_query_tiles(b.num_seqs, ratio, prefix_rows_per_block(variant, b.head_size));
  if (prefix_len > 0) {
    if (p.tensor_cores) {
      p.chunk_len = chunk_len > 0 ? chunk_len
                                  : detail::prefix_chunk_len(b, p.prefix_kernel, prefix_len, p.query_tiles, 0, opt.chunks);
      p.num_chunks = ceil_div(prefix_len, p.chunk_len);
      p.prefix_partitions = p.num_chunks;
    } else {
      p.prefix_partitions = num_partitions(prefix_len, b.partition_size);
    }
  }
  p.suffix_partitions = std::max(1, num_partitions(std::max(1, b.max_context_len - prefix_len), b.partition_size));
  // Suffix kernel: stage 8 where it is built for the configuration (fp16/bf16),
  // else V2; lean falls back to stage 8's full pipeline where it is not built
  // (heads other than 128, GQA groups of more than 8 heads, fp8 caches,
  // layouts other than vLLM's: plan_optimized).
  const CascadeOptions::Suffix suffix = opt.suffix == CascadeOptions::Suffix::automatic ? kDefaultSuffix : opt.suffix;
  if (suffix != CascadeOptions::Suffix::v2 && prefix_len > 0 &&
      optimized_supported(b.dtype, b.head_size, b.block_size)) {
    p.suffix_opt = plan_optimized(optimized_args(b, prefix_len), 0,
                                  suffix == CascadeOptions::Suffix::optimized_lean ? OptPipeline::lean
                                                                                   : OptPipeline::automatic);
    p.suffix = CascadePlan::Suffix::optimized;
  }
  // Placing the prefix first pays only when a lean suffix CTA fits beside a
  // prefix block, which the wgmma kernel's full register file rules out.
  p.streams = opt.streams >= 0 ? opt.streams
              : p.suffix == CascadePlan::Suffix::optimized && p.suffix_opt.pipeline == OptPipeline::lean &&
                      p.prefix_kernel != PrefixKernel::wgmma
                  ? kDefaultStreamsLean
                  : kDefaultStreams;

  const std::size_t rows = static_cast<std::size_t>(b.num_seqs) * b.num_heads;
  const std::size_t hs = b.head_size;
  const std::size_t pp = std::max(1, p.prefix_partitions), sp = p.suffix_partitions;
  std::size_t cur = 0;
  p.prefix_part_out = carve(cur, rows * pp * hs * 4);
  p.prefix_part_max = carve(cur, rows * pp * 4);
  p.prefix_part_sum = carve(cur, rows * pp * 4);
  p.suffix_part_out = carve(cur, rows * sp * hs * 4);
  p.suffix_part_max = carve(cur, rows * sp * 4);
  p.suffix_part_sum = carve(cur, rows * sp * 4);
  p.prefix_state_out = carve(cur, rows * hs * 4);
  p.prefix_state_lse = carve(cur, rows * 4);
  p.suffix_state_out = carve(cur, rows * hs * 4);
  p.suffix_state_lse = carve(cur, rows * 4);
  if (p.suffix != CascadePlan::Suffix::v2) p.suffix_opt_ws = carve(cur, p.suffix_opt.workspace_bytes);
  p.workspace_bytes = cur;
  return p;
}

namespace {
// The normal kernels of each part of the pipeline (07_cascade_pipeline.cuh).
struct Launchers {
  void prefix(const StageArgs& b, const CascadePlan& p, const PrefixArgs& pa, cudaStream_t s) {
    detail::launch_prefix_kernel(b, p.prefix_kernel, pa, s);
  }
  void prefix_reduce(const V2Args& pre, cudaStream_t s) {
    if (pre.base.dtype == DType::f16) launch_v2_reduce<__half>(pre, s);
    else launch_v2_reduce<__nv_bfloat16>(pre, s);
  }
  void suffix(const OptimizedArgs& o, const OptimizedPlan& plan, void* ws, cudaStream_t s) {
    launch_optimized(o, plan, ws, s);
  }
  void v2(const V2Args& a, cudaStream_t s) { launch_v2(a, s); }
  void merge(const MergeArgs& m, cudaStream_t s) { launch_merge_states(m, s); }
};
}  // namespace

CascadeStates launch_cascade(const StageArgs& b, const CascadePlan& p, void* ws, float* lse_out, void* stream,
                             CascadeParts parts) {
  Launchers launchers;
  return cascade_pipeline::run(b, p, ws, lse_out, stream, parts, launchers);
}

int max_v1_context_len(int head_size, int num_warps) {
  int dev = 0, optin = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  // Static part: q_vecs + reduction scratch (at most 2 bytes x head for 16-bit, 4 for fp32).
  const std::int64_t static_bytes = v1_static_smem_bytes(head_size, 4, num_warps);
  return static_cast<int>((optin - static_bytes) / 4);
}

}  // namespace pa::kernels
