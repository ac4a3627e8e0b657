// pa-lab run for stages 6 (v2_partition) and 7 (cascade_merge): cmd_run
// hands these stages over after taking the common problem flags.
#pragma once
#include "options.hpp"
#include "pa/kernels/api.hpp"

namespace pa::cli {

bool is_v2cascade_stage(kernels::Stage s);
// Help text of the extra flags (--check-seqs, --prefix-len, --suffix-lens, --baselines).
const char* help_run_v2cascade();
// Takes the remaining flags, finishes the parse, runs, checks, times.
int cmd_run_v2cascade(kernels::Stage stage, Flags& f, ProblemSpec spec, int iters);

}  // namespace pa::cli
