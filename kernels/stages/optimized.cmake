# Stage 8 (optimized decode kernel): its own static library so it builds
# independently of stages 1-7; pa_kernels (when present) links it.
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
pa_stage_library(pa_kernels_optimized SOURCES ${_pa_opt_src} LINK pa_index CUDA::cudart
                 EXTRA_CUDA_FLAGS -Xptxas=-v)
