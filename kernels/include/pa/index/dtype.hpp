// The element types of Q, the KV cache and the output. Storage only: every
// kernel and the reference accumulate in float (kernels) or double (reference).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "pa/index/hd.hpp"

namespace pa {

enum class DType : std::uint8_t { f32 = 0, f16 = 1, bf16 = 2 };

PA_HD constexpr int dtype_bytes(DType t) { return t == DType::f32 ? 4 : 2; }

inline constexpr const char* dtype_name(DType t) {
  return t == DType::f32 ? "fp32" : t == DType::f16 ? "fp16" : "bf16";
}

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16};

// The one parse of a dtype name: dtype_name's spelling (fp32, fp16, bf16) and
// the aliases f32 / float, f16 / half. Every command-line flag goes through
// it; nullopt for anything else (the caller names its flag in the error).
inline constexpr std::optional<DType> dtype_from_name(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float") return DType::f32;
  if (s == "fp16" || s == "f16" || s == "half") return DType::f16;
  if (s == "bf16") return DType::bf16;
  return std::nullopt;
}
// What dtype_from_name accepts, for error messages.
inline constexpr const char* kDTypeNamesText = "fp32, fp16, bf16";

}  // namespace pa
