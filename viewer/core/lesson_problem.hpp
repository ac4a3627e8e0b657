// The problem a lesson's host-model trace opens with. Lessons build on the
// problem shown (the Problem tab's, or the command line's), changed only
// where the lesson's stage would otherwise have nothing to show, to the
// configuration the lesson's "What to watch in the viewer" names:
//   cascade_merge (lesson 7): a shared prefix (4 KV blocks, or less so that
//     every sequence keeps a suffix token); two sequences {100, 140} if there
//     is only one.
//   v2_partition (lesson 6): the selected sequence gets at least 3
//     partitions, so the reduce block has a partition_reduce step: a context
//     of 2 * partition_size + 76 (1100 tokens with the default 512: lesson 6's
//     "3 partitions: tokens 0-511, 512-1023 and 1024-1099"); partition size
//     512 if it was 0 (one partition); if the context is fixed, a smaller
//     partition size (a multiple of the block size) instead.
//   optimized (lesson 8): a GQA group (8 heads / 2 KV heads, or num_heads / 4
//     KV heads), and the lesson's context of 600 tokens if the context is still
//     the built-in default {100}.
// Other stages: the problem unchanged. Values given on the command line are
// never changed (locks).
//
// Lesson 0 (the paged KV cache itself, shown through the QK stage that reads
// it) has a problem of its own: three sequences of 100, 37 and 130 tokens
// (7, 3 and 9 blocks of 16; every last block partly filled), so the block
// tables of several sequences, their shuffled physical blocks and the slots
// past each context are on screen. It opens at the first load from the block
// table (not the context-length load before it), on the Paged KV cache tab.
#pragma once
#include <optional>
#include <vector>

#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"

namespace pa::viewer {

// Problem values the user fixed (pa-viewer --context / --heads / --kv-heads /
// --partition-size / --prefix): a lesson's default never overrides them.
struct LessonProblemLocks {
  bool context = false, heads = false, partition_size = false, prefix = false;
};

struct LessonProblem {
  ProblemSpec spec;
  bool changed = false;  // spec differs from the problem given: regenerate the trace
};

// sel_seq: the sequence whose thread block the host model traces (clamped).
LessonProblem lesson_problem(const ProblemSpec& current, trace::Stage stage, int sel_seq,
                             const LessonProblemLocks& locks = {});

// Lesson 0's contexts, and the problem a lesson opens with: lesson 0's own
// (when the context is still the built-in default and not locked), lesson
// 9's (its stage's, on an HND cache), else its stage's (lesson_problem).
inline const std::vector<int> kLesson0Contexts = {100, 37, 130};
// Lesson 9 (KV layouts and page tables) opens on an HND cache.
inline constexpr int kLayoutsLesson = 9;
LessonProblem lesson_problem_of(int lesson, const ProblemSpec& current, trace::Stage stage, int sel_seq,
                                const LessonProblemLocks& locks = {});

// The problem changed so that the stage's trace has a step that only some
// problems have: alibi_bias needs ALiBi slopes; dequant an fp8 cache
// (fp8_e4m3, with fp16 queries if they were fp32); q_scale (stage 8 only)
// bf16 queries with an fp8 cache (the problem's, else fp8_e4m3). nullopt for any other
// step, for a problem that has it already, and where the stage cannot trace
// it (kv_cache_refusal, core/trace_load.hpp). A lesson's marker button for
// such a step asks for this problem when the trace shown lacks the step.
std::optional<ProblemSpec> problem_with_step(const ProblemSpec& spec, trace::Step step, trace::Stage stage);
// What problem_with_step changed, for the button's tooltip: "give it ALiBi
// slopes (...)", "store the KV cache in fp8_e4m3 (...)", "make the queries
// bf16 (...)", joined by " and "; "" when nothing differs in those fields.
std::string describe_step_change(const ProblemSpec& from, const ProblemSpec& to);

// Where a lesson opens, besides its first step: the tab to show ("" none;
// names as pa-viewer --tab) and the step to jump to: the shown block's first
// step of that Step whose events access that tensor (nullopt: step 0).
struct LessonOpening {
  const char* tab = "";
  std::optional<trace::Step> step;
  trace::Tensor tensor = trace::Tensor::none;  // none: any
};
LessonOpening lesson_opening(int lesson, trace::Stage stage);

}  // namespace pa::viewer
