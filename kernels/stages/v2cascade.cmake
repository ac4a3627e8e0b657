# Stages 6 (V2 split-KV) and 7 (attention-state merge, cascade): their own
# static library, built from the stage 1-5 step headers; pa_kernels (when
# present) links it and dispatches v2_partition / cascade_merge to it.
set(_pa_v2c_src
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f32.cu
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/07_cascade_prefix_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/07_cascade_prefix_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/07_cascade_merge.cu)
add_library(pa_kernels_v2cascade STATIC ${_pa_v2c_src})
# The cascade's suffix can run through stage 8 (CascadePlan::Suffix).
target_link_libraries(pa_kernels_v2cascade PUBLIC pa_index pa_kernels_optimized CUDA::cudart)
target_include_directories(pa_kernels_v2cascade PRIVATE ${CMAKE_CURRENT_LIST_DIR})
set_target_properties(pa_kernels_v2cascade PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                                       POSITION_INDEPENDENT_CODE ON)
target_compile_options(pa_kernels_v2cascade PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
if(PA_QUICK_KERNELS)
  target_compile_definitions(pa_kernels_v2cascade PRIVATE PA_QUICK_KERNELS=1)
endif()

# Stage 7 wgmma prefix kernel needs the sm_90a target: its own
# object library, built for compute_90a/sm_90a only, whenever sm_90 is among
# the CUDA architectures; the planner uses it only on a compute 9.0 device.
if("${CMAKE_CUDA_ARCHITECTURES}" MATCHES "(^|;)90")
  add_library(pa_kernels_cascade_wgmma OBJECT ${CMAKE_CURRENT_LIST_DIR}/07_cascade_prefix_wgmma.cu)
  target_link_libraries(pa_kernels_cascade_wgmma PRIVATE pa_index CUDA::cudart)
  target_include_directories(pa_kernels_cascade_wgmma PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  set_target_properties(pa_kernels_cascade_wgmma PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
  target_compile_options(pa_kernels_cascade_wgmma PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -lineinfo>)
  if(PA_QUICK_KERNELS)
    target_compile_definitions(pa_kernels_cascade_wgmma PRIVATE PA_QUICK_KERNELS=1)
  endif()
  target_sources(pa_kernels_v2cascade PRIVATE $<TARGET_OBJECTS:pa_kernels_cascade_wgmma>)
  target_compile_definitions(pa_kernels_v2cascade PRIVATE PA_CASCADE_WGMMA=1)
endif()
