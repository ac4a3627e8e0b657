// Stage 7's tensor-core prefix kernel: the recorded GPU events of a cascade
// trace (its prefix blocks included) equal the host model's, field for field
// and in program order; values within the dtype's tolerance
// (pa/trace/compare.hpp). Label gpu; SKIPPED without a GPU.
#include <catch2/catch_test_macros.hpp>

#include "record_check.hpp"
#include "replay_check.hpp"
#include "gpu_skip.hpp"
#include "pa/index/events.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"

using namespace pa;
using namespace pa::trace;
using pa::trace::testing::v1_instance_built;

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
      {DType::bf16, 64, 8, 8, 2, 8, {3}, {}},                                // one block
      {DType::f16, 192, 32, 2, 1, 64, std::vector<int>(40, 1), {{{35, 1, 0}}}},  // 80 rows: 2 query tiles; head > 128
  };
  int expected = 0, compared = 0;
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
    s.alibi = (&c - cases) % 2 == 1;  // every other case with ALiBi (each row's slope and context length)
    INFO(s.describe());
    expected += v1_instance_built(s);
    CHECK(can_record(Stage::cascade_merge, s) == v1_instance_built(s));
    if (!can_record(Stage::cascade_merge, s)) continue;
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::cascade_merge, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, Stage::cascade_merge, c.sel), s.dtype);
    std::size_t prefix_events = 0;
    for (const Event& e : rec.events) prefix_events += is_prefix_block(e.partition);
    CHECK(prefix_events > 0);  // the prefix kernel's blocks were recorded
    ++compared;
  }
  // A full build: all 4; a quick build: the two head 128 x block 16 cases.
  CHECK(expected >= 2);
  CHECK(compared == expected);
}
