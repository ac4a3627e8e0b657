// require_close: every element of `got` within the tolerance of `ref`
// (pa/core/tolerance.hpp's compare), with the comparison's summary on failure.
// Fresh seeds: random_seed.hpp.
#pragma once
#include <catch2/catch_test_macros.hpp>
#include <cstdint>
#include <vector>

#include "pa/core/tolerance.hpp"
#include "random_seed.hpp"

namespace pa::test {

template <class R, class G>
void require_close(const std::vector<R>& ref, const std::vector<G>& got, Tolerance tol) {
  REQUIRE(ref.size() == got.size());
  const CompareResult r = compare(ref.data(), got.data(), ref.size(), tol);
  INFO(r.summary());
  REQUIRE(r.pass);
}

}  // namespace pa::test
