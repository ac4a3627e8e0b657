// The replay order (pa/trace/replay.hpp) follows the kernel: for every stage
// on random problems, each thread's events in program order, barriers between
// their epochs, shuffles after their operands. And the checker itself is not
// vacuous: orders that break each condition are caught.
#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "pa/index/config.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/replay.hpp"

using namespace pa;
using namespace pa::trace;
using Catch::Matchers::ContainsSubstring;

namespace {

std::string first_violations(const TraceReplayCheck& r) {
  std::string s;
  for (std::size_t i = 0; i < r.violations.size() && i < 4; ++i) s += r.violations[i] + "\n";
  return s;
}

struct Case {
  ProblemSpec spec;
  Selection sel;
  ModelOptions opt;
};

// A random problem for a stage, with the shapes that stress the order: length
// 1, lengths not a multiple of the block, one block, many partitions or
// splits, GQA and MQA.
Case random_case(Stage stage, std::mt19937& rng, int k) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Case c;
  ProblemSpec& s = c.spec;
  const bool tensor_cores = stage == Stage::optimized;
  const DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
  s.dtype = tensor_cores ? dtypes[1 + pick(0, 1)] : dtypes[pick(0, 2)];
  s.head_size = kSupportedHeadSizes[pick(0, 6)];
  s.block_size = kSupportedBlockSizes[pick(0, 2)];
  const int kv = pick(1, 2), ratio = std::array{1, 2, 4, 8}[pick(0, 3)];
  s.num_kv_heads = kv;
  s.num_heads = kv * ratio;
  const int nseq = pick(1, 3);
  s.context_lens.clear();
  for (int q = 0; q < nseq; ++q) {
    // k % 4: length 1, one block, a multiple of the block, anything.
    const int len = k % 4 == 0 ? 1 : k % 4 == 1 ? s.block_size : k % 4 == 2 ? s.block_size * pick(2, 9) : pick(1, 400);
    s.context_lens.push_back(q == 0 ? len : pick(1, 300));
  }
  s.seed = rng();
  s.partition_size = s.block_size * std::array{1, 2, 4}[pick(0, 2)];
  const int seq = pick(0, nseq - 1), head = pick(0, s.num_heads - 1);
  if (stage == Stage::v2_partition) {
    const int parts = (s.context_lens[seq] + s.partition_size - 1) / s.partition_size;
    c.sel.blocks = {{seq, head, parts - 1}, {seq, head, 0}};
  } else if (stage == Stage::cascade_merge) {
    const int shortest = *std::min_element(s.context_lens.begin(), s.context_lens.end());
    s.shared_prefix_len = s.block_size * pick(0, shortest / s.block_size);
    c.sel.blocks = {{seq, head, 0}};
  } else if (stage == Stage::optimized) {
    // Sometimes more splits than a warp has lanes: the merge's split loops
    // then run different counts per lane.
    c.opt.optimized.force_splits = k % 3 == 0 ? 0 : k % 3 == 1 ? 2 : 40;
    c.sel.blocks = {{seq, head, 0}};  // every split of this CTA's unit, once the plan is known
  } else {
    c.sel.blocks = {{seq, head, 0}};
  }
  return c;
}

}  // namespace

