#include "bench_check.hpp"

#include "pa/core/tolerance.hpp"

namespace pa::bench {

std::string xcheck_failure(const std::vector<float>& ref, const std::vector<float>& got, DType stored) {
  if (ref.size() != got.size())
    return "output of " + std::to_string(got.size()) + " elements against stage 8's " + std::to_string(ref.size());
  if (ref.empty()) return "no output to compare";
  const CompareResult c = compare(ref.data(), got.data(), ref.size(), kernel_pair_tolerance(stored));
  return c.pass ? std::string() : c.summary();
}

}  // namespace pa::bench
