# Stage 6 (V2 split-KV: the partition kernel, then the reduce): its own static
# library, built from the stage 1-5 step headers; pa_kernels links it and
# dispatches v2_partition to it, and stage 7 runs a cascade's suffix through it.
add_library(pa_kernels_v2_partition STATIC
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f32.cu
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f16.cu
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_bf16.cu
  ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition.cu)
target_link_libraries(pa_kernels_v2_partition PUBLIC pa_index CUDA::cudart)
target_include_directories(pa_kernels_v2_partition PRIVATE ${CMAKE_CURRENT_LIST_DIR})
set_target_properties(pa_kernels_v2_partition PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                                         POSITION_INDEPENDENT_CODE ON)
target_compile_options(pa_kernels_v2_partition PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
if(PA_QUICK_KERNELS)
  target_compile_definitions(pa_kernels_v2_partition PRIVATE PA_QUICK_KERNELS=1)
endif()
