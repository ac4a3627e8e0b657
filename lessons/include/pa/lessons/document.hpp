// A lesson as a document: a small Markdown subset parsed into sections of
// blocks of inline spans, which the viewer draws and the tests check.
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
#include <string>
#include <string_view>
#include <vector>

#include "pa/lessons/error.hpp"
#include "pa/lessons/markers.hpp"

namespace pa::lesson {

inline constexpr std::size_t kMaxLessonBytes = 4u << 20;  // 4 MiB: a lesson is ~20 KB

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

// ---- sections and the document ------------------------------------------------
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

}  // namespace pa::lesson