TEST_CASE("replay order: host-model traces of every stage replay as the kernel runs", "[trace][replay]") {
  std::mt19937 rng(20261125);
  constexpr int kPerStage = 16;
  int cases = 0, blocks = 0;
  std::size_t steps = 0;
  for (int st = 1; st <= 8; ++st) {
    const auto stage = static_cast<Stage>(st);
    for (int k = 0; k < kPerStage; ++k) {
      Case c = random_case(stage, rng, k);
      // A long context with many splits for the last stage 8 cases.
      if (stage == Stage::optimized && k >= kPerStage - 2) {
        c.spec.context_lens = {6000 + k};
        c.opt.optimized.force_splits = 40;
      }
      if (stage == Stage::optimized) {
        const int splits = optimized_model_plan(c.spec, c.opt.optimized).splits;
        if (k >= kPerStage - 2) REQUIRE(splits > 32);
        BlockId first = c.sel.blocks.front();
        if (first.seq >= c.spec.num_seqs()) first.seq = 0;
        c.sel.blocks.clear();
        for (int sp = 0; sp < splits; ++sp) c.sel.blocks.push_back({first.seq, first.head, sp});
      }
      const std::vector<Event> ev = model_events(c.spec, stage, c.sel, c.opt);
      REQUIRE(!ev.empty());
      const TraceReplayCheck r = check_trace_replay(ev);
      INFO(to_string(stage) << " " << c.spec.describe() << "\n" << first_violations(r));
      CHECK(r.violations.empty());
      blocks += r.blocks;
      steps += r.steps;
      ++cases;
    }
  }
  REQUIRE(cases == 8 * kPerStage);
  CHECK(blocks >= cases);
  CHECK(steps > 1000);
}

namespace {

// A small softmax trace (barriers, shuffles, stores in several epochs) and
// its valid replay, to be broken on purpose.
struct Sample {
  std::vector<Event> ev;
  BlockReplay rep;
};
Sample softmax_sample() {
  ProblemSpec s;
  s.dtype = DType::f16;
  s.num_heads = 2;
  s.num_kv_heads = 1;
  s.context_lens = {40};
  Sample out;
  out.ev = model_events(s, Stage::softmax, {});
  std::vector<std::uint32_t> idx(out.ev.size());
  for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
  out.rep = build_block_replay(out.ev, idx, Granularity::instruction);
  return out;
}

int find_step(const BlockReplay& r, Step step, Op op, int from = 0) {
  for (int i = from; i < static_cast<int>(r.steps.size()); ++i)
    if (r.steps[i].step == step && r.steps[i].op == op) return i;
  return -1;
}

// Moves step `from` to position `to` (the others keep their order) and
// rebuilds the ranges, as a wrong ordering would produce.
BlockReplay move_step(const BlockReplay& r, int from, int to) {
  std::vector<int> perm(r.steps.size());
  for (int i = 0; i < static_cast<int>(perm.size()); ++i) perm[i] = i;
  perm.erase(perm.begin() + from);
  perm.insert(perm.begin() + to, from);
  BlockReplay out;
  for (int p : perm) {
    ReplayStep s = r.steps[p];
    s.begin = static_cast<std::uint32_t>(out.order.size());
    out.order.insert(out.order.end(), r.order.begin() + r.steps[p].begin,
                     r.order.begin() + r.steps[p].begin + r.steps[p].count);
    out.steps.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE("replay order: the checker catches every kind of wrong order", "[trace][replay]") {
  const Sample s = softmax_sample();
  REQUIRE(check_replay_order(s.ev, s.rep.order, s.rep.steps, Granularity::instruction).empty());
  const int first_barrier = find_step(s.rep, Step::barrier, Op::barrier);
  const int q_store = find_step(s.rep, Step::q_smem_store, Op::shared_store);
  const int red_store = find_step(s.rep, Step::max_reduce, Op::shared_store);
  const int red_barrier = find_step(s.rep, Step::barrier, Op::barrier, red_store);
  const int red_load = find_step(s.rep, Step::max_reduce, Op::shared_load, red_barrier);
  const int shfl = find_step(s.rep, Step::max_reduce, Op::shuffle);
  REQUIRE(q_store >= 0);
  REQUIRE(first_barrier > q_store);
  REQUIRE(red_store > shfl);
  REQUIRE(red_barrier > red_store);
  REQUIRE(red_load > red_barrier);

  SECTION("a barrier before the store it protects (the race lesson 1 warns about)") {
    const auto bad = move_step(s.rep, first_barrier, q_store);
    const auto v = check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction);
    REQUIRE(!v.empty());
    CHECK_THAT(v.front(), ContainsSubstring("barrier") || ContainsSubstring("replayed"));
  }
  SECTION("a barrier of epoch 2 before the red_scratch store of its epoch") {
    const auto bad = move_step(s.rep, red_barrier, red_store);
    CHECK(!check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction).empty());
  }
  SECTION("a load of the next epoch before its barrier") {
    const auto bad = move_step(s.rep, red_load, red_barrier);
    CHECK(!check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction).empty());
  }
  SECTION("a thread's later instruction before its earlier one") {
    const auto bad = move_step(s.rep, red_store, shfl);
    const auto v = check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction);
    REQUIRE(!v.empty());
    CHECK_THAT(v.front(), ContainsSubstring("precedes it in the thread"));
  }
  SECTION("a shuffle split from its source lane") {
    // Split the first shuffle step: lanes 0-15 of every warp stay, the rest
    // become a step of their own right after it.
    BlockReplay bad = s.rep;
    ReplayStep& st = bad.steps[shfl];
    std::vector<std::uint32_t> lo, hi;
    for (std::uint32_t k = st.begin; k < st.begin + st.count; ++k)
      (s.ev[bad.order[k]].lane < 16 ? lo : hi).push_back(bad.order[k]);
    REQUIRE(!lo.empty());
    REQUIRE(!hi.empty());
    std::copy(lo.begin(), lo.end(), bad.order.begin() + st.begin);
    std::copy(hi.begin(), hi.end(), bad.order.begin() + st.begin + lo.size());
    ReplayStep second = st;
    st.count = static_cast<std::uint32_t>(lo.size());
    second.begin = st.begin + st.count;
    second.count = static_cast<std::uint32_t>(hi.size());
    bad.steps.insert(bad.steps.begin() + shfl + 1, second);
    const auto v = check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction);
    REQUIRE(!v.empty());
    CHECK_THAT(v.front(), ContainsSubstring("runs no shuffle in that step"));
  }
  SECTION("a shuffle without its source lane") {
    auto ev = s.ev;
    ev[s.rep.order[s.rep.steps[shfl].begin]].src_lane = -1;
    CHECK(!check_replay_order(ev, s.rep.order, s.rep.steps, Granularity::instruction).empty());
  }
  SECTION("an event left out, or shown twice") {
    BlockReplay bad = s.rep;
    bad.order.back() = bad.order.front();
    CHECK(!check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction).empty());
  }
  SECTION("a step that mixes two instructions") {
    // Merge the max reduction's first shuffle step into the one before it.
    BlockReplay bad = s.rep;
    bad.steps[shfl - 1].count += bad.steps[shfl].count;
    bad.steps.erase(bad.steps.begin() + shfl);
    CHECK(!check_replay_order(s.ev, bad.order, bad.steps, Granularity::instruction).empty());
  }
}

