// Stage 7's tensor-core prefix kernel: the recorded GPU events of a cascade
// trace (its prefix blocks included) equal the host model's, field for field
// and in program order; values within a float tolerance (label gpu; SKIPPED
// without a GPU).
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <tuple>

#include "replay_check.hpp"
#include "gpu_skip.hpp"
#include "pa/index/events.hpp"
#include "pa/reference/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"

using namespace pa;
using namespace pa::trace;

namespace {
bool same_fields(Event a, Event b) {
  a.value = b.value = 0.f;
  return std::memcmp(&a, &b, sizeof a) == 0;
}
bool close_values(float got, float want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= 2e-3f * std::max(1.0f, std::abs(want));
}
std::string compare(const std::vector<Event>& got, const std::vector<Event>& want, int& prefix_events) {
  std::ostringstream os;
  int shown = 0;
  using Key = std::tuple<int, int, int, int, int>;
  std::map<Key, std::pair<std::vector<Event>, std::vector<Event>>> threads;
  for (const Event& e : got) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].first.push_back(e);
  for (const Event& e : want) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].second.push_back(e);
  for (auto& [k, gw] : threads) {
    auto& [g, w] = gw;
    if (is_prefix_block(std::get<2>(k))) prefix_events += static_cast<int>(g.size());
    if (g.size() != w.size() && shown < 5) {
      os << "thread (seq " << std::get<0>(k) << ", head " << std::get<1>(k) << ", block " << std::get<2>(k) << ", warp "
         << std::get<3>(k) << ", lane " << std::get<4>(k) << "): " << g.size() << " recorded, model " << w.size() << "\n";
      ++shown;
    }
    for (std::size_t i = 0; i < std::min(g.size(), w.size()) && shown < 5; ++i)
      if (!same_fields(g[i], w[i]) || !close_values(g[i].value, w[i].value)) {
        os << "  recorded: " << describe(g[i]) << " value " << g[i].value << "\n  model:    " << describe(w[i])
           << " value " << w[i].value << "\n";
        ++shown;
      }
  }
  return os.str();
}
}  // namespace

TEST_CASE("recorded GPU events equal the host model, cascade prefix kernel", "[gpu][trace][record][cascade]") {
  PA_REQUIRE_GPU();
  struct C {
    DType dt;
    int head, block, heads, kv, prefix;
    std::vector<int> suffixes;
    Selection sel;
  };
  const C cases[] = {
      {DType::f16, 128, 16, 4, 4, 96, {5, 40}, {{{1, 2, 0}}}},              // 2 chunks of 64, 2 tiles each
      {DType::bf16, 128, 16, 8, 2, 72 - 72 % 16, {3, 0, 17}, {{{2, 7, 0}}}}, // GQA 4, partial tile
      {DType::f16, 64, 8, 8, 2, 8, {3}, {}},                                 // one block
      {DType::bf16, 256, 32, 2, 1, 64, std::vector<int>(40, 1), {{{35, 1, 0}}}},  // 80 rows: 2 query tiles
  };
  int compared = 0;
  for (const C& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv;
    s.shared_prefix_len = c.prefix;
    s.context_lens.clear();
    for (int x : c.suffixes) s.context_lens.push_back(c.prefix + x);
    s.seed = 13;
    if (!can_record(Stage::cascade_merge, s)) continue;
    INFO(s.describe());
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::cascade_merge, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    const auto model = model_events(s, Stage::cascade_merge, c.sel);
    int prefix_events = 0;
    const std::string diff = compare(rec.events, model, prefix_events);
    INFO(diff);
    CHECK(diff.empty());
    CHECK(rec.events.size() == model.size());
    CHECK(prefix_events > 0);  // the prefix kernel's blocks were recorded
    ++compared;
  }
  if (compared == 0) SKIP("no cascade recording instance for any case (PA_QUICK_KERNELS build?)");
}
