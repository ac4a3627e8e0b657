# Stage 6-7 tests (owned by v2cascade). Included from tests/kernels/CMakeLists.txt.
# Built with and without CUDA: the GPU cases SKIP when there is no device.
pa_add_test(pa_v2_cascade_tests
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_v2_cascade.cpp
  LIBS pa_kernels pa_reference
  LABELS gpu)
