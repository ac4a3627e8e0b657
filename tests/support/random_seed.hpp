// Fresh random inputs per run, reproducible: the seed derives from Catch2's
// --rng-seed (random each run unless given), and tests print it on failure.
#pragma once
#include <catch2/catch_get_random_seed.hpp>
#include <cstdint>

namespace pa::test {
inline std::uint64_t fresh_seed(std::uint64_t salt) {
  return static_cast<std::uint64_t>(Catch::getSeed()) * 1000003ull + salt;
}
}  // namespace pa::test
