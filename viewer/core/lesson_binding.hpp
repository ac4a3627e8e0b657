// Which lesson section and which kernel source region belong to a replay step.
//
// A lesson marker (<!-- pa:step stage=S step=P anchor=A [block=ROLE] -->) ties
// a section to a Step of a stage and to the source lines that run it. Steps
// are not unique to one kernel: stages compose (the v2 partition kernel runs
// the QK, softmax and LV step functions of stages 2-4), and stages 6 and 7
// run several kernels whose steps share names (a partition block and the
// reduce block both have max_reduce steps, running different code). So a
// step is bound to a marker by what the shown thread block RUNS:
//
//   1. code_lineage(stage, role) lists the (stage, role) pairs whose code the
//      block executes, its own first, then the stages it calls into, nearest
//      first: stage 6's partition block (6, main), (5, main) ... (1, main);
//      stage 7's suffix reduce (7, reduce), (6, reduce); stage 8 only (8, main)
//      (its kernel is its own code).
//   2. The first pair of the lineage that has a marker for the step wins.
//      Within a pair, a marker whose block= names the role comes before a
//      marker without block= (which means "any block of that stage"); a marker
//      whose block= names another role never matches. Ties: the lesson shown
//      first, then document order.
//   3. A step that no marker describes (a barrier, a block-table load) is
//      shown with the region of the nearest marked step of the same thread
//      block, searching back (the code that led to it) and, for steps before
//      the first marked one, forward; the binding says it is such an
//      enclosing region, never the step's own.
#pragma once
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/trace_index.hpp"
#include "pa/lessons/lesson.hpp"
#include "pa/index/events.hpp"
#include "pa/core/event.hpp"

namespace pa::viewer {

// A lesson marker and where it is written.
struct LessonMarker {
  lesson::StepMarker marker;
  int lesson = 0;        // NN of lessons/NN_name.md
  int section = -1;      // index into that lesson's Document::sections
  std::string heading;   // that section's heading, plain text ("" for a preamble)
};

// Every marker of a parsed lesson, in document order.
std::vector<LessonMarker> lesson_markers(const lesson::Document& doc, int lesson_number);

// The (stage, role) pairs whose code a thread block of `role` in a `stage`
// trace runs, its own kernel first (see the file comment). Never empty.
std::vector<std::pair<trace::Stage, BlockRole>> code_lineage(trace::Stage stage, BlockRole role);

// The marker describing `step` for a block of (stage, role); nullptr if none.
// prefer_lesson breaks ties (the lesson shown).
const LessonMarker* marker_of_step(std::span<const LessonMarker> markers, trace::Stage stage, BlockRole role,
                                   trace::Step step, int prefer_lesson);

struct StepBinding {
  const LessonMarker* marker = nullptr;  // nullptr: no step of the block has a marker
  int marked_step = -1;                  // the replay step the marker belongs to
  bool enclosing = false;                // true: the step has no marker of its own (rule 3)
};

// The binding of replay step `step` of block `block` (rules 1-3). The role
// comes from the block's label (pa::block_role).
StepBinding bind_step(std::span<const LessonMarker> markers, trace::Stage stage, const TraceIndex& index, int block,
                      int step, int prefer_lesson);

}  // namespace pa::viewer
