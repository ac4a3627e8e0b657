// The subcommand registry: one line per command.
#include "commands.hpp"

namespace pa::cli {

namespace {
constexpr Command kCommands[] = {
    {"run", "run a stage on the GPU, check it against the CPU reference, time it", cmd_run, help_run},
    {"list", "list the stages and the supported / built configurations", cmd_list, help_list},
    {"trace", "record a stage's events (GPU, else the host model) to a trace file", cmd_trace, help_trace},
    {"timeline", "export a timeline recorded on a GPU as Chrome trace-event JSON for Perfetto", cmd_timeline,
     help_timeline},
};
}  // namespace

std::span<const Command> commands() { return kCommands; }

}  // namespace pa::cli
