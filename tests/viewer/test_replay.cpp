// Replay state and the grouping of events into replay steps, on hand-made
// events and on the host model; where a lesson marker's button jumps
// (locate_step, across thread blocks) and the problem each lesson opens with
// (core/lesson_problem.hpp).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "core/lesson_problem.hpp"
#include "core/trace_index.hpp"
#include "core/trace_load.hpp"
#include "pa/lessons/lesson.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;
using trace::Event;

namespace {
Event ev(int warp, int lane, trace::Step step, int iter, int epoch, int seq_in_thread, int seq = 0) {
  Event e{};
  e.stage = trace::Stage::qk;
  e.step = step;
  e.op = trace::Op::global_load;
  e.tensor = trace::Tensor::k_cache;
  e.warp = static_cast<std::uint16_t>(warp);
  e.lane = static_cast<std::uint16_t>(lane);
  e.seq = seq;
  e.iter = iter;
  e.epoch = epoch;
  e.seq_in_thread = seq_in_thread;
  e.byte_offset = 0;
  e.bytes = 8;
  return e;
}
}  // namespace

TEST_CASE("ReplayState steps, jumps, clamps and plays", "[viewer][replay]") {
  ReplayState r;
  CHECK(r.count() == 0);
  r.next();
  CHECK(r.current() == 0);
  r.play();
  CHECK_FALSE(r.playing());  // nothing to play
  r.set_count(10);
  r.next();
  r.next();
  CHECK(r.current() == 2);
  r.prev();
  CHECK(r.current() == 1);
  r.jump(100);
  CHECK(r.current() == 9);
  r.jump(-5);
  CHECK(r.current() == 0);
  r.end();
  CHECK(r.current() == 9);
  r.home();
  CHECK(r.current() == 0);

  r.set_speed(4);
  r.play();
  CHECK(r.playing());
  CHECK_FALSE(r.tick(0.1));  // 0.4 steps: not yet
  CHECK(r.tick(0.2));        // 1.2 steps accumulated
  CHECK(r.current() == 1);
  CHECK(r.tick(1.0));        // +4
  CHECK(r.current() == 5);
  CHECK(r.tick(10.0));       // stops at the end
  CHECK(r.current() == 9);
  CHECK_FALSE(r.playing());
  r.play();                  // from the end: restarts
  CHECK(r.current() == 0);
  r.toggle_play();
  CHECK_FALSE(r.playing());
  CHECK_FALSE(r.tick(5.0));

  r.jump(7);
  r.set_count(3);  // a smaller trace keeps the position clamped
  CHECK(r.current() == 2);
  r.set_speed(0);
  CHECK(r.speed() > 0);
}

TEST_CASE("Events group into one replay step per instruction", "[viewer][replay]") {
  // Two threads; each issues 2 K loads in iter 0, then a barrier, then 1 load in epoch 1.
  std::vector<Event> v;
  for (int lane = 0; lane < 2; ++lane) {
    v.push_back(ev(0, lane, trace::Step::k_load, 0, 0, 0));
    v.push_back(ev(0, lane, trace::Step::k_load, 0, 0, 1));
    Event b = ev(0, lane, trace::Step::barrier, -1, 0, 2);
    b.op = trace::Op::barrier;
    v.push_back(b);
    v.push_back(ev(0, lane, trace::Step::qk_dot, 0, 1, 3));
  }
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 1);
  REQUIRE(idx.num_steps(0) == 4);
  const auto& s = idx.steps(0);
  CHECK(s[0].step == trace::Step::k_load);
  CHECK(s[0].occurrence == 0);
  CHECK(s[1].step == trace::Step::k_load);
  CHECK(s[1].occurrence == 1);
  CHECK(s[2].step == trace::Step::barrier);
  CHECK(s[3].step == trace::Step::qk_dot);
  CHECK(s[3].epoch == 1);
  for (int k = 0; k < 4; ++k) {
    CHECK(s[k].threads == 2);
    CHECK(idx.events_of(0, k).size() == 2);
    for (auto e : idx.events_of(0, k)) CHECK(idx.step_of_event(e) == k);
  }
  // Lane order inside a step.
  CHECK(v[idx.events_of(0, 0)[0]].lane == 0);
  CHECK(v[idx.events_of(0, 0)[1]].lane == 1);
  CHECK(idx.find_step(0, trace::Step::qk_dot) == 3);
  CHECK(idx.find_step(0, trace::Step::v_load) == -1);
  CHECK(idx.events_of(0, 99).empty());
  CHECK(idx.events_of(5, 0).empty());

  TraceIndex coarse(v, Granularity::step);
  REQUIRE(coarse.num_steps(0) == 3);  // both K loads in one step
  CHECK(coarse.steps(0)[0].count == 4);
  CHECK(coarse.steps(0)[0].occurrence == -1);
}

