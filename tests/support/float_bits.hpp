// A float's 32 bits and back, for tests that compare or build values bit by
// bit (signed zeros, NaN payloads, every code of a format).
#pragma once
#include <cstdint>
#include <cstring>

namespace pa::test {

inline std::uint32_t bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace pa::test
