// A stage's output checked against the CPU reference (reference/attention.hpp)
// with the tolerances of reference/tolerance.hpp: used by `pa-lab run` and the
// GPU tests, so both judge a stage the same way. Plain C++.
#pragma once
#include <string>
#include <vector>

#include "pa/kernels/api.hpp"
#include "pa/reference/tolerance.hpp"

namespace pa::kernels {

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
StageCheck check_stage(const PagedProblem& p, const StageOutput& out);

}  // namespace pa::kernels
