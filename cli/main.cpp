// pa-lab: the paged-attention lab's command-line tool. Subcommands live in
// cmd_*.cpp and are registered in commands.cpp (one line each).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"
#include "no_gpu.hpp"
#include "options.hpp"
#include "pa/kernels/api.hpp"

namespace {
void usage() {
  std::printf("usage: pa-lab <command> [options]   (pa-lab <command> --help for its options)\n\ncommands:\n");
  for (const auto& c : pa::cli::commands()) std::printf("  %-8s %s\n", c.name, c.summary);
  std::printf("\nexit codes: 0 ok/PASS, 1 FAIL or error, 2 no GPU (or built without CUDA), 3 bad usage or "
              "unsupported problem\n");
}
}  // namespace

int main(int argc, char** argv) {
  using namespace pa::cli;
  if (argc < 2) {
    usage();
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    usage();
    return kExitOk;
  }
  const std::vector<std::string> rest(argv + 2, argv + argc);
  for (const auto& c : commands()) {
    if (name != c.name) continue;
    try {
      return c.run(Args(rest));
    } catch (const UsageError& e) {
      std::fprintf(stderr, "pa-lab %s: %s\n", c.name, e.what());
      return kExitUsage;
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "pa-lab %s: %s\n", c.name, e.what());
      return kExitUsage;
    } catch (const pa::kernels::DeviceOutOfMemory& e) {
      std::fprintf(stderr, "pa-lab %s: %s\n", c.name, e.what());
      return kExitUsage;
    } catch (const pa::kernels::NoGpuError& e) {
      std::fputs(no_gpu_message(c.name, PA_HAVE_CUDA, e.what()).c_str(), stderr);
      return kExitNoGpu;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pa-lab %s: error: %s\n", c.name, e.what());
      return kExitFail;
    }
  }
  std::fprintf(stderr, "pa-lab: unknown command '%s'\n\n", name.c_str());
  usage();
  return kExitUsage;
}
