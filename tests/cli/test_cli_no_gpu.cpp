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

// --alibi is a switch: it takes no value wherever it stands on the line, and
// the trace it gives has the slope loads (one more event per thread).
TEST_CASE("pa-lab trace --alibi: a switch anywhere, and the slope loads in the trace", "[cli][alibi]") {
#if !defined(PA_LAB_EXE)
  SKIP("pa-lab is not built in this configuration");
#else
  // "wrote FILE: ..., N events" (the first line).
  auto events_of = [](const std::string& out) -> long {
    const std::string line = out.substr(0, out.find('\n'));
    const auto end = line.rfind(" events");
    const auto at = line.rfind(", ", end);
    if (line.rfind("wrote ", 0) != 0 || end == std::string::npos || at == std::string::npos) return -1;
    return std::stol(line.substr(at + 2, end - at - 2));
  };
  const std::string file = "pa_lab_alibi_test.patr";
  long counts[2] = {-1, -1};
  int ran = 0;
  for (const char* extra : {"", "--alibi "}) {
    const std::string args = std::string("trace ") + extra +
                             "--stage qk --source model --heads 4 --kv-heads 2 --context-lens 20 --output " + file;
    std::string out;
    const int status = pa::test::run_tool(PA_LAB_EXE, args, out);
    INFO(args << "\n" << out);
    REQUIRE(status == 0);
    counts[ran++] = events_of(out);
  }
  std::remove(file.c_str());
  REQUIRE(ran == 2);
  REQUIRE(counts[0] > 0);
  CHECK(counts[1] - counts[0] == 128);  // the traced block's 128 threads each load the slope once
#endif
}
