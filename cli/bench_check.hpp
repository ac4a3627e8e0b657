// pa-bench's cross-check: every kernel it times besides stage 8 (v1, v2, the
// cascade) runs once more on the first rotation of the inputs, and its output
// must agree with stage 8's on the same inputs within kernel_pair_tolerance
// (pa/core/tolerance.hpp): two kernels, each within its dtype's tolerance of
// the exact result. A row that does not agree is an error of the run, not a
// figure. Plain C++ (no CUDA), tested in tests/cli/test_bench_json.cpp.
#pragma once
#include <string>
#include <vector>

#include "pa/index/dtype.hpp"

namespace pa::bench {

// "" when `got` agrees with `ref` element by element (both decoded from
// outputs stored in `stored`; NaN never agrees), else why not: the sizes, or
// the comparison's summary (worst element, its values, the tolerance).
std::string xcheck_failure(const std::vector<float>& ref, const std::vector<float>& got, DType stored);

}  // namespace pa::bench
