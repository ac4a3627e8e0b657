// pa-lab run for the two split-KV stages, 6 (v2_partition: the context cut
// into partitions) and 7 (cascade_merge: a shared prefix and each sequence's
// suffix): cmd_run hands these stages over after taking the common problem flags.
#pragma once
#include <string>
#include "options.hpp"
#include "pa/kernels/api.hpp"

namespace pa::cli {

bool is_split_kv_stage(kernels::Stage s);
// Help text of the extra flags (--check-seqs, --prefix-len, --suffix-lens, --baselines).
std::string help_run_split_kv();
// Takes the remaining flags, finishes the parse, runs, checks, times.
int cmd_run_split_kv(kernels::Stage stage, Flags& f, ProblemSpec spec, int iters);

}  // namespace pa::cli