TEST_CASE("Unsorted events and several blocks are indexed", "[viewer][replay]") {
  std::vector<Event> v = {ev(1, 3, trace::Step::k_load, 0, 0, 1, 1), ev(0, 0, trace::Step::k_load, 0, 0, 0, 0),
                          ev(1, 3, trace::Step::q_smem_load, 0, 0, 0, 1)};
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 2);
  CHECK(idx.block(0).seq == 1);  // order of first appearance
  CHECK(idx.find_block(BlockKey{0, 0, 0}) == 1);
  CHECK(idx.find_block(BlockKey{7, 0, 0}) == -1);
  REQUIRE(idx.num_steps(0) == 2);
  CHECK(idx.steps(0)[0].step == trace::Step::q_smem_load);  // program order by seq_in_thread
  CHECK(idx.steps(0)[1].step == trace::Step::k_load);
  CHECK(idx.block_of_event(1) == 1);
  TraceIndex empty(std::vector<Event>{}, Granularity::instruction);
  CHECK(empty.num_blocks() == 0);
  CHECK(empty.num_steps(0) == 0);
}

TEST_CASE("Host-model QK trace: every event in exactly one step; K loads are warp-wide instructions",
          "[viewer][replay]") {
  ProblemSpec spec;  // fp16, head 128, block 16, 128 threads, context 100
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  REQUIRE(!events.empty());
  TraceIndex idx(events, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 1);
  std::size_t total = 0;
  for (int k = 0; k < idx.num_steps(0); ++k) total += idx.events_of(0, k).size();
  CHECK(total == events.size());
  const int k = idx.find_step(0, trace::Step::k_load);
  REQUIRE(k >= 0);
  // One instruction: every lane of every warp with a block issues one load.
  const auto st = idx.steps(0)[k];
  CHECK(st.threads == static_cast<int>(st.count));
  CHECK(st.count % 32 == 0);
  // Steps are in barrier-epoch order.
  for (int i = 1; i < idx.num_steps(0); ++i) CHECK(idx.steps(0)[i - 1].epoch <= idx.steps(0)[i].epoch);
}

TEST_CASE("Idle threads reaching the barrier early do not reorder steps", "[viewer][replay]") {
  // Lane 0 loads then stores then hits the barrier; lane 1 only hits the barrier
  // (its barrier has seq_in_thread 0, smaller than lane 0's store).
  std::vector<Event> v = {ev(0, 0, trace::Step::q_load, -1, 0, 0), ev(0, 0, trace::Step::q_smem_store, -1, 0, 1),
                          ev(0, 0, trace::Step::barrier, -1, 0, 2), ev(1, 0, trace::Step::barrier, -1, 0, 0)};
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_steps(0) == 3);
  CHECK(idx.steps(0)[0].step == trace::Step::q_load);
  CHECK(idx.steps(0)[1].step == trace::Step::q_smem_store);
  CHECK(idx.steps(0)[2].step == trace::Step::barrier);
  CHECK(idx.steps(0)[2].threads == 2);
}

