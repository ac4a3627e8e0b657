# pa-bench: the decode benchmark, its own binary. Times v1 (stage 5), v2
# (stage 6), the cascade (stage 7) and stage 8, every one through pa_kernels.
if(PA_HAVE_CUDA AND TARGET pa_kernels_optimized)
  add_executable(pa-bench ${CMAKE_CURRENT_LIST_DIR}/bench.cu)
  # pa_kernels: the device buffer, the CUDA check, the timer and the copy
  # bandwidth every tool shares (pa/kernels/api.hpp, event_timer.hpp).
  target_link_libraries(pa-bench PRIVATE pa_bench_host pa_kernels pa_kernels_optimized CUDA::cudart)
  target_compile_options(pa-bench PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  # --paged-read's kernels (bench_paged_read.cuh) use the stages' PTX wrappers.
  target_include_directories(pa-bench PRIVATE ${PROJECT_SOURCE_DIR}/kernels/stages)
endif()

# pa-lab run --stage optimized (cli/cmd_run_optimized.cpp).
if(TARGET pa-lab)
  target_sources(pa-lab PRIVATE ${CMAKE_CURRENT_LIST_DIR}/cmd_run_optimized.cpp)
endif()
