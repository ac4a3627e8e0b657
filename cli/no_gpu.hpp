// What pa-lab says when a command needs a GPU and cannot have one. Two cases
// are told apart because their remedies differ: this pa-lab was built without
// CUDA (rebuild where nvcc exists), or it was built with CUDA and the machine
// has no CUDA driver or no GPU (or one it cannot use). Every case ends with
// what works without a GPU: `pa-lab trace` (the host model) and the viewer.
// Header-only so that tests/cli can check the wording without the kernels.
#pragma once
#include <string>

namespace pa::cli {

enum class NoGpuCase {
  built_without_cuda,   // PA_HAVE_CUDA=0: no kernels in this binary
  no_driver_or_device,  // cudaErrorInsufficientDriver / cudaErrorNoDevice / no device counted
  device_unusable,      // a driver and a device, but CUDA refused (busy, mismatch, ...)
};

// why: the reason kernels::gpu_available() or NoGpuError gave.
inline NoGpuCase classify_no_gpu(bool built_with_cuda, const std::string& why) {
  if (!built_with_cuda) return NoGpuCase::built_without_cuda;
  for (const char* s : {"cudaErrorNoDevice", "cudaErrorInsufficientDriver", "no CUDA device found",
                        "cudaErrorInitializationError"})
    if (why.find(s) != std::string::npos) return NoGpuCase::no_driver_or_device;
  return NoGpuCase::device_unusable;
}

// The whole message (several lines, '\n'-terminated) for `pa-lab COMMAND`.
// stage / lesson: the stage the user asked for and its lesson (lesson < 0:
// unknown, the suggestions use stage qk and lesson 2).
inline std::string no_gpu_message(const std::string& command, bool built_with_cuda, const std::string& why,
                                  const std::string& stage = "", int lesson = -1) {
  const std::string st = stage.empty() ? "qk" : stage;
  const std::string ls = std::to_string(lesson < 0 ? 2 : lesson);
  std::string m = "pa-lab " + command + ": ";
  switch (classify_no_gpu(built_with_cuda, why)) {
    case NoGpuCase::built_without_cuda:
      m += "this pa-lab was built without CUDA (nvcc was not found when it was configured, or "
           "PA_WITH_CUDA=OFF), so it has no kernels to run.\n"
           "  To run them, build on a machine with an NVIDIA GPU and the CUDA toolkit "
           "(bash scripts/test.sh finds nvcc by itself).\n";
      break;
    case NoGpuCase::no_driver_or_device:
      m += "no CUDA driver or GPU found (" + why + ").\n"
           "  This command runs kernels on an NVIDIA GPU; nvidia-smi shows whether the machine has one "
           "and a working driver.\n";
      break;
    case NoGpuCase::device_unusable:
      m += "the GPU cannot be used (" + why + ").\n";
      break;
  }
  m += "  Without a GPU you can still see what every thread of the stage does:\n"
       "    pa-lab trace --stage " + st + " --context-lens 1,17,100 -o " + st +
       ".patrace   (the host model writes the trace)\n"
       "    build/viewer/pa-viewer --lesson " + ls + " [--trace " + st +
       ".patrace]   (step through it; or: bash scripts/run.sh --lesson " + ls + ")\n";
  return m;
}

}  // namespace pa::cli