TEST_CASE("locate_step: a marker's step in the shown block, else the first other block that has it", "[viewer][replay][lesson]") {
  // Block 0: a partition (k_load); block 1: another partition (k_load, partition_store);
  // block 2: the reduce (partition_reduce); block 3: a second reduce-like block.
  auto at = [](Event e, int partition) {
    e.partition = partition;
    return e;
  };
  const std::vector<Event> v = {at(ev(0, 0, trace::Step::k_load, 0, 0, 0), 0),
                                at(ev(0, 0, trace::Step::k_load, 0, 0, 0), 1),
                                at(ev(0, 0, trace::Step::partition_store, 0, 0, 1), 1),
                                at(ev(0, 0, trace::Step::max_reduce, -1, 0, 0), -1),
                                at(ev(0, 0, trace::Step::partition_reduce, -1, 0, 1), -1),
                                at(ev(0, 0, trace::Step::partition_reduce, -1, 0, 0), -3)};
  const TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 4);
  const int p0 = idx.find_block({0, 0, 0}), p1 = idx.find_block({0, 0, 1}), red = idx.find_block({0, 0, -1}),
            other = idx.find_block({0, 0, -3});
  // In the shown block: there.
  CHECK(locate_step(idx, p1, trace::Step::k_load).block == p1);
  CHECK(locate_step(idx, p0, trace::Step::k_load).block == p0);
  // Not in the shown block (the old search gave -1 and the button did nothing):
  // the first block in index order that has it, and its first such step.
  REQUIRE(idx.find_step(p0, trace::Step::partition_reduce) == -1);
  const StepLocation r = locate_step(idx, p0, trace::Step::partition_reduce);
  REQUIRE(r.found());
  CHECK(r.block == std::min(red, other));
  CHECK(r.step == idx.find_step(r.block, trace::Step::partition_reduce));
  CHECK(idx.steps(r.block)[r.step].step == trace::Step::partition_reduce);
  CHECK(locate_step(idx, other, trace::Step::partition_reduce).block == other);  // shown block first
  const StepLocation ps = locate_step(idx, red, trace::Step::partition_store);
  CHECK(ps.block == p1);
  CHECK(ps.step == 1);
  // Nowhere: not found; an out-of-range shown block still searches the others.
  CHECK_FALSE(locate_step(idx, p0, trace::Step::merge).found());
  CHECK(locate_step(idx, p0, trace::Step::merge).block == -1);
  CHECK(locate_step(idx, -1, trace::Step::max_reduce).block == red);
  CHECK(locate_step(idx, 99, trace::Step::max_reduce).block == red);
  CHECK_FALSE(locate_step(TraceIndex{}, 0, trace::Step::k_load).found());
  // With a role (a marker's block=...): only blocks of that kind, even when
  // the shown block has the step. Block -3 is the merge kernel's.
  CHECK(locate_step(idx, other, trace::Step::partition_reduce, BlockRole::reduce).block == red);
  CHECK(locate_step(idx, red, trace::Step::partition_reduce, BlockRole::merge).block == other);
  CHECK(locate_step(idx, red, trace::Step::k_load, BlockRole::main).block == p0);
  CHECK(locate_step(idx, p1, trace::Step::k_load, BlockRole::main).block == p1);
  CHECK_FALSE(locate_step(idx, p0, trace::Step::k_load, BlockRole::reduce).found());
  CHECK_FALSE(locate_step(idx, p0, trace::Step::partition_reduce, BlockRole::prefix).found());
}

namespace {
// The trace lesson N's host model shows at start: its default problem and the
// selected block (seq 0, head 0, partition 0), as the viewer's loader builds them.
struct LessonTrace {
  ProblemSpec spec;
  std::vector<Event> events;
  TraceIndex index;
  int shown = -1;
};
LessonTrace lesson_trace(trace::Stage stage, const ProblemSpec& start = {}) {
  LessonTrace t;
  t.spec = lesson_problem(start, stage, 0).spec;
  t.events = trace::model_events(t.spec, stage, viewer_selection(t.spec, stage, 0, 0, 0));
  t.index = TraceIndex(t.events, Granularity::instruction);
  t.shown = std::max(0, t.index.find_block({0, 0, 0}));
  return t;
}
}  // namespace

