// Conversions between float and the 16-bit storage types (IEEE binary16 and
// bfloat16), written out bit by bit so the host never depends on a compiler's
// _Float16 or on the CUDA headers. Both directions are exact where the value
// is representable; float -> 16 bit rounds to nearest, ties to even, exactly
// like __float2half_rn / __float2bfloat16_rn, so the bytes the reference
// uploads are the bytes a kernel would have produced from the same floats.
//
// Special values: NaN stays NaN (quiet, sign and top payload bits kept),
// +-Inf stays +-Inf, values past the largest finite 16-bit value round to
// +-Inf (f16: |x| >= 65520), tiny values round to subnormals or to signed zero.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pa/index/dtype.hpp"

namespace pa {

std::uint16_t f16_bits_from_float(float f);
float float_from_f16_bits(std::uint16_t h);

std::uint16_t bf16_bits_from_float(float f);
float float_from_bf16_bits(std::uint16_t b);

// The float that a value becomes after a round trip through `t` storage
// (identity for f32).
float round_to_dtype(float f, DType t);

// Encode n floats into n * dtype_bytes(t) bytes (host byte order, the layout a
// cudaMemcpy of the device array expects). f32 is a plain copy.
void encode(DType t, const float* in, std::size_t n, std::uint8_t* out);
// Decode n elements of `t` storage into floats (exact).
void decode(DType t, const std::uint8_t* in, std::size_t n, float* out);

// Convenience: whole vectors.
std::vector<std::uint8_t> encode(DType t, const std::vector<float>& in);
std::vector<float> decode(DType t, const std::vector<std::uint8_t>& in);

// The bit pattern of a quiet NaN in `t` storage (used to poison buffers).
std::uint32_t nan_bits(DType t);

}  // namespace pa
