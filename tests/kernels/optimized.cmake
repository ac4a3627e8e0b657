# Stage 8 tests (owned by the optimized kernel). Included from
# tests/kernels/CMakeLists.txt; needs CUDA (the GPU cases SKIP without a device).
if(PA_HAVE_CUDA AND TARGET pa_kernels_optimized)
  pa_add_test(pa_optimized_tests
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_optimized.cpp
    LIBS pa_kernels pa_kernels_optimized pa_reference CUDA::cudart
    LABELS gpu)
  # The head sizes stage 8 is compiled for, read off pa_kernels_optimized's
  # instance files (kernels/stages/optimized.cmake: 08_optimized_inst_hs<H>.cu),
  # and whether the build is quick (block size 16 only): the test checks the
  # dispatcher against them and how many configurations it ran.
  get_target_property(_pa_opt_srcs pa_kernels_optimized SOURCES)
  set(_pa_opt_inst_hs)
  foreach(_src IN LISTS _pa_opt_srcs)
    if(_src MATCHES "08_optimized_inst_hs([0-9]+)\\.cu$")
      list(APPEND _pa_opt_inst_hs ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(JOIN _pa_opt_inst_hs "," _pa_opt_inst_hs)
  if(PA_QUICK_KERNELS)
    set(_pa_opt_quick 1)
  else()
    set(_pa_opt_quick 0)
  endif()
  target_compile_definitions(pa_optimized_tests PRIVATE "PA_OPT_INSTANCE_HEAD_SIZES=${_pa_opt_inst_hs}"
                                                        PA_QUICK_KERNELS=${_pa_opt_quick})
  # Stage 8 over the nhd / hnd layouts and CSR page tables.
  pa_add_test(pa_layouts_gpu_tests
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_layouts_gpu.cpp
    LIBS pa_kernels pa_kernels_optimized pa_reference CUDA::cudart
    LABELS gpu)
endif()