TEST_CASE("lessons 6, 7 and 8: every marker button reaches its step, some only in another block", "[viewer][replay][lesson]") {
  for (const auto& [number, stage] : {std::pair{6, trace::Stage::v2_partition}, std::pair{7, trace::Stage::cascade_merge},
                                      std::pair{8, trace::Stage::optimized}}) {
    if (!trace::stage_is_modelled(stage)) continue;
    INFO("lesson " << number);
    std::string path;
    for (const auto& e : lesson::list_lessons(PA_LESSONS_DIR))
      if (e.number == number) path = e.path;
    REQUIRE_FALSE(path.empty());
    const lesson::Document doc = lesson::load_lesson(path);
    // ALiBi's and fp8's steps are in a trace of a problem with slopes or an
    // fp8 cache only: the viewer's marker button gives the problem those
    // first (problem_with_step, lesson_panel.cpp).
    const LessonTrace plain = lesson_trace(stage);
    REQUIRE(plain.index.num_blocks() > 1);
    std::map<trace::Step, LessonTrace> changed;
    int elsewhere = 0, markers = 0;
    for (const auto& m : doc.markers()) {
      if (m.marker->stage != stage) continue;
      ++markers;
      INFO("marker step=" << m.marker->step_name << " (line " << m.marker->line << ")");
      const auto needs = problem_with_step(ProblemSpec{}, m.marker->step, stage);
      if (needs) {
        CHECK_FALSE(locate_step(plain.index, plain.shown, m.marker->step, m.marker->block).found());
        if (!changed.count(m.marker->step)) changed.emplace(m.marker->step, lesson_trace(stage, *needs));
      }
      const LessonTrace& t = needs ? changed.at(m.marker->step) : plain;
      const StepLocation at = locate_step(t.index, t.shown, m.marker->step, m.marker->block);
      CHECK(at.found());
      if (!at.found()) continue;
      CHECK(t.index.steps(at.block)[at.step].step == m.marker->step);
      // A marker that names its kernel lands in a block of that kernel.
      if (m.marker->block) CHECK(block_role(t.index.block(at.block).partition) == *m.marker->block);
      const bool shown_fits = !m.marker->block || block_role(t.index.block(t.shown).partition) == *m.marker->block;
      if (!shown_fits || t.index.find_step(t.shown, m.marker->step) < 0) {
        ++elsewhere;
        CHECK(at.block != t.shown);
      } else {
        CHECK(at.block == t.shown);
      }
    }
    CHECK(markers > 0);
    // Lesson 6: partition_reduce is only in the reduce block (max_reduce and
    // exp_sum_reduce are in the partition block too: its softmax); lesson 7:
    // merge is only in the merge block; lesson 8: merge is only in the split
    // that arrives last (the viewer traces it beside split 0).
    CHECK(elsewhere > 0);
  }
}

