// Shared helpers for the reference tests: fresh seeds from Catch's random
// seed (so `--rng-seed N` reproduces a failure), and comparison assertions.
#pragma once
#include <catch2/catch_get_random_seed.hpp>
#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <vector>

#include "pa/reference/tolerance.hpp"

namespace pa::test {

// A seed for this test case, different per `salt`, reproducible from Catch's seed.
inline std::uint64_t fresh_seed(std::uint64_t salt) {
  return static_cast<std::uint64_t>(Catch::getSeed()) * 0x9e3779b97f4a7c15ull + salt * 0xd1b54a32d192ed03ull + 1;
}

template <class R, class G>
void require_close(const std::vector<R>& ref, const std::vector<G>& got, Tolerance tol) {
  REQUIRE(ref.size() == got.size());
  const CompareResult r = compare(ref.data(), got.data(), ref.size(), tol);
  INFO(r.summary());
  REQUIRE(r.pass);
}

}  // namespace pa::test
