// The marker syntax: the HTML comments that tie a lesson to the kernels.
// A step marker ties the next section to a stage, a trace step and a source
// anchor; an exercise marker turns the next paragraph into a question whose
// answer the viewer computes from the trace. Both name things by the enum
// names of pa/core/event.hpp and pa/index/events.hpp, so the name tables live
// here too. Parsing the comments is internal (src/marker_syntax.hpp); the
// Markdown parser calls it when it meets a `<!-- pa:... -->` comment.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pa/core/event.hpp"
#include "pa/index/events.hpp"

namespace pa::lesson {

// ---- step markers -------------------------------------------------------------
// <!-- pa:step stage=qk step=k_load anchor=qk.k_load [block=reduce] -->
// stage: a Stage name (q_to_smem qk softmax lv warp_reduce v2_partition
// cascade_merge optimized); step: a Step name (event.hpp); anchor: a source
// anchor name ([A-Za-z0-9_.-]+) marked LESSON-BEGIN/END in kernels/stages/*.cuh;
// block (optional): which of the stage's kernels the step belongs to, a
// BlockRole name (main reduce prefix_reduce merge prefix, pa/index/events.hpp)
// -- stages 6 and 7 trace several kernels that share step names.
struct StepMarker {
  pa::trace::Stage stage = pa::trace::Stage::q_to_smem;
  pa::trace::Step step = pa::trace::Step::q_load;
  std::string stage_name;  // as written
  std::string step_name;   // as written
  std::string anchor;
  std::optional<pa::BlockRole> block;  // nullopt: any block of the stage's trace
  int line = 0;            // 1-based line of the marker in the lesson file
};

// ---- exercises ----------------------------------------------------------------
// <!-- pa:exercise id=ID ask=WHAT [step=STEP] [block=ROLE] [op=OP] [tensor=TENSOR]
//      [select=KEY=N,KEY=N,...] -->
// followed by its question, a paragraph or a list item (blank lines between
// are allowed). The learner types a whole number; the viewer computes the
// answer from the loaded trace (viewer/core/exercise.hpp), so the lesson never
// writes it down and it cannot drift from the kernels.
//   id:     [A-Za-z0-9_.-]{1,64}, unique in the lesson
//   ask:    what the learner predicts (ExerciseAsk)
//   step:   the Step of the events the question is about (required except for
//           ask=physical_block with a token or logical_block: then the answer
//           is the problem's block table, as in lesson 0)
//   block:  which kernel's thread block (a BlockRole name, as in pa:step)
//   op, tensor: narrow the events (Op and Tensor names of event.hpp)
//   select: warp lane iter occurrence token dim seq head partition
//           logical_block, each a number >= 0 (occurrence: the k-th matching
//           event of each thread, counted from 0 in program order)
// ask=sectors and ask=wavefronts need select warp=W: a request is one warp's.
enum class ExerciseAsk {
  sectors,         // 32-byte sectors of one warp's global memory request
  wavefronts,      // shared-memory wavefronts of one warp's request
  lane,            // the lane of the thread that does it
  warp,            // the warp of the thread that does it
  byte_offset,     // Event::byte_offset of the access (from the tensor's base)
  physical_block,  // the physical KV block (an access's, or the block table's)
  token,           // the token of the access
  dim,             // the first head dimension of the access
  threads,         // how many distinct threads have matching events
  events,          // how many matching events there are
};
inline constexpr int kNumExerciseAsks = 10;

struct ExerciseSelect {
  std::optional<int> warp, lane, iter, occurrence, token, dim, seq, head, partition, logical_block;
  friend bool operator==(const ExerciseSelect&, const ExerciseSelect&) = default;
};

struct ExerciseMarker {
  std::string id;
  ExerciseAsk ask = ExerciseAsk::sectors;
  std::optional<pa::trace::Step> step;
  std::optional<pa::BlockRole> block;
  std::optional<pa::trace::Op> op;
  std::optional<pa::trace::Tensor> tensor;
  ExerciseSelect select;
  int line = 0;  // 1-based line of the marker in the lesson file
};

// ---- name tables --------------------------------------------------------------
// The names markers are written with (the enum names of event.hpp and
// events.hpp). nullopt for an unknown name; "?" for a value out of range.
std::optional<pa::trace::Stage> stage_from_name(std::string_view name);
std::optional<pa::trace::Step> step_from_name(std::string_view name);
const char* stage_name(pa::trace::Stage stage);
const char* step_name(pa::trace::Step step);
std::optional<pa::BlockRole> block_role_from_name(std::string_view name);
const char* block_role_name(pa::BlockRole role);
std::optional<pa::trace::Op> op_from_name(std::string_view name);
std::optional<pa::trace::Tensor> tensor_from_name(std::string_view name);
const char* op_name(pa::trace::Op op);
const char* tensor_name(pa::trace::Tensor tensor);
std::optional<ExerciseAsk> exercise_ask_from_name(std::string_view name);
const char* exercise_ask_name(ExerciseAsk ask);

// "KEY=VALUE,KEY=VALUE,...": the items in order, each split at its first '='
// (ok false for an item without one or with an empty key). The exercise
// markers' select= and the lesson-figure citations' filters read it.
struct KeyValue {
  std::string_view item, key, value;
  bool ok = false;
};
std::vector<KeyValue> split_key_values(std::string_view s);

}  // namespace pa::lesson
