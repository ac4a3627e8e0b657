// Run-time access to the compile-time kernel configurations on the host:
// with_kernel_config() calls a generic lambda with the KernelConfig instance
// that matches a problem, so host code (reference, host model) uses the very
// same constants and ThreadMapping functions as the kernels instead of a
// second copy of their formulas. RuntimeConfig is a plain-value snapshot of a
// KernelConfig's constants, for printing and for the viewer.
#pragma once
#include <iterator>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "pa/index/config.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/core/problem.hpp"

namespace pa {

struct RuntimeConfig {
  DType dtype = DType::f16;
  KvDType kv_dtype = KvDType::same;
  int kv_elem_bytes = 0, q_vec_bytes = 0;
  int elem_bytes = 0, head_size = 0, block_size = 0, num_threads = 0, num_warps = 0;
  int x = 0, thread_group_size = 0, num_thread_groups = 0, thread_groups_per_warp = 0;
  int vec_size = 0, vec_bytes = 0, num_elems_per_thread = 0, num_vecs_per_thread = 0;
  int v_vec_size = 0, v_vec_bytes = 0, num_v_vecs_per_row = 0, num_rows_per_iter = 0,
      num_rows_per_thread = 0;
  // Token rows (nhd, hnd: stage 5's token-row mapping, config.hpp); the lv_
  // counts are 0 for vLLM's layout.
  bool token_rows = false;
  int lv_lanes_per_token = 0, lv_tokens_per_iter = 0, lv_token_steps = 0;
};

template <class Cfg>
constexpr RuntimeConfig runtime_config_of() {
  return {Cfg::kDType,           Cfg::kKvDType,         Cfg::kKvBytes,           Cfg::kQVecBytes,
          Cfg::kElemBytes,       Cfg::kHeadSize,          Cfg::kBlockSize,
          Cfg::kNumThreads,      Cfg::kNumWarps,        Cfg::kX,                 Cfg::kThreadGroupSize,
          Cfg::kNumThreadGroups, Cfg::kThreadGroupsPerWarp, Cfg::kVecSize,       Cfg::kVecBytes,
          Cfg::kNumElemsPerThread, Cfg::kNumVecsPerThread, Cfg::kVVecSize,       Cfg::kVVecBytes,
          Cfg::kNumVVecsPerRow,  Cfg::kNumRowsPerIter,  Cfg::kNumRowsPerThread,
          Cfg::kTokenRows,       Cfg::kLvLanesPerToken, Cfg::kLvTokensPerIter,  Cfg::kLvTokenSteps};
}

// "supported: fp32 fp16 bf16 x head sizes {...} x block sizes {...} x threads {...}"
std::string supported_configs_text();
// The registry's lists for help texts and messages, as the problem's own
// errors give them: "{64, 80, 96, 112, 128, 192, 256}", "{8, 16, 32}",
// "{128}" (pa/index/config.hpp is the one source).
std::string head_sizes_text();
std::string block_sizes_text();
std::string thread_counts_text();

namespace detail {
template <DType DT, KvDType KV, bool ROWS, int H, int B, class F, std::size_t... I>
bool dispatch_threads(int threads, F& f, std::index_sequence<I...>) {
  return ((threads == kSupportedThreadCounts[I]
               ? (f(KernelConfig<DT, H, B, kSupportedThreadCounts[I], KV, ROWS>{}), true)
               : false) || ...);
}
template <DType DT, KvDType KV, bool ROWS, int H, class F, std::size_t... I>
bool dispatch_block(int block, int threads, F& f, std::index_sequence<I...>) {
  return ((block == kSupportedBlockSizes[I]
               ? dispatch_threads<DT, KV, ROWS, H, kSupportedBlockSizes[I]>(
                     threads, f, std::make_index_sequence<std::size(kSupportedThreadCounts)>{})
               : false) || ...);
}
template <DType DT, KvDType KV, bool ROWS, class F, std::size_t... I>
bool dispatch_head(int head, int block, int threads, F& f, std::index_sequence<I...>) {
  return ((head == kSupportedHeadSizes[I]
               ? dispatch_block<DT, KV, ROWS, kSupportedHeadSizes[I]>(
                     block, threads, f, std::make_index_sequence<std::size(kSupportedBlockSizes)>{})
               : false) || ...);
}
// The (dtype, cache dtype) pairs that have kernel configurations: calls
// next.template operator()<DT, KV>() for the pair (dtype, kv); false when it
// has none. ROWS: the token-row configurations (nhd, hnd), which exist for
// 2-byte caches only (KernelConfig's TOKEN_ROWS).
template <bool ROWS, class Next>
bool dispatch_dtype_kv(DType dtype, KvDType kv, Next&& next) {
  auto with_kv = [&]<DType DT>() -> bool {
    if constexpr (ROWS && DT == DType::f32) {
      return false;
    } else if constexpr (ROWS || DT == DType::f32) {
      return kv == KvDType::same && next.template operator()<DT, KvDType::same>();
    } else {
      switch (kv) {
        case KvDType::same: return next.template operator()<DT, KvDType::same>();
        case KvDType::fp8_e4m3: return next.template operator()<DT, KvDType::fp8_e4m3>();
        case KvDType::fp8_e5m2: return next.template operator()<DT, KvDType::fp8_e5m2>();
      }
      return false;
    }
  };
  switch (dtype) {
    case DType::f32: return with_kv.template operator()<DType::f32>();
    case DType::f16: return with_kv.template operator()<DType::f16>();
    case DType::bf16: return with_kv.template operator()<DType::bf16>();
  }
  return false;
}
// Every axis: (dtype, kv), then head, block and threads.
template <bool ROWS, class F>
bool dispatch_config(DType dtype, KvDType kv, int head_size, int block_size, int num_threads, F& f) {
  return dispatch_dtype_kv<ROWS>(dtype, kv, [&]<DType DT, KvDType KV>() {
    return dispatch_head<DT, KV, ROWS>(head_size, block_size, num_threads, f,
                                       std::make_index_sequence<std::size(kSupportedHeadSizes)>{});
  });
}
// The head size fixed at H: (dtype, kv), then block and threads.
template <int H, bool ROWS, class F>
bool dispatch_config_of_head(DType dtype, KvDType kv, int block_size, int num_threads, F& f) {
  return dispatch_dtype_kv<ROWS>(dtype, kv, [&]<DType DT, KvDType KV>() {
    return dispatch_block<DT, KV, ROWS, H>(block_size, num_threads, f,
                                           std::make_index_sequence<std::size(kSupportedBlockSizes)>{});
  });
}
[[noreturn]] void throw_unsupported_config(DType dtype, KvDType kv, int head_size, int block_size, int num_threads,
                                           bool token_rows);
}  // namespace detail

// Calls f(KernelConfig<dtype, head, block, threads, kv>{}) (f returns void;
// capture results by reference). Throws std::invalid_argument naming the
// configuration and listing what is supported.
template <class F>
void with_kernel_config(DType dtype, KvDType kv, int head_size, int block_size, int num_threads, F&& f) {
  if (!detail::dispatch_config<false>(dtype, kv, head_size, block_size, num_threads, f))
    detail::throw_unsupported_config(dtype, kv, head_size, block_size, num_threads, false);
}
template <class F>
void with_kernel_config(DType dtype, int head_size, int block_size, int num_threads, F&& f) {
  with_kernel_config(dtype, KvDType::same, head_size, block_size, num_threads, std::forward<F>(f));
}
// The configuration of vLLM's layout (stages 1-4 and 6-7 read no other; the
// warp-to-block assignment and Q's slots of the reference need no more).
template <class F>
void with_kernel_config(const ProblemSpec& spec, F&& f) {
  with_kernel_config(spec.dtype, spec.kv_dtype, spec.head_size, spec.block_size, spec.num_threads,
                     std::forward<F>(f));
}
// With token_rows, the token-row configuration (TOKEN_ROWS) stage 5 runs for
// nhd and hnd, else vLLM's. Instantiates both, so only the host code that
// follows stage 5 on every layout calls it.
template <class F>
void with_kernel_config(DType dtype, KvDType kv, int head_size, int block_size, int num_threads, bool token_rows,
                        F&& f) {
  const bool ok = token_rows ? detail::dispatch_config<true>(dtype, kv, head_size, block_size, num_threads, f)
                             : detail::dispatch_config<false>(dtype, kv, head_size, block_size, num_threads, f);
  if (!ok) detail::throw_unsupported_config(dtype, kv, head_size, block_size, num_threads, token_rows);
}
// The configuration stage 5 runs for the spec's layout (the one above).
template <class F>
void with_layout_kernel_config(const ProblemSpec& spec, F&& f) {
  with_kernel_config(spec.dtype, spec.kv_dtype, spec.head_size, spec.block_size, spec.num_threads,
                     kv_layout_token_rows(spec.kv_layout), std::forward<F>(f));
}

// The two dispatches split at the head size, so that code with many
// instances per configuration can spread them over translation units, one
// per head size: with_head_size calls f(std::integral_constant<int, H>{}) for
// the supported head size H == head_size (false: none is); inside,
// with_kernel_config_of_head<H> (token_rows: the TOKEN_ROWS configuration,
// as with_layout_kernel_config picks) dispatches the rest. Throws like
// with_kernel_config.
template <class F>
bool with_head_size(int head_size, F&& f) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return ((head_size == kSupportedHeadSizes[I]
                 ? (f(std::integral_constant<int, kSupportedHeadSizes[I]>{}), true)
                 : false) || ...);
  }(std::make_index_sequence<std::size(kSupportedHeadSizes)>{});
}
template <int H, class F>
void with_kernel_config_of_head(const ProblemSpec& spec, bool token_rows, F&& f) {
  const bool ok = token_rows ? detail::dispatch_config_of_head<H, true>(spec.dtype, spec.kv_dtype, spec.block_size,
                                                                        spec.num_threads, f)
                             : detail::dispatch_config_of_head<H, false>(spec.dtype, spec.kv_dtype, spec.block_size,
                                                                         spec.num_threads, f);
  if (!ok || spec.head_size != H)
    detail::throw_unsupported_config(spec.dtype, spec.kv_dtype, spec.head_size, spec.block_size, spec.num_threads,
                                     token_rows);
}

RuntimeConfig make_runtime_config(DType dtype, int head_size, int block_size, int num_threads,
                                  KvDType kv = KvDType::same, bool token_rows = false);
// The spec's configuration in its layout (with_layout_kernel_config's).
RuntimeConfig make_runtime_config(const ProblemSpec& spec);

}  // namespace pa
