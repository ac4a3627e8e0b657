// Which lesson section and source region a replay step shows
// (core/lesson_binding.hpp): by the step and the shown thread block's role,
// through the code the block runs; steps without a marker get the nearest
// marked step's region, flagged as enclosing. On hand-made markers and on
// every lesson's real markers and default host-model trace.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/lesson_binding.hpp"
#include "core/lesson_problem.hpp"
#include "core/trace_index.hpp"
#include "core/trace_load.hpp"
#include "pa/lessons/lesson.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;
using trace::Stage;
using trace::Step;

namespace {

LessonMarker marker(Stage stage, Step step, const std::string& anchor, int lesson,
                    std::optional<BlockRole> role = std::nullopt) {
  LessonMarker m;
  m.marker.stage = stage;
  m.marker.step = step;
  m.marker.anchor = anchor;
  m.marker.block = role;
  m.lesson = lesson;
  m.section = 1;
  return m;
}

const char* anchor_of(const LessonMarker* m) { return m ? m->marker.anchor.c_str() : "(none)"; }

std::vector<LessonMarker> all_lesson_markers() {
  std::vector<LessonMarker> out;
  for (const auto& e : lesson::list_lessons(PA_LESSONS_DIR))
    for (LessonMarker& m : lesson_markers(lesson::load_lesson(e.path), e.number)) out.push_back(std::move(m));
  return out;
}

// Lesson N's trace at start, as the viewer's loader builds it: the lesson's
// default problem, the selected block (seq 0, head 0, partition 0) and the
// blocks the model traces beside it.
struct LessonTrace {
  ProblemSpec spec;
  std::vector<trace::Event> events;
  TraceIndex index;
};
LessonTrace lesson_trace(Stage stage) {
  LessonTrace t;
  t.spec = lesson_problem(ProblemSpec{}, stage, 0).spec;
  t.events = trace::model_events(t.spec, stage, viewer_selection(t.spec, stage, 0, 0, 0));
  t.index = TraceIndex(t.events, Granularity::instruction);
  return t;
}

int block_with_role(const TraceIndex& index, BlockRole role) {
  for (int b = 0; b < index.num_blocks(); ++b)
    if (block_role(index.block(b).partition) == role) return b;
  return -1;
}

}  // namespace

TEST_CASE("code_lineage: a block runs its own kernel's code, then the stages it calls", "[viewer][lesson][binding]") {
  using L = std::vector<std::pair<Stage, BlockRole>>;
  const BlockRole main = BlockRole::main;
  CHECK(code_lineage(Stage::q_to_smem, main) == L{{Stage::q_to_smem, main}});
  CHECK(code_lineage(Stage::softmax, main) == L{{Stage::softmax, main}, {Stage::qk, main}, {Stage::q_to_smem, main}});
  CHECK(code_lineage(Stage::v2_partition, main) ==
        L{{Stage::v2_partition, main}, {Stage::warp_reduce, main}, {Stage::lv, main}, {Stage::softmax, main},
          {Stage::qk, main}, {Stage::q_to_smem, main}});
  CHECK(code_lineage(Stage::v2_partition, BlockRole::reduce) == L{{Stage::v2_partition, BlockRole::reduce}});
  // The cascade's suffix partitions are V2 partition blocks, its reduces V2 reduces.
  CHECK(code_lineage(Stage::cascade_merge, main) ==
        L{{Stage::cascade_merge, main}, {Stage::v2_partition, main}, {Stage::warp_reduce, main}, {Stage::lv, main},
          {Stage::softmax, main}, {Stage::qk, main}, {Stage::q_to_smem, main}});
  CHECK(code_lineage(Stage::cascade_merge, BlockRole::reduce) ==
        L{{Stage::cascade_merge, BlockRole::reduce}, {Stage::v2_partition, BlockRole::reduce}});
  CHECK(code_lineage(Stage::cascade_merge, BlockRole::prefix_reduce) ==
        L{{Stage::cascade_merge, BlockRole::prefix_reduce}, {Stage::v2_partition, BlockRole::reduce}});
  CHECK(code_lineage(Stage::cascade_merge, BlockRole::merge) == L{{Stage::cascade_merge, BlockRole::merge}});
  CHECK(code_lineage(Stage::cascade_merge, BlockRole::prefix) == L{{Stage::cascade_merge, BlockRole::prefix}});
  // Stage 8's kernel is its own code: no earlier stage's section describes it.
  CHECK(code_lineage(Stage::optimized, main) == L{{Stage::optimized, main}});
}