TEST_CASE("replay order: threads that run two instructions in opposite orders are an error", "[trace][replay]") {
  // Two threads of one warp: lane 0 stores then loads, lane 1 loads then stores
  // (the same two instructions), which no kernel run can show as one order.
  ProblemSpec s;
  s.context_lens = {16};
  std::vector<Event> ev = model_events(s, Stage::q_to_smem, {});
  std::vector<Event> two;
  for (const Event& e : ev)
    if (e.warp == 0 && e.lane < 2 && (e.step == Step::q_load || e.step == Step::q_smem_store)) two.push_back(e);
  REQUIRE(two.size() >= 4);
  // Lane 1: swap its first load and store.
  std::vector<int> l1;
  for (int i = 0; i < static_cast<int>(two.size()); ++i)
    if (two[i].lane == 1) l1.push_back(i);
  REQUIRE(l1.size() >= 2);
  std::swap(two[l1[0]].seq_in_thread, two[l1[1]].seq_in_thread);
  std::vector<std::uint32_t> idx(two.size());
  for (std::uint32_t i = 0; i < idx.size(); ++i) idx[i] = i;
  try {
    (void)build_block_replay(two, idx, Granularity::instruction);
    FAIL("no ReplayOrderError");
  } catch (const ReplayOrderError& e) {
    CHECK_THAT(e.what(), ContainsSubstring("cannot be ordered"));
    CHECK_THAT(e.what(), ContainsSubstring("cycle: q_"));
  }
}