TEST_CASE("lesson problems: 6 has several partitions and a partition_reduce, 8 a GQA group", "[viewer][replay][lesson]") {
  const ProblemSpec def;
  // Lesson 6: the default problem (one 100-token sequence) has one partition:
  // its reduce block does nothing. The lesson's problem: 1100 tokens, 3 partitions of 512.
  {
    const LessonProblem lp = lesson_problem(def, trace::Stage::v2_partition, 0);
    CHECK(lp.changed);
    CHECK(lp.spec.context_lens == std::vector<int>{1100});
    CHECK(lp.spec.partition_size == 512);
    CHECK(num_partitions(lp.spec.context_lens[0], lp.spec.partition_size) == 3);
    CHECK_NOTHROW(lp.spec.validate());
    if (trace::stage_is_modelled(trace::Stage::v2_partition)) {
      const LessonTrace t = lesson_trace(trace::Stage::v2_partition);
      const int reduce = t.index.find_block({0, 0, BlockLabel::kReduce});
      REQUIRE(reduce >= 0);
      CHECK(t.index.find_step(reduce, trace::Step::partition_reduce) >= 0);
      // The reduce reads the state of all 3 partitions (thread 0 reads part_max of each).
      int part_max_reads = 0;
      for (std::uint32_t i = 0; i < t.events.size(); ++i)
        if (t.index.block_of_event(i) == reduce && t.events[i].step == trace::Step::max_reduce &&
            t.events[i].tensor == trace::Tensor::part_max && t.events[i].op == trace::Op::global_load)
          ++part_max_reads;
      CHECK(part_max_reads == 3);
      // The shown block is the selected partition's, which still starts with its own steps.
      CHECK(t.index.block(t.shown).partition == 0);
    }
  }
  // Already several partitions: kept. Another selected sequence: that one gets them.
  {
    ProblemSpec p = def;
    p.context_lens = {600};
    CHECK_FALSE(lesson_problem(p, trace::Stage::v2_partition, 0).changed);
    p.context_lens = {100, 1100};
    CHECK_FALSE(lesson_problem(p, trace::Stage::v2_partition, 1).changed);
    CHECK(lesson_problem(p, trace::Stage::v2_partition, 0).spec.context_lens == std::vector<int>{1100, 1100});
    CHECK(lesson_problem(p, trace::Stage::v2_partition, 7).spec.context_lens == p.context_lens);  // clamped to seq 1
    p = def;
    p.partition_size = 0;  // one partition by definition
    CHECK(lesson_problem(p, trace::Stage::v2_partition, 0).spec.partition_size == 512);
  }
  // The command line's values are kept: a fixed context gets a smaller partition size instead.
  {
    LessonProblemLocks ctx;
    ctx.context = true;
    const LessonProblem lp = lesson_problem(def, trace::Stage::v2_partition, 0, ctx);
    CHECK(lp.spec.context_lens == def.context_lens);
    CHECK(lp.spec.partition_size % lp.spec.block_size == 0);
    CHECK(num_partitions(100, lp.spec.partition_size) >= 3);
    CHECK_NOTHROW(lp.spec.validate());
    LessonProblemLocks both = ctx;
    both.partition_size = true;
    CHECK_FALSE(lesson_problem(def, trace::Stage::v2_partition, 0, both).changed);
  }
  // Lesson 8: 8 heads / 8 KV heads has no group; the lesson's 8 / 2 and 600 tokens.
  {
    const LessonProblem lp = lesson_problem(def, trace::Stage::optimized, 0);
    CHECK(lp.changed);
    CHECK(lp.spec.num_heads == 8);
    CHECK(lp.spec.num_kv_heads == 2);
    CHECK(lp.spec.num_heads > lp.spec.num_kv_heads);
    CHECK(lp.spec.context_lens == std::vector<int>{600});
    CHECK_NOTHROW(lp.spec.validate());
    if (trace::stage_is_modelled(trace::Stage::optimized)) {
      CHECK(trace::optimized_model_plan(lp.spec).group == 4);
      const LessonTrace t = lesson_trace(trace::Stage::optimized);
      CHECK(t.spec.num_heads > t.spec.num_kv_heads);
      CHECK(t.index.find_step(t.shown, trace::Step::q_load) >= 0);
    }
    ProblemSpec p = def;
    p.num_heads = p.num_kv_heads = 32;
    CHECK(lesson_problem(p, trace::Stage::optimized, 0).spec.num_kv_heads == 8);
    p.num_heads = p.num_kv_heads = 2;
    CHECK(lesson_problem(p, trace::Stage::optimized, 0).spec.num_heads == 8);
    p = def;
    p.num_kv_heads = 4;  // GQA already, and a context of its own: kept
    p.context_lens = {300};
    CHECK_FALSE(lesson_problem(p, trace::Stage::optimized, 0).changed);
    LessonProblemLocks heads;
    heads.heads = true;
    heads.context = true;
    CHECK_FALSE(lesson_problem(def, trace::Stage::optimized, 0, heads).changed);
  }
  // Lesson 7 as before: two sequences and a shared prefix of 4 blocks; unless --prefix was given.
  {
    const LessonProblem lp = lesson_problem(def, trace::Stage::cascade_merge, 0);
    CHECK(lp.changed);
    CHECK(lp.spec.context_lens == std::vector<int>{100, 140});
    CHECK(lp.spec.shared_prefix_len == 4 * def.block_size);
    LessonProblemLocks prefix;
    prefix.prefix = true;
    CHECK_FALSE(lesson_problem(def, trace::Stage::cascade_merge, 0, prefix).changed);
  }
  // The other stages open with the problem as it is.
  for (auto st : {trace::Stage::q_to_smem, trace::Stage::qk, trace::Stage::softmax, trace::Stage::lv, trace::Stage::warp_reduce})
    CHECK_FALSE(lesson_problem(def, st, 0).changed);
}
