// Command-line flags shared by the subcommands: a small parser (--name value,
// --name=value, --flag) and the problem flags every GPU command takes.
#pragma once
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "pa/core/problem.hpp"

namespace pa::cli {

// A bad command line: the message says what was wrong and what is accepted.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Flags {
 public:
  // `switches` are the flags that take no value (e.g. "help"); the problem's
  // (--alibi) are switches in every command.
  Flags(Args args, std::vector<std::string> switches = {"help"});
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> take(const std::string& name);
  std::string take_str(const std::string& name, const std::string& def);
  // accepted, when given, is what a parse or range error names instead of
  // min_value .. INT_MAX (the head sizes a build has, say).
  int take_int(const std::string& name, int def, int min_value, const std::string& accepted = {});
  std::uint64_t take_u64(const std::string& name, std::uint64_t def);
  std::vector<int> take_int_list(const std::string& name);  // "1,17,100"
  bool take_switch(const std::string& name);
  // Throws UsageError naming any flag nobody took.
  void finish(const std::string& command) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> taken_;
  std::vector<std::string> switches_;
};

// --dtype --head-size --block-size --threads --seqs --heads --kv-heads
// --context-lens | --context-len --partition-size --extra-q-stride --seed --spread
ProblemSpec take_problem_flags(Flags& f);
// The help text of those flags.
const char* problem_flags_help();
// spec.validate(), its ProblemError turned into a UsageError that names the
// flag at fault (--head-size for head_size, --prefix-len for
// shared_prefix_len, ...), the value and what is accepted.
void validate_problem_flags(const ProblemSpec& spec);

// --splits sets stage 8's split count; every other stage has none, so the
// flag is refused by name there (run, trace, timeline) rather than ignored.
void refuse_splits_unless_optimized(const Flags& f, bool optimized, const std::string& stage_name);

// The cascade's problem flags (pa-lab run and timeline, stage cascade_merge):
// --prefix-len P (the tokens every sequence shares) and --suffix-lens
// A,B,... (each sequence's own tokens, or one value for all; the contexts
// become P + suffix). Call after take_problem_flags.
void take_cascade_flags(Flags& f, ProblemSpec& spec);
const char* cascade_flags_help();

DType parse_dtype(const std::string& s);

// A file a command will write, checked before any work (core::check_can_write):
// a path that cannot be written is the command line's fault, a UsageError
// naming the option ("option -o / --output: ...").
void check_writable(const std::string& path, const char* option);

}  // namespace pa::cli
