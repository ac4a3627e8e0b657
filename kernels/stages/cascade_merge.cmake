# Stage 7 (attention-state merge, cascade decoding): its own static library,
# built from the stage 1-6 step headers. The cascade runs its suffix through
# stage 6 or stage 8 (CascadePlan::Suffix), so it links both; pa_kernels links
# it and dispatches cascade_merge to it.
pa_stage_library(pa_kernels_cascade_merge
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/07_cascade_prefix_f16.cu
          ${CMAKE_CURRENT_LIST_DIR}/07_cascade_prefix_bf16.cu
          ${CMAKE_CURRENT_LIST_DIR}/07_cascade_merge.cu
          ${CMAKE_CURRENT_LIST_DIR}/07_shard_merge.cu
          ${CMAKE_CURRENT_LIST_DIR}/07_multilevel_cascade.cu
  LINK pa_index pa_kernels_v2_partition pa_kernels_optimized CUDA::cudart)

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
  target_sources(pa_kernels_cascade_merge PRIVATE $<TARGET_OBJECTS:pa_kernels_cascade_wgmma>)
  target_compile_definitions(pa_kernels_cascade_merge PRIVATE PA_CASCADE_WGMMA=1)
endif()