TEST_CASE("marker_of_step: role first within a stage, nearest stage of the lineage first", "[viewer][lesson][binding]") {
  const std::vector<LessonMarker> ms = {
      marker(Stage::softmax, Step::max_reduce, "softmax.max_reduce", 3),
      marker(Stage::v2_partition, Step::max_reduce, "v2.reduce_max", 6, BlockRole::reduce),
      marker(Stage::v2_partition, Step::k_load, "v2.any_k", 6),
      marker(Stage::v2_partition, Step::k_load, "v2.main_k", 6, BlockRole::main),
      marker(Stage::qk, Step::k_load, "qk.k_load", 2),
      marker(Stage::optimized, Step::max_reduce, "optimized.online_softmax", 8),
  };
  // A partition block's softmax is lesson 3's code, never the reduce's.
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::v2_partition, BlockRole::main, Step::max_reduce, 6))) ==
        "softmax.max_reduce");
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::v2_partition, BlockRole::reduce, Step::max_reduce, 6))) ==
        "v2.reduce_max");
  // block=main beats the marker without block= of the same stage, written first.
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::v2_partition, BlockRole::main, Step::k_load, 6))) ==
        "v2.main_k");
  // The reduce role has no k_load marker; the one without block= means any block.
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::v2_partition, BlockRole::reduce, Step::k_load, 6))) ==
        "v2.any_k");
  // Stage 6 is nearer than stage 2 in a suffix block's lineage, whatever lesson is shown.
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::cascade_merge, BlockRole::main, Step::k_load, 7))) ==
        "v2.main_k");
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::qk, BlockRole::main, Step::k_load, 2))) == "qk.k_load");
  // Stage 8 is its own code: lesson 3's softmax does not describe it.
  CHECK(std::string(anchor_of(marker_of_step(ms, Stage::optimized, BlockRole::main, Step::max_reduce, 8))) ==
        "optimized.online_softmax");
  CHECK(marker_of_step(ms, Stage::optimized, BlockRole::main, Step::k_load, 8) == nullptr);
  CHECK(marker_of_step(ms, Stage::cascade_merge, BlockRole::merge, Step::max_reduce, 7) == nullptr);
  // Two markers of equal rank: the lesson shown wins, else document order.
  const std::vector<LessonMarker> twins = {marker(Stage::qk, Step::qk_dot, "first", 2),
                                           marker(Stage::qk, Step::qk_dot, "second", 9)};
  CHECK(std::string(anchor_of(marker_of_step(twins, Stage::qk, BlockRole::main, Step::qk_dot, 9))) == "second");
  CHECK(std::string(anchor_of(marker_of_step(twins, Stage::qk, BlockRole::main, Step::qk_dot, 4))) == "first");
}

