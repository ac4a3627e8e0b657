# Context parallelism over several GPUs (src/context_parallel_nccl.cpp):
# built only where NCCL is found, otherwise skipped with one line. NCCL is
# looked for under NCCL_ROOT (a CMake or environment variable), the CUDA
# toolkit, and the NVIDIA NCCL wheel of the Python found on the PATH
# (site-packages/nvidia/nccl, what a PyTorch machine has); its libnccl may be
# named only libnccl.so.2 there.
option(PA_WITH_NCCL "Build the multi-GPU context-parallel decode when NCCL is found" ON)
set(PA_HAVE_NCCL OFF)
if(PA_HAVE_CUDA AND PA_WITH_NCCL)
  set(_pa_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR})
  find_program(_pa_python NAMES python3 python)
  if(_pa_python)
    execute_process(
      COMMAND ${_pa_python} -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0] if s else '')"
      OUTPUT_VARIABLE _pa_nccl_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_pa_nccl_wheel)
      list(APPEND _pa_nccl_hints ${_pa_nccl_wheel})
    endif()
  endif()
  find_path(PA_NCCL_INCLUDE_DIR nccl.h HINTS ${_pa_nccl_hints} PATH_SUFFIXES include)
  # The library beside the header first, so that both come from one install.
  if(PA_NCCL_INCLUDE_DIR)
    get_filename_component(_pa_nccl_root "${PA_NCCL_INCLUDE_DIR}" DIRECTORY)
    list(PREPEND _pa_nccl_hints ${_pa_nccl_root})
  endif()
  find_library(PA_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_pa_nccl_hints} PATH_SUFFIXES lib lib64)
  if(PA_NCCL_INCLUDE_DIR AND PA_NCCL_LIBRARY)
    set(PA_HAVE_NCCL ON)
  endif()
endif()

if(PA_HAVE_NCCL)
  message(STATUS "pa: NCCL found (${PA_NCCL_LIBRARY}): multi-GPU context parallelism ON (pa-lab run --devices N)")
  add_library(pa_context_parallel STATIC ${CMAKE_CURRENT_LIST_DIR}/src/context_parallel_nccl.cpp)
  target_include_directories(pa_context_parallel SYSTEM PRIVATE ${PA_NCCL_INCLUDE_DIR})
  target_link_libraries(pa_context_parallel PUBLIC pa_kernels PRIVATE ${PA_NCCL_LIBRARY} CUDA::cudart)
  target_compile_definitions(pa_context_parallel PUBLIC PA_HAVE_NCCL=1)
elseif(NOT PA_HAVE_CUDA)
  message(STATUS "pa: multi-GPU context parallelism skipped: no CUDA")
elseif(NOT PA_WITH_NCCL)
  message(STATUS "pa: multi-GPU context parallelism skipped: PA_WITH_NCCL=OFF")
else()
  message(STATUS "pa: multi-GPU context parallelism skipped: NCCL not found (nccl.h and libnccl; set NCCL_ROOT)")
endif()
set(PA_HAVE_NCCL ${PA_HAVE_NCCL} PARENT_SCOPE)
