// Lessons: a small Markdown subset parsed into a document the viewer can draw
// (and tests can check), plus the step markers that tie a section to a stage,
// a trace step and a kernel source anchor.
//
// Plain C++ (no ImGui): CMake target `pa_lesson` (lessons/CMakeLists.txt).
// A target that needs it without the top-level `add_subdirectory(lessons)`:
//   if(NOT TARGET pa_lesson)
//     add_subdirectory(${PROJECT_SOURCE_DIR}/lessons ${PROJECT_BINARY_DIR}/lessons)
//   endif()
//
// The Markdown subset (what the lessons use; anything else is a paragraph):
//   # .. ###### ATX headings             -> a new Section
//   paragraphs (lines joined by a space)  -> Block::paragraph
//   - / * / + items, "1." / "1)" items    -> Block::bullet_item / numbered_item (indent = nesting)
//   ``` or ~~~ fenced code, info string   -> Block::code (language = first word of the info)
//   > quote lines                         -> Block::quote (inline spans, lines joined)
//   | a | b | tables (header, --- row)    -> Block::table
//   ---, ***, ___                         -> Block::rule
//   <details><summary>S</summary> ... </details>  -> Block::details (children = the
//                                            blocks inside, drawn collapsed; not nested)
//   <!-- pa:step stage=.. step=.. anchor=.. -->   -> StepMarker on the NEXT section
//   <!-- pa:exercise id=.. ask=.. ... -->          -> Block::exercise: a question the viewer
//     question (a paragraph or a list item)          checks against the trace (ExerciseMarker)
//   other <!-- comments --> (one or many lines)   -> dropped
// A numbered item interrupts a paragraph only when its number is 1, and an
// empty item never does (CommonMark): "16) hold rows" on a line that
// continues a sentence stays in the paragraph.
// Inline: `code`, **strong** / __strong__, *emphasis* / _emphasis_, [text](url),
// ![alt](url) (as a link span), backslash escapes. Spans do not nest: text
// inside **...** is strong plain text.
//
// Robustness: parse_lesson never crashes and never loops forever on any
// input (fuzzed: tests/lessons, lessons/FUZZING.md); inputs over
// kMaxLessonBytes are rejected with a LessonError; memory is linear in the input.
#pragma once
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pa/index/events.hpp"
#include "pa/core/event.hpp"

namespace pa::lesson {

inline constexpr std::size_t kMaxLessonBytes = 4u << 20;  // 4 MiB: a lesson is ~20 KB

// Every error names the file and 1-based line (line 0: the whole file).
// what() is "file:line: message".
class LessonError : public std::runtime_error {
 public:
  LessonError(std::string file, int line, const std::string& message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  std::string message_;
};

// ---- inline text --------------------------------------------------------------
enum class SpanKind { plain, emphasis, strong, code, link };

struct Span {
  SpanKind kind = SpanKind::plain;
  std::string text;  // the visible text (link: the link text)
  std::string url;   // link only
  friend bool operator==(const Span&, const Span&) = default;
};

// The visible text of spans, concatenated (no markup).
std::string plain_text(const std::vector<Span>& spans);

// ---- blocks -------------------------------------------------------------------
enum class BlockKind { paragraph, bullet_item, numbered_item, code, quote, table, rule, details, exercise };

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

struct Block {
  BlockKind kind = BlockKind::paragraph;
  int line = 0;                 // 1-based source line where the block starts
  std::vector<Span> spans;      // paragraph, list items, quote; details: the summary
  int indent = 0;               // list items: nesting level (0 = top; 2+ spaces or a tab per level)
  int number = 0;               // numbered items: the number written
  std::string language;         // code: first word of the info string ("" if none)
  std::string info;             // code: the whole info string (e.g. "text pa-config")
  std::string code;             // code: the lines, '\n'-terminated, verbatim
  std::vector<std::vector<std::vector<Span>>> rows;  // table: rows[0] = header, cells as spans
  std::vector<Block> children;  // details: the blocks inside (never details themselves);
                                // exercise: its question (one paragraph or list item)
  std::optional<ExerciseMarker> exercise;  // exercise only
};

// ---- markers and sections -----------------------------------------------------
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

struct Section {
  int level = 0;                    // 1..6; 0 = text before the first heading
  std::vector<Span> heading;        // empty for level 0
  int line = 0;                     // line of the heading (0 for the preamble)
  std::vector<StepMarker> markers;  // markers written before this heading (after the previous one)
  std::vector<Block> blocks;
};

struct Document {
  std::string file;               // as given to the parser (for messages)
  std::string title;              // plain text of the first level-1 heading ("" if none)
  std::vector<Section> sections;  // in order; a preamble section only if it has blocks

  // Markers in document order, with the index of the section each belongs to.
  struct MarkerRef {
    const StepMarker* marker;
    std::size_t section;
  };
  std::vector<MarkerRef> markers() const;
  // Exercise blocks in document order (those inside <details> too).
  std::vector<const Block*> exercises() const;
};

// Parse Markdown text. file names the source in messages. Throws LessonError on
// a malformed pa: marker (unknown key, stage or step, missing field, unclosed
// comment, step marker with no heading after it, exercise with no question
// after it or an id used twice) or an input over kMaxLessonBytes.
Document parse_lesson(std::string_view text, const std::string& file = "<text>");
// Read and parse a file; LessonError (line 0) if it cannot be read.
Document load_lesson(const std::string& path);

// Name tables (the enum names of event.hpp). nullopt for an unknown name.
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

// ---- the lesson list ----------------------------------------------------------
struct LessonEntry {
  int number = 0;     // from the file name "NN_name.md"
  std::string path;   // full path
  std::string slug;   // "paged_kv_cache" for 00_paged_kv_cache.md
};
// The files dir/NN_*.md (NN = two digits), sorted by number. Throws
// LessonError if dir cannot be read or two files share a number.
std::vector<LessonEntry> list_lessons(const std::string& dir);

// ---- source anchors -----------------------------------------------------------
// `// LESSON-BEGIN(name)` ... `// LESSON-END(name)` in kernel sources.
struct AnchorRange {
  std::string name;
  std::string file;   // path as given
  int begin_line = 0; // 1-based line of the LESSON-BEGIN comment
  int end_line = 0;   // 1-based line of the LESSON-END comment
  // The code lines between them are begin_line+1 .. end_line-1.
};
// All anchors of a source text. Throws LessonError (file:line) for an END
// without BEGIN, a BEGIN without END, a duplicate name or a malformed name.
// Anchors may nest or overlap; names are unique per file.
std::vector<AnchorRange> scan_anchors(std::string_view source, const std::string& file = "<source>");
// The named anchor in one file, nullopt if absent. Throws LessonError if the
// file cannot be read or its anchors are malformed.
std::optional<AnchorRange> find_anchor(const std::string& path, std::string_view name);
// The named anchor in the first file under dir (*.cuh, *.cu, *.hpp, *.h; not
// recursive; files in name order) that has it; nullopt if none has.
std::optional<AnchorRange> find_anchor_in_dir(const std::string& dir, std::string_view name);

}  // namespace pa::lesson
