# Stage 6 (V2 split-KV: the partition kernel, then the reduce): its own static
# library, built from the stage 1-5 step headers; pa_kernels links it and
# dispatches v2_partition to it, and stage 7 runs a cascade's suffix through it.
pa_stage_library(pa_kernels_v2_partition
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f32.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f16.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_bf16.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f16_fp8_e4m3.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_f16_fp8_e5m2.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_bf16_fp8_e4m3.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition_bf16_fp8_e5m2.cu
          ${CMAKE_CURRENT_LIST_DIR}/06_v2_partition.cu
  LINK pa_index CUDA::cudart)
