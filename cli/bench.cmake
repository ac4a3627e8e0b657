# pa-bench: the decode benchmark, its own binary. Times stage 8 and,
# when their libraries are in the build, v1 (pa_kernels), v2 and cascade
# (pa_kernels_v2cascade); kernels not built are reported as missing.
# CMake 3.25 does not know nvcc's C++20 flag; nvcc 13 accepts -std=c++20.
if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
option(PA_BENCH_V1 "pa-bench: time v1 through pa_kernels" ON)
option(PA_BENCH_V2CASCADE "pa-bench: time v2 and cascade through pa_kernels_v2cascade" ON)
if(PA_HAVE_CUDA AND TARGET pa_kernels_optimized)
  add_executable(pa-bench ${CMAKE_CURRENT_LIST_DIR}/bench.cu)
  # pa_kernels: the device buffer, the CUDA check, the timer and the copy
  # bandwidth every tool shares (pa/kernels/api.hpp, event_timer.hpp).
  target_link_libraries(pa-bench PRIVATE pa_bench_host pa_kernels pa_kernels_optimized CUDA::cudart)
  target_compile_options(pa-bench PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  if(PA_BENCH_V1)
    target_compile_definitions(pa-bench PRIVATE PA_BENCH_WITH_V1=1)
  else()
    target_compile_definitions(pa-bench PRIVATE PA_BENCH_WITH_V1=0)
  endif()
  if(PA_BENCH_V2CASCADE AND TARGET pa_kernels_v2cascade)
    target_link_libraries(pa-bench PRIVATE pa_kernels_v2cascade)
    target_compile_definitions(pa-bench PRIVATE PA_BENCH_WITH_V2CASCADE=1)
  else()
    target_compile_definitions(pa-bench PRIVATE PA_BENCH_WITH_V2CASCADE=0)
  endif()
endif()

# pa-lab run --stage optimized (cli/cmd_run_optimized.cpp).
if(TARGET pa-lab)
  target_sources(pa-lab PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_run_optimized.cpp)
endif()
