// A stage's output checked against the CPU reference (attention.hpp) with the
// tolerances of pa/core/tolerance.hpp: used by `pa-lab run` and the GPU tests,
// so both judge a stage the same way. Plain C++; it sits above the kernels
// (it reads their StageOutput), which never include the reference.
#pragma once
#include <string>
#include <vector>

#include "pa/kernels/api.hpp"
#include "pa/core/tolerance.hpp"

namespace pa {

struct NamedCompare {
  std::string name;  // "q_smem", "logits", "probs", "max", "sum", "partials", "output", "tails"
  CompareResult result;
};

struct StageCheck {
  std::vector<NamedCompare> parts;
  bool pass = true;           // every part passed
  double max_abs_err = 0.0;   // over all parts
  double max_rel_err = 0.0;
  std::string summary() const;  // one line per part
};

// Compares every element the stage must write (NaN = not written = FAIL).
// Stages 2-3 also check that nothing was written past each context (the
// poisoned tail must still be NaN: part "tails").
StageCheck check_stage(const PagedProblem& p, const kernels::StageOutput& out);

}  // namespace pa
