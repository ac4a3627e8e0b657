// Parsing specifics: the exact structure for small inputs, marker errors with
// file:line, the lesson list and source anchors.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>

#include "pa/lessons/lesson.hpp"

using namespace pa::lesson;
using Catch::Matchers::ContainsSubstring;
using pa::trace::Stage;
using pa::trace::Step;

namespace {
Span plain(std::string t) { return {SpanKind::plain, std::move(t), {}}; }
Span em(std::string t) { return {SpanKind::emphasis, std::move(t), {}}; }
Span strong(std::string t) { return {SpanKind::strong, std::move(t), {}}; }
Span code(std::string t) { return {SpanKind::code, std::move(t), {}}; }
Span link(std::string t, std::string u) { return {SpanKind::link, std::move(t), std::move(u)}; }

std::vector<Span> spans_of(const std::string& md) {
  auto d = parse_lesson(md);
  REQUIRE(d.sections.size() == 1);
  REQUIRE(d.sections[0].blocks.size() == 1);
  return d.sections[0].blocks[0].spans;
}

// The message of the LessonError that parsing md throws ("" if none).
std::string error_of(const std::string& md, int* line = nullptr) {
  try {
    parse_lesson(md, "t.md");
  } catch (const LessonError& e) {
    if (line) *line = e.line();
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("headings make sections; the first level-1 heading is the title", "[lesson]") {
  auto d = parse_lesson("intro text\n# Title *one*\n\n## Sub ##\npara\n####### not a heading\n#nospace\n");
  REQUIRE(d.title == "Title one");
  REQUIRE(d.sections.size() == 3);
  CHECK(d.sections[0].level == 0);
  CHECK(d.sections[0].blocks.size() == 1);
  CHECK(d.sections[1].level == 1);
  CHECK(d.sections[1].line == 2);
  CHECK(d.sections[1].heading == std::vector<Span>{plain("Title "), em("one")});
  CHECK(d.sections[1].blocks.empty());
  CHECK(d.sections[2].level == 2);
  CHECK(plain_text(d.sections[2].heading) == "Sub");
  REQUIRE(d.sections[2].blocks.size() == 1);
  // Lines joined with a space; 7 #'s and "#nospace" are paragraph text.
  CHECK(plain_text(d.sections[2].blocks[0].spans) == "para ####### not a heading #nospace");
  CHECK(d.sections[2].blocks[0].line == 5);
}

TEST_CASE("no preamble section when the text starts with a heading", "[lesson]") {
  auto d = parse_lesson("\n\n# A\nx\n");
  REQUIRE(d.sections.size() == 1);
  CHECK(d.sections[0].level == 1);
  CHECK(parse_lesson("").sections.empty());
  CHECK(parse_lesson("").title.empty());
}

TEST_CASE("inline spans", "[lesson]") {
  CHECK(spans_of("a *b* **c** `d` [e](http://x) f") ==
        std::vector<Span>{plain("a "), em("b"), plain(" "), strong("c"), plain(" "), code("d"), plain(" "),
                          link("e", "http://x"), plain(" f")});
  CHECK(spans_of("__s__ and _e_") == std::vector<Span>{strong("s"), plain(" and "), em("e")});
  // snake_case identifiers stay plain; so do lone or spaced markers.
  CHECK(spans_of("num_kv_heads and head_size") == std::vector<Span>{plain("num_kv_heads and head_size")});
  CHECK(spans_of("a * b * c") == std::vector<Span>{plain("a * b * c")});
  CHECK(spans_of("2 ** 10") == std::vector<Span>{plain("2 ** 10")});
  CHECK(spans_of("*unclosed") == std::vector<Span>{plain("*unclosed")});
  // Code spans: literal content, double backticks may hold one.
  CHECK(spans_of("`a*b*c`") == std::vector<Span>{code("a*b*c")});
  CHECK(spans_of("`` a`b ``") == std::vector<Span>{code("a`b")});
  CHECK(spans_of("`open") == std::vector<Span>{plain("`open")});
  // Escapes.
  CHECK(spans_of("\\*not em\\* \\` \\[x](y)") == std::vector<Span>{plain("*not em* ` [x](y)")});
  // Images become link spans with the alt text; a bracket without (url) is text.
  CHECK(spans_of("![alt](p.png) [x] y") == std::vector<Span>{link("alt", "p.png"), plain(" [x] y")});
}

TEST_CASE("lists", "[lesson]") {
  auto d = parse_lesson("- one\n  more\n* two\n  - nested\n1. first\n12) twelfth\n-notitem\n");
  auto& b = d.sections.at(0).blocks;
  REQUIRE(b.size() == 5);
  CHECK(b[0].kind == BlockKind::bullet_item);
  CHECK(plain_text(b[0].spans) == "one more");
  CHECK(b[0].indent == 0);
  CHECK(b[1].kind == BlockKind::bullet_item);
  CHECK(plain_text(b[1].spans) == "two");
  CHECK(b[2].indent == 1);
  CHECK(plain_text(b[2].spans) == "nested");
  CHECK(b[3].kind == BlockKind::numbered_item);
  CHECK(b[3].number == 1);
  CHECK(b[4].kind == BlockKind::numbered_item);
  CHECK(b[4].number == 12);
  CHECK(plain_text(b[4].spans) == "twelfth -notitem");
}

// CommonMark: only a list item numbered 1 (and not empty) may interrupt a
// paragraph, so a number that a wrapped sentence happens to start a line
// with stays running text; inside a list any item starts the next one.
TEST_CASE("a number starting a wrapped paragraph line is not a list item", "[lesson]") {
  auto d = parse_lesson("Only the row owners (the even lanes, for block size\n16) hold rows, 8 each.\n");
  auto& b = d.sections.at(0).blocks;
  REQUIRE(b.size() == 1);
  CHECK(b[0].kind == BlockKind::paragraph);
  CHECK(plain_text(b[0].spans) == "Only the row owners (the even lanes, for block size 16) hold rows, 8 each.");

  // "2." and "16." continue the paragraph too; an empty item never interrupts one.
  auto d2 = parse_lesson("steps\n2. is text\nand\n16.\nend\n");
  REQUIRE(d2.sections.at(0).blocks.size() == 1);
  CHECK(plain_text(d2.sections[0].blocks[0].spans) == "steps 2. is text and 16. end");

  // "1." and bullets do start a list after a paragraph line; then "2." is the next item.
  auto d3 = parse_lesson("intro\n1. one\n2. two\n16) sixteen\nmore\n- bullet\n");
  auto& b3 = d3.sections.at(0).blocks;
  REQUIRE(b3.size() == 5);
  CHECK(b3[0].kind == BlockKind::paragraph);
  CHECK(plain_text(b3[0].spans) == "intro");
  CHECK(b3[1].number == 1);
  CHECK(b3[2].number == 2);
  CHECK(b3[3].kind == BlockKind::numbered_item);
  CHECK(b3[3].number == 16);
  CHECK(plain_text(b3[3].spans) == "sixteen more");
  CHECK(b3[4].kind == BlockKind::bullet_item);

  // After a blank line any number starts a list.
  auto d4 = parse_lesson("text\n\n16) item\n");
  REQUIRE(d4.sections.at(0).blocks.size() == 2);
  CHECK(d4.sections[0].blocks[1].kind == BlockKind::numbered_item);
  CHECK(d4.sections[0].blocks[1].number == 16);
}

TEST_CASE("fenced code blocks", "[lesson]") {
  auto d = parse_lesson("```cpp extra\nint a;\n  *x*\n```\n~~~~\n```\nstill code\n~~~~\n```\nunclosed\n");
  auto& b = d.sections.at(0).blocks;
  REQUIRE(b.size() == 3);
  CHECK(b[0].kind == BlockKind::code);
  CHECK(b[0].language == "cpp");
  CHECK(b[0].info == "cpp extra");
  CHECK(b[0].code == "int a;\n  *x*\n");
  CHECK(b[1].language.empty());
  CHECK(b[1].code == "```\nstill code\n");
  CHECK(b[2].code == "unclosed\n");
  // An indented fence strips its own indentation from the lines.
  auto d2 = parse_lesson("   ```\n   a\n     b\n   ```\n");
  CHECK(d2.sections.at(0).blocks.at(0).code == "a\n  b\n");
}

TEST_CASE("quotes, rules, tables", "[lesson]") {
  auto d = parse_lesson("> a *b*\n> c\n\n---\n| h1 | `h|2` |\n|---|:-:|\n| 1 | 2 |\n|3\n");
  auto& b = d.sections.at(0).blocks;
  REQUIRE(b.size() == 3);
  CHECK(b[0].kind == BlockKind::quote);
  CHECK(b[0].spans == std::vector<Span>{plain("a "), em("b"), plain(" c")});
  CHECK(b[1].kind == BlockKind::rule);
  CHECK(b[2].kind == BlockKind::table);
  REQUIRE(b[2].rows.size() == 3);
  // A '|' splits cells even inside backticks (kept simple): 3 header cells.
  CHECK(b[2].rows[0].size() == 3);
  CHECK(plain_text(b[2].rows[0][0]) == "h1");
  CHECK(b[2].rows[1].size() == 2);
  CHECK(plain_text(b[2].rows[1][1]) == "2");
  CHECK(b[2].rows[2].size() == 1);
}

TEST_CASE("details blocks hold their children", "[lesson]") {
  auto d = parse_lesson("text\n<details><summary>Answer *1*</summary>\n\nIt is `8`.\n\n- x\n</details>\nafter\n");
  auto& b = d.sections.at(0).blocks;
  REQUIRE(b.size() == 3);
  CHECK(b[1].kind == BlockKind::details);
  CHECK(b[1].spans == std::vector<Span>{plain("Answer "), em("1")});
  REQUIRE(b[1].children.size() == 2);
  CHECK(b[1].children[0].spans == std::vector<Span>{plain("It is "), code("8"), plain(".")});
  CHECK(b[1].children[1].kind == BlockKind::bullet_item);
  CHECK(plain_text(b[2].spans) == "after");
  // Summary on its own line.
  auto d2 = parse_lesson("<details>\n<summary>S</summary>\nbody\n</details>\n");
  REQUIRE(d2.sections.at(0).blocks.size() == 1);
  CHECK(plain_text(d2.sections[0].blocks[0].spans) == "S");
  CHECK(d2.sections[0].blocks[0].children.size() == 1);
}

TEST_CASE("comments are dropped; markers attach to the next section", "[lesson]") {
  auto d = parse_lesson(
      "# L\n<!-- a plain\ncomment -->\ntext\n"
      "<!-- pa:step stage=qk step=k_load anchor=qk.k_load -->\n"
      "<!--   pa:step   anchor=\"qk.dot\" step=qk_dot stage=qk   -->\n\n"
      "## K loads\nbody\n",
      "l.md");
  REQUIRE(d.sections.size() == 2);
  CHECK(d.sections[0].markers.empty());
  REQUIRE(d.sections[0].blocks.size() == 1);
  CHECK(plain_text(d.sections[0].blocks[0].spans) == "text");
  auto& m = d.sections[1].markers;
  REQUIRE(m.size() == 2);
  CHECK(m[0].stage == Stage::qk);
  CHECK(m[0].step == Step::k_load);
  CHECK(m[0].stage_name == "qk");
  CHECK(m[0].step_name == "k_load");
  CHECK(m[0].anchor == "qk.k_load");
  CHECK(m[0].line == 5);
  CHECK(m[1].step == Step::qk_dot);
  CHECK(m[1].anchor == "qk.dot");
  CHECK(m[1].line == 6);
  auto refs = d.markers();
  REQUIRE(refs.size() == 2);
  CHECK(refs[0].section == 1);
  CHECK_FALSE(m[0].block);  // no block=: any of the stage's blocks
  // block=ROLE: which of the stage's kernels the step belongs to.
  auto r = parse_lesson("<!-- pa:step stage=v2_partition step=max_reduce anchor=a block=reduce -->\n# x\n"
                        "<!-- pa:step stage=cascade_merge step=k_load anchor=b block=prefix -->\n# y\n");
  REQUIRE(r.markers().size() == 2);
  CHECK(r.markers()[0].marker->block == pa::BlockRole::reduce);
  CHECK(r.markers()[1].marker->block == pa::BlockRole::prefix);
  for (int i = 0; i <= static_cast<int>(pa::BlockRole::prefix); ++i)
    CHECK(block_role_from_name(block_role_name(static_cast<pa::BlockRole>(i))) == static_cast<pa::BlockRole>(i));
  // A marker inside a code block is code.
  auto c = parse_lesson("```\n<!-- pa:step stage=bad -->\n```\n");
  CHECK(c.markers().empty());
}

TEST_CASE("malformed markers name file:line and what is accepted", "[lesson]") {
  int line = 0;
  CHECK_THAT(error_of("# a\n\n<!-- pa:step stage=qkk step=k_load anchor=a -->\n# b\n", &line),
             ContainsSubstring("t.md:3: pa:step: unknown stage 'qkk'") && ContainsSubstring("q_to_smem qk softmax"));
  CHECK(line == 3);
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=kload anchor=a -->\n# b\n"),
             ContainsSubstring("t.md:1: pa:step: unknown step 'kload'") && ContainsSubstring("k_load"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load -->\n# b\n"), ContainsSubstring("missing anchor"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk -->\n# b\n"), ContainsSubstring("missing step anchor"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor=a color=red -->\n# b\n"),
             ContainsSubstring("unknown key 'color'"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk stage=qk step=k_load anchor=a -->\n# b\n"),
             ContainsSubstring("'stage' given twice"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor -->\n# b\n"),
             ContainsSubstring("expected key=value, got 'anchor'"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor= -->\n# b\n"),
             ContainsSubstring("empty value for 'anchor'"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor=a/b -->\n# b\n"),
             ContainsSubstring("bad anchor name 'a/b'"));
  CHECK_THAT(error_of("<!-- pa:stop stage=qk -->\n# b\n"), ContainsSubstring("unknown lesson directive 'pa:stop'"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor=a block=reducer -->\n# b\n"),
             ContainsSubstring("unknown block 'reducer'") &&
                 ContainsSubstring("main reduce prefix_reduce merge prefix"));
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=k_load anchor=a block=merge block=merge -->\n# b\n"),
             ContainsSubstring("'block' given twice"));
  CHECK_THAT(error_of("x\n\n<!-- pa:step stage=qk step=k_load anchor=a\n# b\n", &line),
             ContainsSubstring("t.md:3: pa:step marker comment is not closed"));
  CHECK_THAT(error_of("# a\n<!-- pa:step stage=qk step=k_load anchor=a -->\ntext only\n", &line),
             ContainsSubstring("t.md:2: pa:step marker is not followed by a section heading"));
  // A step name that only the enum's sentinel has is not a step.
  CHECK_THAT(error_of("<!-- pa:step stage=qk step=count_ anchor=a -->\n# b\n"), ContainsSubstring("unknown step"));
}

TEST_CASE("name tables match the enums", "[lesson]") {
  for (int i = 0; i < static_cast<int>(Step::count_); ++i) {
    auto s = static_cast<Step>(i);
    CHECK(step_from_name(step_name(s)) == s);
  }
  for (int i = 1; i <= 8; ++i) {
    auto s = static_cast<Stage>(i);
    CHECK(stage_from_name(stage_name(s)) == s);
  }
  CHECK(step_from_name("k_load") == Step::k_load);
  CHECK(stage_from_name("cascade_merge") == Stage::cascade_merge);
  CHECK_FALSE(stage_from_name("").has_value());
}

TEST_CASE("oversized input is rejected, not parsed", "[lesson]") {
  std::string big(kMaxLessonBytes + 1, 'a');
  CHECK_THAT(error_of(big), ContainsSubstring("at most"));
}

TEST_CASE("source anchors", "[lesson]") {
  const std::string src =
      "line1\n"
      "  // LESSON-BEGIN(qk.k_load)\n"
      "  load();\n"
      "  // LESSON-BEGIN(qk.inner)\n"
      "  x;\n"
      "  // LESSON-END(qk.inner)\n"
      "  // LESSON-END(qk.k_load)\n";
  auto a = scan_anchors(src, "s.cuh");
  REQUIRE(a.size() == 2);
  CHECK(a[0].name == "qk.k_load");
  CHECK(a[0].begin_line == 2);
  CHECK(a[0].end_line == 7);
  CHECK(a[1].name == "qk.inner");
  CHECK(a[1].begin_line == 4);
  CHECK(a[1].end_line == 6);
  auto err = [](const std::string& s) {
    try {
      scan_anchors(s, "s.cuh");
    } catch (const LessonError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(err("// LESSON-END(a)\n"), ContainsSubstring("s.cuh:1: LESSON-END(a) without a LESSON-BEGIN"));
  CHECK_THAT(err("\n// LESSON-BEGIN(a)\n"), ContainsSubstring("s.cuh:2: LESSON-BEGIN(a) has no LESSON-END(a)"));
  CHECK_THAT(err("// LESSON-BEGIN(a)\n// LESSON-END(a)\n// LESSON-BEGIN(a)\n// LESSON-END(a)\n"),
             ContainsSubstring("s.cuh:3: anchor 'a' defined twice"));
  CHECK_THAT(err("// LESSON-BEGIN(a b)\n"), ContainsSubstring("bad name 'a b'"));
  CHECK_THAT(err("// LESSON-BEGIN(a\n"), ContainsSubstring("missing ')'"));

  // Files and directories.
  auto dir = std::filesystem::temp_directory_path() / "pa_lesson_anchor_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a_stage.cuh") << "// LESSON-BEGIN(x.one)\n// LESSON-END(x.one)\n";
  std::ofstream(dir / "b_stage.cuh") << "\n\n// LESSON-BEGIN(x.two)\nbody\n// LESSON-END(x.two)\n";
  std::ofstream(dir / "notes.txt") << "// LESSON-BEGIN(x.three)\n";
  auto two = find_anchor_in_dir(dir.string(), "x.two");
  REQUIRE(two.has_value());
  CHECK(two->begin_line == 3);
  CHECK(two->end_line == 5);
  CHECK_THAT(two->file, ContainsSubstring("b_stage.cuh"));
  CHECK_FALSE(find_anchor_in_dir(dir.string(), "x.three").has_value());
  CHECK_FALSE(find_anchor((dir / "a_stage.cuh").string(), "x.two").has_value());
  CHECK_THROWS_AS(find_anchor((dir / "missing.cuh").string(), "x"), LessonError);
  CHECK_THROWS_AS(find_anchor_in_dir((dir / "nodir").string(), "x"), LessonError);
  std::filesystem::remove_all(dir);
}

TEST_CASE("lesson list: NN_*.md sorted by number, duplicates rejected", "[lesson]") {
  auto dir = std::filesystem::temp_directory_path() / "pa_lesson_list_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* n : {"02_qk.md", "00_paged_kv_cache.md", "10_x.md", "1_bad.md", "03_x.txt", "README.md"})
    std::ofstream(dir / n) << "# t\n";
  auto l = list_lessons(dir.string());
  REQUIRE(l.size() == 3);
  CHECK(l[0].number == 0);
  CHECK(l[0].slug == "paged_kv_cache");
  CHECK(l[1].number == 2);
  CHECK(l[2].number == 10);
  std::ofstream(dir / "02_other.md") << "# t\n";
  CHECK_THROWS_WITH(list_lessons(dir.string()), ContainsSubstring("two lessons numbered 2"));
  CHECK_THROWS_AS(list_lessons((dir / "none").string()), LessonError);
  CHECK_THROWS_AS(load_lesson((dir / "none.md").string()), LessonError);
  CHECK_THROWS_AS(load_lesson(dir.string()), LessonError);
  std::filesystem::remove_all(dir);
}

// ---- exercises -----------------------------------------------------------------------
TEST_CASE("an exercise marker and its question make one exercise block", "[lesson][exercise]") {
  auto d = parse_lesson(
      "# L\n"                                                                                     // 1
      "<!-- pa:exercise id=k.sectors ask=sectors step=k_load block=main op=global_load\n"        // 2
      "     tensor=k_cache select=warp=1,iter=0,occurrence=2,token=5,dim=7,seq=0,head=3,partition=1,"
      "logical_block=4,lane=9 -->\n"                                                              // 3
      "\n"                                                                                        // 4
      "How many *sectors*\ndoes it touch?\n"                                                      // 5-6
      "\n"
      "<!-- pa:exercise id=t57 ask=physical_block select=token=57 -->\n"                          // 8
      "5. Which block?\n"                                                                         // 9
      "after\n");
  REQUIRE(d.sections.size() == 1);
  const auto& b = d.sections[0].blocks;
  REQUIRE(b.size() == 2);  // "after" continues the list item
  REQUIRE(b[0].kind == BlockKind::exercise);
  CHECK(b[0].line == 2);
  REQUIRE(b[0].exercise.has_value());
  const ExerciseMarker& m = *b[0].exercise;
  CHECK(m.id == "k.sectors");
  CHECK(m.ask == ExerciseAsk::sectors);
  CHECK(m.step == Step::k_load);
  CHECK(m.block == pa::BlockRole::main);
  CHECK(m.op == pa::trace::Op::global_load);
  CHECK(m.tensor == pa::trace::Tensor::k_cache);
  CHECK(m.line == 2);
  ExerciseSelect want;
  want.warp = 1;
  want.iter = 0;
  want.occurrence = 2;
  want.token = 5;
  want.dim = 7;
  want.seq = 0;
  want.head = 3;
  want.partition = 1;
  want.logical_block = 4;
  want.lane = 9;
  CHECK(m.select == want);
  REQUIRE(b[0].children.size() == 1);
  CHECK(b[0].children[0].kind == BlockKind::paragraph);
  CHECK(b[0].children[0].line == 5);
  CHECK(b[0].children[0].spans == std::vector<Span>{plain("How many "), em("sectors"), plain(" does it touch?")});
  // A list item is a question too, and the table lookup needs no step.
  REQUIRE(b[1].kind == BlockKind::exercise);
  CHECK(b[1].exercise->ask == ExerciseAsk::physical_block);
  CHECK_FALSE(b[1].exercise->step.has_value());
  CHECK(b[1].exercise->select.token == 57);
  REQUIRE(b[1].children.size() == 1);
  CHECK(b[1].children[0].kind == BlockKind::numbered_item);
  CHECK(plain_text(b[1].children[0].spans) == "Which block? after");
  CHECK(d.exercises().size() == 2);
}

TEST_CASE("exercises inside <details> and in several sections are all listed", "[lesson][exercise]") {
  auto d = parse_lesson(
      "# A\n<!-- pa:exercise id=a ask=lane step=k_load select=token=3 -->\nq1\n"
      "<details><summary>More</summary>\n\n<!-- pa:exercise id=b ask=threads step=logit_store -->\nq2\n"
      "</details>\n## B\n<!-- pa:exercise id=c ask=events step=q_load -->\n- q3\n");
  const auto ex = d.exercises();
  REQUIRE(ex.size() == 3);
  CHECK(ex[0]->exercise->id == "a");
  CHECK(ex[1]->exercise->id == "b");
  CHECK(plain_text(ex[1]->children.at(0).spans) == "q2");
  CHECK(ex[2]->exercise->id == "c");
  REQUIRE(d.sections.size() == 2);
  REQUIRE(d.sections[0].blocks.size() == 2);
  CHECK(d.sections[0].blocks[1].kind == BlockKind::details);
  CHECK(d.sections[0].blocks[1].children.at(0).kind == BlockKind::exercise);
}

TEST_CASE("malformed exercises name file:line and what is accepted", "[lesson][exercise]") {
  int line = 0;
  const std::string ok = " ask=lane step=k_load select=token=3";
  auto with = [](const std::string& body, const std::string& after = "q\n") {
    return "# a\n\n<!-- pa:exercise " + body + " -->\n" + after;
  };
  CHECK_THAT(error_of(with("id=x ask=bytes step=k_load"), &line),
             ContainsSubstring("t.md:3: pa:exercise: unknown ask 'bytes'") &&
                 ContainsSubstring("sectors wavefronts lane warp byte_offset physical_block token dim threads events"));
  CHECK(line == 3);
  CHECK_THAT(error_of(with("ask=lane step=k_load")), ContainsSubstring("missing id"));
  CHECK_THAT(error_of(with("id=x")), ContainsSubstring("missing ask") && ContainsSubstring("pa:exercise id=ID ask=WHAT"));
  CHECK_THAT(error_of(with("id=a/b" + ok)), ContainsSubstring("bad id 'a/b'"));
  CHECK_THAT(error_of(with("id=" + std::string(65, 'a') + ok)), ContainsSubstring("bad id"));
  CHECK_THAT(error_of(with("id=x id=y" + ok)), ContainsSubstring("'id' given twice"));
  CHECK_THAT(error_of(with("id=x" + ok + " color=red")),
             ContainsSubstring("unknown key 'color'") && ContainsSubstring("id ask step block op tensor select"));
  CHECK_THAT(error_of(with("id=x" + ok + " flag")), ContainsSubstring("expected key=value, got 'flag'"));
  CHECK_THAT(error_of(with("id=x ask=lane step=kload")), ContainsSubstring("unknown step 'kload'"));
  CHECK_THAT(error_of(with("id=x ask=lane step=count_")), ContainsSubstring("unknown step"));
  CHECK_THAT(error_of(with("id=x" + ok + " block=reducer")), ContainsSubstring("unknown block 'reducer'"));
  CHECK_THAT(error_of(with("id=x" + ok + " op=load")),
             ContainsSubstring("unknown op 'load'") && ContainsSubstring("global_load global_store"));
  CHECK_THAT(error_of(with("id=x" + ok + " tensor=kcache")),
             ContainsSubstring("unknown tensor 'kcache'") && ContainsSubstring("k_cache"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=")), ContainsSubstring("empty value for 'select'"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=wrap=1")),
             ContainsSubstring("unknown select key 'wrap'") && ContainsSubstring("warp lane iter occurrence"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=warp=1,warp=2")),
             ContainsSubstring("select key 'warp' given twice"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=warp=-1")),
             ContainsSubstring("select warp='-1' is not a whole number"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=warp=99999999999")), ContainsSubstring("not a whole number"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=warp")), ContainsSubstring("select item 'warp' is not KEY=N"));
  CHECK_THAT(error_of(with("id=x ask=lane step=k_load select=warp=1,")), ContainsSubstring("select item '' is not KEY=N"));
  // What each ask needs.
  CHECK_THAT(error_of(with("id=x ask=lane select=token=3")), ContainsSubstring("ask=lane needs step=STEP"));
  CHECK_THAT(error_of(with("id=x ask=physical_block select=warp=1")), ContainsSubstring("ask=physical_block needs step"));
  CHECK_THAT(error_of(with("id=x ask=sectors step=k_load")), ContainsSubstring("needs select warp=W"));
  CHECK_THAT(error_of(with("id=x ask=wavefronts step=q_smem_load select=lane=1")), ContainsSubstring("needs select warp=W"));
  // The question must follow.
  CHECK_THAT(error_of(with("id=x" + ok, "\n## next\n"), &line),
             ContainsSubstring("t.md:3: pa:exercise 'x' must be followed by its question") &&
                 ContainsSubstring("'## next' at line 5"));
  CHECK_THAT(error_of(with("id=x" + ok, "")), ContainsSubstring("found the end of the file"));
  CHECK_THAT(error_of(with("id=x" + ok, "```\ncode\n```\n")), ContainsSubstring("'```'"));
  CHECK_THAT(error_of(with("id=x" + ok, "> quote\n")), ContainsSubstring("must be followed by its question"));
  CHECK_THAT(error_of(with("id=x" + ok, "<!-- pa:exercise id=y" + ok + " -->\nq\n")),
             ContainsSubstring("'x' must be followed by its question"));
  // Ids are unique in a lesson.
  CHECK_THAT(error_of(with("id=x" + ok, "q\n\n<!-- pa:exercise id=x" + ok + " -->\nq\n"), &line),
             ContainsSubstring("t.md:6: pa:exercise: id 'x' already used at line 3"));
  CHECK(line == 6);
  CHECK_THAT(error_of("x\n<!-- pa:exercise id=x" + ok + "\nq\n"), ContainsSubstring("t.md:2: pa:exercise marker comment is not closed"));
  CHECK_THAT(error_of("<!-- pa:quiz id=x -->\n# b\n"),
             ContainsSubstring("unknown lesson directive 'pa:quiz'") && ContainsSubstring("pa:exercise id=ID"));
}

TEST_CASE("exercise name tables round-trip", "[lesson][exercise]") {
  for (int i = 0; i < kNumExerciseAsks; ++i) {
    const auto a = static_cast<ExerciseAsk>(i);
    CHECK(exercise_ask_from_name(exercise_ask_name(a)) == a);
  }
  CHECK(std::string(exercise_ask_name(static_cast<ExerciseAsk>(kNumExerciseAsks))) == "?");
  CHECK(op_from_name("async_copy") == pa::trace::Op::async_copy);
  CHECK(tensor_from_name("red_scratch") == pa::trace::Tensor::red_scratch);
  CHECK_FALSE(op_from_name("").has_value());
  CHECK_FALSE(tensor_from_name("K").has_value());
}
