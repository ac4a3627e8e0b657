# Stage 8 (optimized decode kernel): its own static library so it builds
# independently of stages 1-7; pa_kernels (when present) links it.
# CMake 3.25 does not know nvcc's C++20 flag; nvcc 13 accepts -std=c++20.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
# Quick builds: the smallest, the common and the largest head size; full
# builds: every head size of the registry (PA_SUPPORTED_HEAD_SIZES).
if(PA_QUICK_KERNELS)
  set(_pa_opt_hs 64 128 256)
else()
  set(_pa_opt_hs ${PA_SUPPORTED_HEAD_SIZES})
endif()
set(_pa_opt_src ${CMAKE_CURRENT_LIST_DIR}/08_optimized.cu)
foreach(hs ${_pa_opt_hs})
  list(APPEND _pa_opt_src ${CMAKE_CURRENT_LIST_DIR}/08_optimized_inst_hs${hs}.cu)
endforeach()
add_library(pa_kernels_optimized STATIC ${_pa_opt_src})
target_link_libraries(pa_kernels_optimized PUBLIC pa_index CUDA::cudart)
target_include_directories(pa_kernels_optimized PRIVATE ${CMAKE_CURRENT_LIST_DIR})
set_target_properties(pa_kernels_optimized PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                                       POSITION_INDEPENDENT_CODE ON)
target_compile_options(pa_kernels_optimized PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo -Xptxas=-v>)
if(PA_QUICK_KERNELS)
  target_compile_definitions(pa_kernels_optimized PRIVATE PA_QUICK_KERNELS=1)
endif()
