// pa-lab run --stage optimized (stage 8): cmd_run hands over after it has
// taken the common problem flags.
#pragma once
#include "cache_form.hpp"
#include "options.hpp"
#include "pa/core/problem.hpp"

namespace pa::cli {

// Extra flag: --splits N (0 = the heuristic). `form`: the cache's layout and
// page table (--layout, --page-table), which stage 8 reads in every form.
const char* help_run_optimized();
int cmd_run_optimized(Flags& f, ProblemSpec spec, int iters, const CacheForm& form);

}  // namespace pa::cli
