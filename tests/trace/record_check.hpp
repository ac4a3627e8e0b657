// Shared by the recorded == model GPU tests: the comparison as a Catch2 check,
// and which cases a build must record (so that a test fails, rather than
// passes on fewer cases, when a case it should run is not recordable).
#pragma once
#include <catch2/catch_test_macros.hpp>

#include <string>

#include "pa/kernels/instances.hpp"
#include "pa/core/problem.hpp"
#include "pa/trace/compare.hpp"

// recorded == model (pa/trace/compare.hpp): fields exact, values within the
// dtype's tolerance; on failure the report of the first differences.
#define PA_CHECK_EVENTS_EQUAL(recorded, model, dtype)                                                  \
  do {                                                                                                 \
    const ::pa::trace::EventComparison cmp_ = ::pa::trace::compare_events((recorded), (model), (dtype)); \
    INFO(cmp_.report);                                                                                 \
    CHECK(cmp_.equal());                                                                               \
    CHECK(cmp_.recorded_events > 0);                                                                   \
  } while (0)

namespace pa::trace::testing {

// Whether pa_kernels holds (dtype, head, block) for stages 1-5: the instance
// list of the build (pa/kernels/instances.hpp; PA_QUICK_KERNELS is a public
// compile definition of pa_kernels, so this header sees the build's list).
// Stages 1-7 record through kernels::DeviceProblem, so a configuration of the
// recording list (trace/record/record_configs.hpp) records exactly when it is
// built here. Every case of the record tests is taken from the recording list,
// so in a full build every case must run, in a quick build those of head 128 x
// block 16.
inline bool v1_instance_built(const ProblemSpec& s) {
  bool built = false;  // (every dtype gets the same head x block list)
#define PA_X(H, B) built = built || (s.head_size == H && s.block_size == B);
  PA_FOR_EACH_HEAD_BLOCK(PA_X)
#undef PA_X
  return built && s.num_threads == 128;
}

}  // namespace pa::trace::testing
