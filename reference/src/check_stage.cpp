// Stage outputs against the reference: see check_stage.hpp.
#include "pa/reference/check_stage.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "pa/reference/attention.hpp"

namespace pa {

using kernels::Stage;
using kernels::StageOutput;

namespace {
// The kernel's [seq][head][max_context_len] rows, gathered in the reference's
// ragged TokenTensor order; counts tail elements that are not NaN.
std::vector<float> gather_tokens(const PagedProblem& p, const StageOutput& o, std::size_t* tails_written) {
  std::vector<float> v;
  *tails_written = 0;
  const StageOutGeometry& g = o.geometry;
  for (int s = 0; s < p.num_seqs(); ++s) {
    for (int h = 0; h < p.spec.num_heads; ++h) {
      for (int t = 0; t < g.max_context_len; ++t) {
        const float x = o.values.at(static_cast<std::size_t>(g.logit_offset(s, h, t)));
        if (t < p.context_lens[s]) v.push_back(x);
        else if (!std::isnan(x)) ++*tails_written;
      }
    }
  }
  return v;
}

void add(StageCheck& c, std::string name, const CompareResult& r) {
  c.pass = c.pass && r.pass;
  c.max_abs_err = std::max(c.max_abs_err, r.max_abs_err);
  c.max_rel_err = std::max(c.max_rel_err, r.max_rel_err);
  c.parts.push_back({std::move(name), r});
}

void add_tails(StageCheck& c, std::size_t written) {
  CompareResult r;
  r.count = written;
  r.num_failed = written;
  r.pass = written == 0;
  c.pass = c.pass && r.pass;
  c.parts.push_back({"tails", r});
}

template <class R>
CompareResult cmp(const std::vector<R>& ref, const std::vector<float>& got, Tolerance tol, const char* what) {
  if (ref.size() != got.size()) {
    throw std::logic_error(std::string("check_stage: ") + what + ": reference has " + std::to_string(ref.size()) +
                           " values, the kernel output " + std::to_string(got.size()));
  }
  return compare(ref.data(), got.data(), ref.size(), tol);
}
}  // namespace

std::string StageCheck::summary() const {
  std::ostringstream s;
  for (const auto& p : parts) {
    if (p.name == "tails") {
      s << "  tails: " << (p.result.pass ? "PASS" : "FAIL") << " (" << p.result.num_failed
        << " elements written past a context)\n";
    } else {
      s << "  " << p.name << ": " << p.result.summary() << "\n";
    }
  }
  return s.str();
}

StageCheck check_stage(const PagedProblem& p, const StageOutput& o) {
  StageCheck c;
  const Tolerance f32 = tolerance_for(DType::f32);
  switch (o.stage) {
    case Stage::q_to_smem: add(c, "q_smem", cmp(ref_q_smem(p), o.values, f32, "q_smem")); break;
    case Stage::qk: {
      std::size_t tails = 0;
      const auto got = gather_tokens(p, o, &tails);
      add(c, "logits", cmp(ref_logits(p).values, got, f32, "logits"));
      add_tails(c, tails);
      break;
    }
    case Stage::softmax: {
      std::size_t tails = 0;
      const auto got = gather_tokens(p, o, &tails);
      const SoftmaxRef ref = ref_softmax(p);
      add(c, "probs", cmp(ref.probs.values, got, f32, "probs"));
      add(c, "max", cmp(ref.max_logit, o.max, f32, "max"));
      add(c, "sum", cmp(ref.exp_sum, o.sum, f32, "sum"));
      add_tails(c, tails);
      break;
    }
    case Stage::lv: add(c, "partials", cmp(ref_warp_partials(p).values, o.values, f32, "partials")); break;
    case Stage::warp_reduce: {
      const auto ref = round_to_dtype(ref_output(p), p.spec.dtype);
      add(c, "output", cmp(ref, o.values, tolerance_for(p.spec.dtype), "output"));
      break;
    }
    default:
      throw std::invalid_argument(std::string("check_stage: no check for stage ") + kernels::stage_name(o.stage));
  }
  return c;
}

}  // namespace pa
