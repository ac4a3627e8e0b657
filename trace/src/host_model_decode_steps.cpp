// The stage 1-6 host models' entry points (host_model_detail.hpp): each
// problem goes to the instances of its head size (the model itself:
// host_model_decode_steps.hpp, instantiated by the generated
// host_model_head_<H>.cpp files).
#include <stdexcept>
#include <string>

#include "host_model_detail.hpp"
#include "pa/core/config_dispatch.hpp"

namespace pa::trace::detail {
namespace {
[[noreturn]] void no_head_size(const ProblemSpec& s) {
  throw std::invalid_argument("host model: head size " + std::to_string(s.head_size) +
                              " (accepted: " + head_sizes_text() + ")");
}
}  // namespace

void model_v2_partition_block(const PagedProblem& p, const V2Launch& l, int seq, int head, int part,
                              ModelValues& vals, std::vector<Event>& out) {
  if (!with_head_size(p.spec.head_size, [&](auto h) {
        model_v2_partition_block_head<decltype(h)::value>(p, l, seq, head, part, vals, out);
      }))
    no_head_size(p.spec);
}

void model_v1_block(const PagedProblem& p, Stage stage, const BlockId& b, ModelValues& vals,
                    std::vector<Event>& out) {
  if (!with_head_size(p.spec.head_size,
                      [&](auto h) { model_v1_block_head<decltype(h)::value>(p, stage, b, vals, out); }))
    no_head_size(p.spec);
}

}  // namespace pa::trace::detail
