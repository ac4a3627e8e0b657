// pa-lab run --stage optimized --devices N: stage 8 sharded over several GPUs
// (context parallelism through NCCL); cmd_run_optimized hands over when
// --devices is given.
#pragma once
#include "options.hpp"
#include "pa/core/problem.hpp"

namespace pa::cli {

// Extra flags: --devices N[,M...], --shard-policy, --exchange E[,F].
const char* help_run_devices();
int cmd_run_devices(Flags& f, ProblemSpec spec, int iters);

}  // namespace pa::cli
