# Stage 8 tests (owned by the optimized kernel). Included from
# tests/kernels/CMakeLists.txt; needs CUDA (the GPU cases SKIP without a device).
if(PA_HAVE_CUDA AND TARGET pa_kernels_optimized)
  pa_add_test(pa_optimized_tests
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_optimized.cpp
    LIBS pa_kernels_optimized pa_reference CUDA::cudart
    LABELS gpu)
endif()