TEST_CASE("bind_step: a step without a marker shows the nearest marked step's region, flagged", "[viewer][lesson][binding]") {
  // One thread block: barrier, k_load, barrier, qk_dot (only k_load and qk_dot marked).
  std::vector<trace::Event> ev;
  auto add = [&](Step st, trace::Op op, int epoch, int seq_in_thread) {
    trace::Event e{};
    e.stage = Stage::qk;
    e.step = st;
    e.op = op;
    e.tensor = trace::Tensor::none;
    e.iter = -1;
    e.epoch = epoch;
    e.seq_in_thread = seq_in_thread;
    e.src_lane = -1;
    e.byte_offset = -1;
    ev.push_back(e);
  };
  add(Step::barrier, trace::Op::barrier, 0, 0);
  add(Step::k_load, trace::Op::compute, 1, 1);
  add(Step::barrier, trace::Op::barrier, 1, 2);
  add(Step::qk_dot, trace::Op::compute, 2, 3);
  const TraceIndex index(ev, Granularity::instruction);
  REQUIRE(index.num_steps(0) == 4);
  const std::vector<LessonMarker> ms = {marker(Stage::qk, Step::k_load, "qk.k_load", 2),
                                        marker(Stage::qk, Step::qk_dot, "qk.qk_dot", 2)};
  std::vector<Step> order;
  for (const ReplayStep& r : index.steps(0)) order.push_back(r.step);
  REQUIRE(order == std::vector<Step>{Step::barrier, Step::k_load, Step::barrier, Step::qk_dot});

  const StepBinding own = bind_step(ms, Stage::qk, index, 0, 1, 2);
  CHECK(std::string(anchor_of(own.marker)) == "qk.k_load");
  CHECK(own.marked_step == 1);
  CHECK_FALSE(own.enclosing);
  // The barrier after the K load: the K load's region, as the enclosing one.
  const StepBinding after = bind_step(ms, Stage::qk, index, 0, 2, 2);
  CHECK(std::string(anchor_of(after.marker)) == "qk.k_load");
  CHECK(after.marked_step == 1);
  CHECK(after.enclosing);
  // Before the first marked step: the next one's region.
  const StepBinding first = bind_step(ms, Stage::qk, index, 0, 0, 2);
  CHECK(std::string(anchor_of(first.marker)) == "qk.k_load");
  CHECK(first.marked_step == 1);
  CHECK(first.enclosing);
  // Out of range, or no marker for any step: nothing.
  CHECK(bind_step(ms, Stage::qk, index, 0, 4, 2).marker == nullptr);
  CHECK(bind_step({}, Stage::qk, index, 0, 1, 2).marker == nullptr);
}

TEST_CASE("lessons 6 and 7: text and source follow the shown block's kernel", "[viewer][lesson][binding]") {
  const std::vector<LessonMarker> ms = all_lesson_markers();
  REQUIRE(ms.size() >= 30);
  auto anchor_at = [&](const LessonTrace& t, Stage stage, int block, Step step, int lesson) -> std::string {
    const int k = t.index.find_step(block, step);
    if (k < 0) return "(no " + std::string(trace::to_string(step)) + " step)";
    const StepBinding b = bind_step(ms, stage, t.index, block, k, lesson);
    CHECK_FALSE(b.enclosing);
    return anchor_of(b.marker);
  };
  if (trace::stage_is_modelled(Stage::v2_partition)) {
    const LessonTrace t = lesson_trace(Stage::v2_partition);
    const int part = block_with_role(t.index, BlockRole::main), red = block_with_role(t.index, BlockRole::reduce);
    REQUIRE(part >= 0);
    REQUIRE(red >= 0);
    // The partition block's softmax is lesson 3's; the reduce's max is lesson 6's reduce.
    CHECK(anchor_at(t, Stage::v2_partition, part, Step::max_reduce, 6) == "softmax.max_reduce");
    CHECK(anchor_at(t, Stage::v2_partition, part, Step::exp_sum_reduce, 6) == "softmax.exp_sum_reduce");
    CHECK(anchor_at(t, Stage::v2_partition, part, Step::k_load, 6) == "v2_partition.range");
    CHECK(anchor_at(t, Stage::v2_partition, red, Step::max_reduce, 6) == "v2_partition.reduce_max");
    CHECK(anchor_at(t, Stage::v2_partition, red, Step::exp_sum_reduce, 6) == "v2_partition.reduce_weights");
    CHECK(anchor_at(t, Stage::v2_partition, red, Step::partition_reduce, 6) == "v2_partition.partition_reduce");
  }
  if (trace::stage_is_modelled(Stage::cascade_merge)) {
    const LessonTrace t = lesson_trace(Stage::cascade_merge);
    const int suffix = block_with_role(t.index, BlockRole::main), prefix = block_with_role(t.index, BlockRole::prefix);
    const int pre_red = block_with_role(t.index, BlockRole::prefix_reduce);
    const int merge = block_with_role(t.index, BlockRole::merge);
    REQUIRE(suffix >= 0);
    REQUIRE(prefix >= 0);
    REQUIRE(pre_red >= 0);
    REQUIRE(merge >= 0);
    // A suffix block runs the V2 partition kernel, not the prefix kernel's cp.async loads.
    CHECK(anchor_at(t, Stage::cascade_merge, suffix, Step::k_load, 7) == "v2_partition.range");
    CHECK(anchor_at(t, Stage::cascade_merge, suffix, Step::max_reduce, 7) == "softmax.max_reduce");
    CHECK(anchor_at(t, Stage::cascade_merge, prefix, Step::k_load, 7) == "cascade_merge.prefix_load");
    CHECK(anchor_at(t, Stage::cascade_merge, prefix, Step::qk_dot, 7) == "cascade_merge.prefix_qk");
    // The prefix's reduce is stage 6's reduce kernel.
    CHECK(anchor_at(t, Stage::cascade_merge, pre_red, Step::max_reduce, 7) == "v2_partition.reduce_max");
    CHECK(anchor_at(t, Stage::cascade_merge, pre_red, Step::partition_reduce, 7) == "v2_partition.partition_reduce");
    CHECK(anchor_at(t, Stage::cascade_merge, merge, Step::merge, 7) == "cascade_merge.merge");
  }
}

