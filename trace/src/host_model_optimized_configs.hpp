// Stage 8's host model: the runtime (dtype, cache dtype, head size, block
// size, head tiles, layout) -> OptConfig dispatch, for the plan
// (host_model_optimized.cpp) and the model's instances
// (host_model_optimized.hpp). Apart from the model so that the plan's
// translation unit does not see, and instantiate, the model itself.
#pragma once
#include <stdexcept>
#include <string>
#include <type_traits>

#include "pa/core/config_dispatch.hpp"
#include "pa/core/problem.hpp"
#include "pa/index/optimized.hpp"

namespace pa::trace::detail {

// Runtime (dtype, cache dtype, head size, block size, head tiles) -> OptConfig.
template <DType DT, KvDType KV, int HS, class F>
bool opt_dispatch_bs(int bs, int ht, bool rows, F&& f) {
  auto go = [&](auto cfg_bs) {
    constexpr int BS = decltype(cfg_bs)::value;
    if constexpr (!opt_block_size_ok(BS, kv_elem_bytes(DT, KV))) {
      return false;  // stage 8 is not built for it (opt_block_size_ok says why)
    } else if constexpr (is_fp8(KV)) {
      if (rows) return false;  // token rows: 16-bit caches only
      if (ht == 1) f(OptConfig<DT, HS, BS, 1, 4, 0, KV>{});
      else f(OptConfig<DT, HS, BS, 2, 4, 0, KV>{});
      return true;
    } else {
      if (rows && ht == 1) f(OptConfig<DT, HS, BS, 1, 4, 0, KV, true>{});
      else if (rows) f(OptConfig<DT, HS, BS, 2, 4, 0, KV, true>{});
      else if (ht == 1) f(OptConfig<DT, HS, BS, 1, 4, 0, KV>{});
      else f(OptConfig<DT, HS, BS, 2, 4, 0, KV>{});
      return true;
    }
  };
  switch (bs) {
    case 8: return go(std::integral_constant<int, 8>{});
    case 16: return go(std::integral_constant<int, 16>{});
    case 32: return go(std::integral_constant<int, 32>{});
    default: return false;
  }
}
template <DType DT, KvDType KV, class F>
bool opt_dispatch_hs(int hs, int bs, int ht, bool rows, F&& f) {
  switch (hs) {
    case 64: return opt_dispatch_bs<DT, KV, 64>(bs, ht, rows, f);
    case 80: return opt_dispatch_bs<DT, KV, 80>(bs, ht, rows, f);
    case 96: return opt_dispatch_bs<DT, KV, 96>(bs, ht, rows, f);
    case 112: return opt_dispatch_bs<DT, KV, 112>(bs, ht, rows, f);
    case 128: return opt_dispatch_bs<DT, KV, 128>(bs, ht, rows, f);
    case 192: return opt_dispatch_bs<DT, KV, 192>(bs, ht, rows, f);
    case 256: return opt_dispatch_bs<DT, KV, 256>(bs, ht, rows, f);
    default: return false;
  }
}
template <DType DT, class F>
bool opt_dispatch_kv(KvDType kv, int hs, int bs, int ht, bool rows, F&& f) {
  switch (kv) {
    case KvDType::same: return opt_dispatch_hs<DT, KvDType::same>(hs, bs, ht, rows, f);
    case KvDType::fp8_e4m3: return opt_dispatch_hs<DT, KvDType::fp8_e4m3>(hs, bs, ht, rows, f);
    case KvDType::fp8_e5m2: return opt_dispatch_hs<DT, KvDType::fp8_e5m2>(hs, bs, ht, rows, f);
  }
  return false;
}
template <class F>
void with_opt_config(const ProblemSpec& s, int head_tiles, F&& f) {
  bool ok = false;
  const bool rows = kv_layout_token_rows(s.kv_layout);
  if (s.dtype == DType::f16) ok = opt_dispatch_kv<DType::f16>(s.kv_dtype, s.head_size, s.block_size, head_tiles, rows, f);
  if (s.dtype == DType::bf16) ok = opt_dispatch_kv<DType::bf16>(s.kv_dtype, s.head_size, s.block_size, head_tiles, rows, f);
  if (!ok) {
    throw std::invalid_argument(std::string("stage optimized: no model for dtype ") + dtype_name(s.dtype) +
                                ", kv cache " + kv_dtype_name(s.kv_dtype) + " in layout " +
                                kv_layout_name(s.kv_layout) + ", head size " +
                                std::to_string(s.head_size) + ", block size " + std::to_string(s.block_size) +
                                " (accepted: fp16 or bf16, head sizes " + head_sizes_text() + ", block sizes " +
                                block_sizes_text() + "; with an fp8 cache block sizes 16 and 32)");
  }
}

}  // namespace pa::trace::detail
