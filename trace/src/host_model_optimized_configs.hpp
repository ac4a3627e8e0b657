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
      if (ht == 1) f(OptConfig<DT, HS, BS, 1, 0, 0, KV>{});
      else f(OptConfig<DT, HS, BS, 2, 0, 0, KV>{});
      return true;
    } else {
      if (rows && ht == 1) f(OptConfig<DT, HS, BS, 1, 0, 0, KV, true>{});
      else if (rows) f(OptConfig<DT, HS, BS, 2, 0, 0, KV, true>{});
      else if (ht == 1) f(OptConfig<DT, HS, BS, 1, 0, 0, KV>{});
      else f(OptConfig<DT, HS, BS, 2, 0, 0, KV>{});
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
// The (dtype, cache dtype) pairs stage 8 has (16-bit queries, every cache
// dtype): calls next.template operator()<DT, KV>(); false when none fits.
template <class Next>
bool opt_dispatch_dtype_kv(DType dtype, KvDType kv, Next&& next) {
  auto with_kv = [&]<DType DT>() -> bool {
    switch (kv) {
      case KvDType::same: return next.template operator()<DT, KvDType::same>();
      case KvDType::fp8_e4m3: return next.template operator()<DT, KvDType::fp8_e4m3>();
      case KvDType::fp8_e5m2: return next.template operator()<DT, KvDType::fp8_e5m2>();
    }
    return false;
  };
  if (dtype == DType::f16) return with_kv.template operator()<DType::f16>();
  if (dtype == DType::bf16) return with_kv.template operator()<DType::bf16>();
  return false;
}

[[noreturn]] inline void throw_no_opt_model(const ProblemSpec& s) {
  throw std::invalid_argument(std::string("stage optimized: no model for dtype ") + dtype_name(s.dtype) +
                              ", kv cache " + kv_dtype_name(s.kv_dtype) + " in layout " + kv_layout_name(s.kv_layout) +
                              ", head size " + std::to_string(s.head_size) + ", block size " +
                              std::to_string(s.block_size) + " (accepted: fp16 or bf16, head sizes " +
                              head_sizes_text() + ", block sizes " + block_sizes_text() +
                              "; with an fp8 cache block sizes 16 and 32)");
}

// Calls f(OptConfig<...>{}) for the spec's configuration with head_tiles
// query-head tiles; throws naming what is accepted when there is none.
template <class F>
void with_opt_config(const ProblemSpec& s, int head_tiles, F&& f) {
  const bool rows = kv_layout_token_rows(s.kv_layout);
  const bool ok = opt_dispatch_dtype_kv(s.dtype, s.kv_dtype, [&]<DType DT, KvDType KV>() {
    bool found = false;
    with_head_size(s.head_size, [&](auto h) {
      found = opt_dispatch_bs<DT, KV, decltype(h)::value>(s.block_size, head_tiles, rows, f);
    });
    return found;
  });
  if (!ok) throw_no_opt_model(s);
}

// with_opt_config for one head size (a per-head translation unit's instances).
template <int HS, class F>
void with_opt_config_of_head(const ProblemSpec& s, int head_tiles, F&& f) {
  if (s.head_size != HS)
    throw std::logic_error("stage optimized model: head size " + std::to_string(s.head_size) +
                           " reached the instances of head size " + std::to_string(HS));
  const bool rows = kv_layout_token_rows(s.kv_layout);
  if (!opt_dispatch_dtype_kv(s.dtype, s.kv_dtype, [&]<DType DT, KvDType KV>() {
        return opt_dispatch_bs<DT, KV, HS>(s.block_size, head_tiles, rows, f);
      }))
    throw_no_opt_model(s);
}

}  // namespace pa::trace::detail
