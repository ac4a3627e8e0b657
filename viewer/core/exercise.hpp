// Exercises that check themselves: the answer to a lesson's pa:exercise
// (pa/lessons/markers.hpp), computed from the loaded trace by the analyses
// the panels draw (pa::trace::memory_requests for sectors and wavefronts), or
// from the problem's block tables. The lesson never writes the answer down,
// so it follows the kernels and whatever problem the learner has loaded.
//
// Which events an exercise is about: those of its step, narrowed by its
// block role, op, tensor and select keys (warp, lane, iter, token, dim
// covered, seq, head, partition label, logical block); with occurrence=K only
// each thread's K-th such event in program order; then only the first thread
// block of the trace (in trace order) that has any. ask=sectors keeps global
// memory ops and ask=wavefronts shared ones when no op is given.
//
// The answer must be unique: if the events disagree (two lanes touch the
// element, two requests match), the exercise is ill-posed for this trace and
// solve_exercise says so instead of picking one.
//
// Plain C++, no window (pa_viewer_core): tests/viewer resolve every lesson's
// exercises against that lesson's default problem.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "pa/lessons/lesson.hpp"
#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"

namespace pa::viewer {

struct ExerciseAnswer {
  bool ok = false;
  std::int64_t value = 0;
  std::string error;  // !ok: why this trace cannot answer, naming what it lacks
  // Where the answer can be seen (the hint and "Show me"):
  std::vector<std::uint32_t> events;  // the events it comes from (indices into the events given)
  int seq = 0, head = 0, partition = 0;  // their thread block (Event::partition label)
  int warp = -1, lane = -1;              // a thread to select; lane -1: the whole warp
  bool from_table = false;               // from the block table (no trace events)
  int table_seq = 0, logical_block = -1;
};

ExerciseAnswer solve_exercise(const lesson::ExerciseMarker& ex, std::span<const trace::Event> events,
                              const ProblemSpec& spec, const std::vector<std::vector<int>>& tables);

// A learner's typed answer: a whole number, decimal or 0x hex, spaces around
// it ignored. nullopt for anything else (empty included).
std::optional<std::int64_t> parse_typed_answer(std::string_view typed);

enum class Verdict { empty, not_a_number, right, wrong, unanswerable };
Verdict check_answer(std::string_view typed, const ExerciseAnswer& answer);

// The answer with its unit, "8 sectors", "lane 7", "byte offset 22811".
std::string describe_answer(lesson::ExerciseAsk ask, std::int64_t value);
// Where to look after a wrong answer: the tab and selection that show it,
// never the number. Names the thread and step of `answer` when it has them.
std::string exercise_hint(const lesson::ExerciseMarker& ex, const ExerciseAnswer& answer);
// The tab that shows the answer (a --tab name: requests kv shared inspect).
const char* exercise_tab(const lesson::ExerciseMarker& ex);

}  // namespace pa::viewer
