// The element types of Q, the KV cache and the output. Storage only: every
// kernel and the reference accumulate in float (kernels) or double (reference).
#pragma once
#include <cstdint>

#include "pa/index/hd.hpp"

namespace pa {

enum class DType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2 };

PA_HD constexpr int dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

inline constexpr const char* dtype_name(DType t) {
  return t == DType::f32 ? "fp32" : t == DType::f16 ? "fp16" : "bf16";
}

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16};

}  // namespace pa
