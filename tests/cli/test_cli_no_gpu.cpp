// pa-lab without a GPU: the message says which case it is (built without
// CUDA; no CUDA driver or GPU; a GPU CUDA refuses) and what works without a
// GPU (pa-lab trace, the viewer). In a build without CUDA the real binary is
// run too: `pa-lab run` must exit 2 with that message.
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <string>
#include <sys/wait.h>

#include "no_gpu.hpp"
#include "run_tool.hpp"

using namespace pa::cli;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("the no-GPU cases are told apart", "[cli]") {
  CHECK(classify_no_gpu(false, "built without CUDA (PA_HAVE_CUDA is OFF)") == NoGpuCase::built_without_cuda);
  // The reasons kernels/src/device.cpp gives when cudaGetDeviceCount fails or counts none.
  CHECK(classify_no_gpu(true, "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected") ==
        NoGpuCase::no_driver_or_device);
  CHECK(classify_no_gpu(true, "no CUDA device: cudaErrorInsufficientDriver: CUDA driver version is insufficient") ==
        NoGpuCase::no_driver_or_device);
  CHECK(classify_no_gpu(true, "no CUDA device found") == NoGpuCase::no_driver_or_device);
  CHECK(classify_no_gpu(true, "no CUDA device: cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy") ==
        NoGpuCase::device_unusable);
}

TEST_CASE("the no-GPU message says what happened and what works without a GPU", "[cli]") {
  const std::string no_dev =
      no_gpu_message("run", true, "no CUDA device: cudaErrorNoDevice: no CUDA-capable device is detected", "softmax", 3);
  INFO(no_dev);
  CHECK(has(no_dev, "pa-lab run: no CUDA driver or GPU found"));
  CHECK(has(no_dev, "cudaErrorNoDevice"));
  CHECK(has(no_dev, "pa-lab trace --stage softmax"));
  CHECK(has(no_dev, "pa-viewer --lesson 3"));
  CHECK(has(no_dev, "bash scripts/run.sh --lesson 3"));
  CHECK_FALSE(has(no_dev, "built without CUDA"));

  const std::string no_cuda = no_gpu_message("run", false, "built without CUDA", "qk", 2);
  INFO(no_cuda);
  CHECK(has(no_cuda, "built without CUDA"));
  CHECK_FALSE(has(no_cuda, "no CUDA driver or GPU found"));  // the machine may well have one
  CHECK(has(no_cuda, "pa-lab trace --stage qk"));
  CHECK(has(no_cuda, "pa-viewer --lesson 2"));

  const std::string busy = no_gpu_message("run", true, "no CUDA device: cudaErrorDevicesUnavailable: busy");
  INFO(busy);
  CHECK(has(busy, "the GPU cannot be used"));
  CHECK(has(busy, "pa-lab trace"));
}

TEST_CASE("pa-lab run without CUDA exits 2 and says so", "[cli]") {
#if !defined(PA_LAB_EXE)
  SKIP("pa-lab is not built in this configuration");
#else
  if (PA_HAVE_CUDA) SKIP("this build has CUDA: whether a GPU is present is the GPU tests' business");
  const std::string args =
      "run --stage softmax --dtype fp16 --head-size 128 --block-size 16 --heads 8 --kv-heads 2 "
      "--context-lens 1,17,100 --seed 1";
  std::string out;
  const int status = pa::test::run_tool(PA_LAB_EXE, args, out);
  INFO(args << "\n" << out);
  CHECK(status == 2);
  CHECK(has(out, "pa-lab run: this pa-lab was built without CUDA"));
  CHECK(has(out, "pa-lab trace --stage softmax"));
  CHECK(has(out, "pa-viewer --lesson 3"));
#endif
}
