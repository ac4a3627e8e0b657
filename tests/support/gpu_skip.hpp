// GPU tests report SKIPPED, never passed, where no GPU (or no CUDA build) is
// present: the same test binary runs everywhere.
//
//   TEST_CASE("...", "[gpu]") { PA_REQUIRE_GPU(); ... }
#pragma once
#include <catch2/catch_test_macros.hpp>
#include <string>

#include "pa/kernels/api.hpp"

#define PA_REQUIRE_GPU()                                   \
  do {                                                     \
    std::string pa_gpu_why_;                               \
    if (!::pa::kernels::gpu_available(&pa_gpu_why_)) {     \
      SKIP("no CUDA GPU: " << pa_gpu_why_);                \
    }                                                      \
  } while (0)
