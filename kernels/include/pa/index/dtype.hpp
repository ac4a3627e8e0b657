// The element types of Q, the KV cache and the output. Storage only: every
// kernel and the reference accumulate in float (kernels) or double (reference).
// DType is Q's and the output's type, and the cache's unless KvDType says
// the cache is fp8.
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

// The KV cache's element type (vLLM's kv_cache_dtype). `same` ("auto"): K and
// V are stored in the query's DType. fp8_e4m3 / fp8_e5m2: one byte per
// element, a per-tensor scale for K and one for V, read back as
// float(code) * scale (pa/core/fp8.hpp has the formats and the conversions).
// fp8 needs fp16 or bf16 queries (ProblemSpec::validate).
enum class KvDType : std::uint8_t { same = 0, fp8_e4m3 = 1, fp8_e5m2 = 2 };

inline constexpr KvDType kAllKvDTypes[] = {KvDType::same, KvDType::fp8_e4m3, KvDType::fp8_e5m2};

PA_HD constexpr bool is_fp8(KvDType k) { return k != KvDType::same; }
// Bytes of one cache element: one for fp8, else the query dtype's.
PA_HD constexpr int kv_elem_bytes(DType q, KvDType k) { return is_fp8(k) ? 1 : dtype_bytes(q); }

inline constexpr const char* kv_dtype_name(KvDType k) {
  return k == KvDType::same ? "auto" : k == KvDType::fp8_e4m3 ? "fp8_e4m3" : "fp8_e5m2";
}
// The one parse of a KV cache dtype name: kv_dtype_name's spelling, and "fp8"
// for e4m3 (vLLM's kv_cache_dtype="fp8" means e4m3). nullopt for anything else.
inline constexpr std::optional<KvDType> kv_dtype_from_name(std::string_view s) {
  if (s == "auto") return KvDType::same;
  if (s == "fp8" || s == "fp8_e4m3") return KvDType::fp8_e4m3;
  if (s == "fp8_e5m2") return KvDType::fp8_e5m2;
  return std::nullopt;
}
inline constexpr const char* kKvDTypeNamesText = "auto (the query's dtype), fp8 (= fp8_e4m3), fp8_e4m3, fp8_e5m2";

}  // namespace pa