TEST_CASE("every lesson's trace: each step's binding fits its block, unmarked steps are enclosed", "[viewer][lesson][binding]") {
  const std::vector<LessonMarker> ms = all_lesson_markers();
  int traces = 0, own = 0, enclosed = 0, barriers = 0, unmarked_blocks = 0;
  for (int n = 1; n <= 8; ++n) {
    const Stage stage = static_cast<Stage>(n);
    if (!trace::stage_is_modelled(stage)) continue;
    INFO("lesson " << n);
    const LessonTrace t = lesson_trace(stage);
    ++traces;
    for (int b = 0; b < t.index.num_blocks(); ++b) {
      const BlockRole role = block_role(t.index.block(b).partition);
      const auto lineage = code_lineage(stage, role);
      int marked = 0;
      for (const ReplayStep& r : t.index.steps(b)) marked += marker_of_step(ms, stage, role, r.step, n) != nullptr;
      if (marked == 0) {
        // Lesson 7's suffix reduce: the suffix is one partition, so the
        // reduce kernel reads the partition count and returns. Nothing to bind.
        INFO("block " << describe_block(t.index.block(b), stage));
        CHECK(n == 7);
        CHECK(role == BlockRole::reduce);
        for (int k = 0; k < t.index.num_steps(b); ++k) CHECK(bind_step(ms, stage, t.index, b, k, n).marker == nullptr);
        ++unmarked_blocks;
        continue;
      }
      for (int k = 0; k < t.index.num_steps(b); ++k) {
        const Step step = t.index.steps(b)[k].step;
        const StepBinding bind = bind_step(ms, stage, t.index, b, k, n);
        INFO("block " << describe_block(t.index.block(b), stage) << " step " << k << " " << trace::to_string(step));
        REQUIRE(bind.marker != nullptr);
        const lesson::StepMarker& m = bind.marker->marker;
        // The marker belongs to the code this block runs, never to another kernel's.
        CHECK(std::any_of(lineage.begin(), lineage.end(), [&](const std::pair<Stage, BlockRole>& p) {
          return p.first == m.stage && (!m.block || *m.block == p.second);
        }));
        // Own: the marker is the step's; enclosing: another step's, which has its own.
        REQUIRE(bind.marked_step >= 0);
        REQUIRE(bind.marked_step < t.index.num_steps(b));
        CHECK(m.step == t.index.steps(b)[bind.marked_step].step);
        CHECK(bind.enclosing == (bind.marked_step != k));
        if (bind.enclosing) {
          CHECK(marker_of_step(ms, stage, role, step, n) == nullptr);
          CHECK_FALSE(bind_step(ms, stage, t.index, b, bind.marked_step, n).enclosing);
          ++enclosed;
        } else {
          CHECK(m.step == step);
          ++own;
        }
        if (step == Step::barrier) {
          CHECK(bind.enclosing);  // no lesson marks a barrier
          ++barriers;
        }
      }
    }
  }
  CHECK(traces == 8);
  CHECK(unmarked_blocks == 1);
  CHECK(own > 1500);
  CHECK(enclosed > 200);
  CHECK(barriers > 40);
}
