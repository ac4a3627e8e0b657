// pa-lab's subcommands. Adding one (trace, bench ...) = write cli/cmd_NAME.cpp
// with `int cmd_NAME(Args)` and `void help_NAME()`, declare them below, and add
// ONE line to kCommands in commands.cpp (and the file to cli/CMakeLists.txt).
#pragma once
#include <span>
#include <string>

namespace pa::cli {

using Args = std::span<const std::string>;  // the arguments after the subcommand

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;    // ran, and the result is wrong (FAIL)
inline constexpr int kExitNoGpu = 2;   // needs a GPU and there is none (or no CUDA in this build)
inline constexpr int kExitUsage = 3;   // bad command line or unsupported problem

struct Command {
  const char* name;
  const char* summary;
  int (*run)(Args);
  void (*help)();
};

std::span<const Command> commands();

int cmd_run(Args);
void help_run();
int cmd_list(Args);
void help_list();
int cmd_trace(Args);
void help_trace();
int cmd_timeline(Args);
void help_timeline();

}  // namespace pa::cli
