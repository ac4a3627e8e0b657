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
target_link_libraries(pa_kernels_v2cascade PUBLIC pa_index CUDA::cudart)
target_include_directories(pa_kernels_v2cascade PRIVATE ${CMAKE_CURRENT_LIST_DIR})
set_target_properties(pa_kernels_v2cascade PROPERTIES CUDA_SEPARABLE_COMPILATION OFF
                                                       POSITION_INDEPENDENT_CODE ON)
target_compile_options(pa_kernels_v2cascade PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
if(PA_QUICK_KERNELS)
  target_compile_definitions(pa_kernels_v2cascade PRIVATE PA_QUICK_KERNELS=1)
endif()
