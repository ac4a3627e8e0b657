// Exercises that check themselves (core/exercise.hpp): every exercise of
// every lesson resolves against the trace the viewer opens that lesson on
// (its default problem, through the host model), and its answer equals a
// value this file derives by hand from the layout formulas the lessons teach
// (pa/index/layout.hpp's K and V layouts, the thread-group mapping), never by
// calling the code that produced the trace. Then the rules on synthetic
// events: which events an exercise selects, ill-posed exercises, typed answers.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "core/args.hpp"
#include "core/exercise.hpp"
#include "core/lesson_problem.hpp"
#include "core/trace_load.hpp"
#include "pa/lessons/lesson.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;
using Catch::Matchers::ContainsSubstring;
using trace::Event;
using trace::Op;
using trace::Step;
using trace::Tensor;

namespace {

// What the hand computations need: the problem and its block tables.
struct Ctx {
  ProblemSpec spec;
  PagedProblem problem;
  int elem = 2;  // bytes per element
  int block_of(int seq, int logical) const { return problem.block_tables[seq * problem.max_blocks_per_seq + logical]; }
};

int sectors_of(const std::set<std::int64_t>& bytes) {
  std::set<std::int64_t> s;
  for (std::int64_t b : bytes) s.insert(b / 32);
  return static_cast<int>(s.size());
}
void add_range(std::set<std::int64_t>& bytes, std::int64_t begin, int n) {
  for (int i = 0; i < n; ++i) bytes.insert(begin + i);
}

// The numbers lessons 1-5 teach for the v1 mapping (fp16 / 128 / 16 by default).
struct V1 {
  int tgs, vec, vec_bytes, v_vec, lanes_per_row, rows_per_iter, x;
  explicit V1(const Ctx& c) {
    tgs = std::max(32 / c.spec.block_size, 1);      // thread group: one token per group
    vec_bytes = 16 / tgs;                            // a group loads 16 bytes per token
    vec = vec_bytes / c.elem;
    v_vec = std::min(16 / c.elem, c.spec.block_size);  // a V vec: 16 bytes of one row's tokens
    lanes_per_row = c.spec.block_size / v_vec;
    rows_per_iter = 32 / lanes_per_row;
    x = 16 / c.elem;
  }
};
std::int64_t k_byte(const Ctx& c, int pb, int kvh, int d, int t) {
  const int x = 16 / c.elem, H = c.spec.head_size, B = c.spec.block_size;
  return ((((static_cast<std::int64_t>(pb) * c.spec.num_kv_heads + kvh) * (H / x) + d / x) * B + t) * x + d % x) *
         c.elem;
}
std::int64_t v_byte(const Ctx& c, int pb, int kvh, int d, int t) {
  const int H = c.spec.head_size, B = c.spec.block_size;
  return (((static_cast<std::int64_t>(pb) * c.spec.num_kv_heads + kvh) * H + d) * B + t) * c.elem;
}

using Expect = std::function<std::int64_t(const Ctx&)>;

// lesson -> exercise id -> its answer, derived by hand. Every exercise in the
// lessons must have an entry here and every entry must be used.
std::map<int, std::map<std::string, Expect>> expectations() {
  std::map<int, std::map<std::string, Expect>> e;
  // Lesson 0: the block table maps logical block token / B to a physical block.
  e[0]["seq2_token100_block"] = [](const Ctx& c) {
    REQUIRE(c.spec.num_seqs() == 3);  // the question names the lesson's three sequences
    REQUIRE(c.spec.context_lens[2] == 130);
    return std::int64_t{c.block_of(2, 100 / c.spec.block_size)};
  };
  // Lesson 1: slot [off][i] holds dims (off + tgs*i)*vec...; thread group i
  // (lanes tgs*i + off) loads and stores vec i.
  e[1]["slot_1_3_lane"] = [](const Ctx& c) {
    const V1 v(c);
    const int unit = 28 / v.vec, off = unit % v.tgs, i = unit / v.tgs;
    const int tid = i * v.tgs + off;
    REQUIRE(tid < 32);  // the question says warp 0
    return std::int64_t{tid};
  };
  // Warp 0's lanes each load one vec of Q row (seq 0, head 0): dims 0..127.
  e[1]["q_load_sectors"] = [](const Ctx& c) {
    const V1 v(c);
    std::set<std::int64_t> bytes;
    for (int lane = 0; lane < 32; ++lane) {
      const int off = lane % v.tgs, i = lane / v.tgs;
      add_range(bytes, static_cast<std::int64_t>(off + v.tgs * i) * v.vec * c.elem, v.vec_bytes);
    }
    return std::int64_t{sectors_of(bytes)};
  };
  // Lesson 2: in iteration 0 warp 0 reads logical block 0; group g = token g;
  // a lane's first K vec is dims [(off)*vec, +vec) of its token.
  e[2]["k_load_sectors"] = [](const Ctx& c) {
    const V1 v(c);
    const int pb = c.block_of(0, 0);
    std::set<std::int64_t> bytes;
    for (int lane = 0; lane < 32; ++lane)
      add_range(bytes, k_byte(c, pb, 0, (lane % v.tgs) * v.vec, lane / v.tgs), v.vec_bytes);
    return std::int64_t{sectors_of(bytes)};
  };
  // q_vecs[off][i] at byte (off * vecs_per_thread + i) * vec_bytes; 8-byte
  // accesses run in 2 phases of 16 lanes; in a phase a bank serves one
  // 4-byte word per wavefront (the same word is broadcast).
  e[2]["q_smem_load_wavefronts"] = [](const Ctx& c) {
    const V1 v(c);
    const int vecs_per_thread = c.spec.head_size / (v.tgs * v.vec);
    REQUIRE(v.vec_bytes == 8);
    int total = 0;
    for (int phase = 0; phase < 2; ++phase) {
      std::map<int, std::set<std::int64_t>> words_of_bank;
      for (int lane = phase * 16; lane < phase * 16 + 16; ++lane) {
        const std::int64_t byte = static_cast<std::int64_t>(lane % v.tgs) * vecs_per_thread * v.vec_bytes;
        for (std::int64_t w = byte / 4; w < (byte + v.vec_bytes) / 4; ++w) words_of_bank[static_cast<int>(w % 32)].insert(w);
      }
      std::size_t worst = 0;
      for (const auto& [bank, words] : words_of_bank) worst = std::max(worst, words.size());
      total += static_cast<int>(worst);
    }
    return std::int64_t{total};
  };
  // Warp w reads logical block w in its first iteration.
  e[2]["warp1_block"] = [](const Ctx& c) { return std::int64_t{c.block_of(0, 1)}; };
  // Lesson 3: thread tid reads the logits of tokens tid, tid + 128, ...
  e[3]["token77_lane"] = [](const Ctx&) { return std::int64_t{77 % 128 % 32}; };
  // Lane 0 of each of the 4 warps writes red[warp].
  e[3]["red_writers"] = [](const Ctx& c) { return std::int64_t{c.spec.num_threads / 32}; };
  // Lesson 4: lane L reads row L / lanes_per_row, tokens (L % lanes_per_row) * v_vec...
  e[4]["v_load_sectors"] = [](const Ctx& c) {
    const V1 v(c);
    const int pb = c.block_of(0, 0);
    std::set<std::int64_t> bytes;
    for (int lane = 0; lane < 32; ++lane)
      add_range(bytes, v_byte(c, pb, 0, lane / v.lanes_per_row, (lane % v.lanes_per_row) * v.v_vec), v.v_vec * c.elem);
    return std::int64_t{sectors_of(bytes)};
  };
  e[4]["lane7_v_offset"] = [](const Ctx& c) {
    const V1 v(c);
    REQUIRE(7 / v.lanes_per_row == 3);  // the question's row 3 and tokens 8-15
    REQUIRE((7 % v.lanes_per_row) * v.v_vec == 8);
    return v_byte(c, c.block_of(0, 0), 0, 3, 8);
  };
  // Lesson 5: lane L (L % lanes_per_row == 0) owns rows L / lanes_per_row + rows_per_iter * i.
  e[5]["row83_lane"] = [](const Ctx& c) {
    const V1 v(c);
    return std::int64_t{83 % v.rows_per_iter * v.lanes_per_row};
  };
  // Output row (seq 0, head 0): rows 0..rows_per_iter-1 first, elem bytes each.
  e[5]["out_store_sectors"] = [](const Ctx& c) {
    const V1 v(c);
    std::set<std::int64_t> bytes;
    for (int row = 0; row < v.rows_per_iter; ++row) add_range(bytes, static_cast<std::int64_t>(row) * c.elem, c.elem);
    return std::int64_t{sectors_of(bytes)};
  };
  // Round 0: the upper half of the 4 warps (2 warps) store, each through its row owners.
  e[5]["round0_writers"] = [](const Ctx& c) {
    const V1 v(c);
    return std::int64_t{c.spec.num_threads / 32 / 2 * (32 / v.lanes_per_row)};
  };
  // Lesson 6: thread d of the reduce reads part_out[seq][head][p][d] (float),
  // p = 0 first; one load per partition (every weight is > 0 here: the
  // partitions' maxima are within a few units of each other).
  e[6]["part_out_sectors"] = [](const Ctx& c) {
    const int max_parts = (c.spec.max_context_len() + c.spec.partition_size - 1) / c.spec.partition_size;  // ceil
    std::set<std::int64_t> bytes;
    for (int d = 0; d < 32; ++d) add_range(bytes, ((0 * c.spec.num_heads + 0) * max_parts * std::int64_t{c.spec.head_size} + d) * 4, 4);
    return std::int64_t{sectors_of(bytes)};
  };
  e[6]["part_out_loads"] = [](const Ctx& c) {
    REQUIRE(c.spec.context_lens[0] == 1100);
    REQUIRE(c.spec.partition_size == 512);
    return std::int64_t{(1100 + 511) / 512};
  };
  // Lesson 7: the merge gives each thread 4 consecutive elements of a row.
  e[7]["merge_threads"] = [](const Ctx& c) { return std::int64_t{c.spec.head_size / 4}; };
  e[7]["merge_out_sectors"] = [](const Ctx& c) {
    std::set<std::int64_t> bytes;
    for (int t = 0; t < std::min(32, c.spec.head_size / 4); ++t) add_range(bytes, 4 * t * std::int64_t{c.elem}, 4 * c.elem);
    return std::int64_t{sectors_of(bytes)};
  };
  // Lesson 8: a cp.async request is 32 lanes x 16 contiguous bytes; an
  // ldmatrix.x4 moves 32 x 16 bytes, 128 per wavefront when conflict-free
  // (what the swizzle is for).
  e[8]["cp_async_sectors"] = [](const Ctx&) { return std::int64_t{32 * 16 / 32}; };
  e[8]["ldmatrix_wavefronts"] = [](const Ctx&) { return std::int64_t{32 * 16 / 128}; };
  return e;
}

// The stage the viewer's loader opens lesson N on (app/loader.cpp): its first
// marker's, else stage N; lesson 0 (no kernel of its own) the QK stage.
trace::Stage lesson_stage(int n, const lesson::Document& d) {
  const auto ms = d.markers();
  if (!ms.empty()) return ms.front().marker->stage;
  return n >= 1 && n <= 8 ? static_cast<trace::Stage>(n) : trace::Stage::qk;
}

}  // namespace

TEST_CASE("every lesson's exercises resolve on its default problem to the hand-derived answer", "[viewer][exercise]") {
  auto expect = expectations();
  std::map<int, int> per_lesson;
  int lessons = 0, checked = 0;
  for (const auto& entry : lesson::list_lessons(PA_LESSONS_DIR)) {
    ++lessons;
    INFO("lesson " << entry.number << " (" << entry.path << ")");
    const lesson::Document doc = lesson::load_lesson(entry.path);
    const trace::Stage stage = lesson_stage(entry.number, doc);
    REQUIRE(trace::stage_is_modelled(stage));
    Ctx c;
    c.spec = lesson_problem_of(entry.number, ProblemSpec{}, stage, 0).spec;
    c.problem = make_problem(c.spec);
    c.elem = dtype_bytes(c.spec.dtype);
    const auto events = trace::model_events(c.spec, stage, viewer_selection(c.spec, stage, 0, 0, 0));
    const auto tables = problem_tables(c.spec);
    REQUIRE_FALSE(tables.empty());
    for (const lesson::Block* b : doc.exercises()) {
      const lesson::ExerciseMarker& ex = *b->exercise;
      INFO("exercise " << ex.id << " (line " << ex.line << ")");
      ++per_lesson[entry.number];
      const ExerciseAnswer a = solve_exercise(ex, events, c.spec, tables);
      INFO(a.error);
      REQUIRE(a.ok);
      auto it = expect[entry.number].find(ex.id);
      REQUIRE(it != expect[entry.number].end());  // a new exercise needs its hand derivation here
      CHECK(a.value == it->second(c));
      expect[entry.number].erase(it);
      ++checked;
      // "Show me" has somewhere to go: events of one thread block, or the table.
      CHECK((a.from_table || !a.events.empty()));
    }
  }
  // Lesson 9 (layouts and page tables) asks its questions on paper (addresses,
  // CSR tables, the cascade floor): no viewer exercise markers.
  CHECK(lessons == 10);
  CHECK(per_lesson[9] == 0);
  for (int n = 0; n <= 8; ++n) {
    INFO("lesson " << n);
    CHECK(per_lesson[n] >= 1);
    CHECK(expect[n].empty());  // every derivation belongs to an exercise that exists
  }
  CHECK(checked == 19);
}

TEST_CASE("lesson 0's block-table answer is the block the QK trace reads the token from", "[viewer][exercise]") {
  const ProblemSpec spec = lesson_problem_of(0, ProblemSpec{}, trace::Stage::qk, 0).spec;
  const auto events = trace::model_events(spec, trace::Stage::qk, viewer_selection(spec, trace::Stage::qk, 0, 0, 0));
  lesson::ExerciseMarker ex;
  ex.id = "t";
  ex.ask = lesson::ExerciseAsk::physical_block;
  ex.select.token = 57;  // sequence 0: the one the QK trace shows
  const ExerciseAnswer a = solve_exercise(ex, events, spec, problem_tables(spec));
  REQUIRE(a.ok);
  CHECK(a.from_table);
  CHECK(a.logical_block == 57 / spec.block_size);
  int reads = 0;
  for (const Event& e : events)
    if (e.step == Step::k_load && e.seq == 0 && e.token == 57) {
      CHECK(e.physical_block == a.value);
      ++reads;
    }
  CHECK(reads > 0);
}

// The parser spells Op and Tensor (for op= and tensor=) with its own tables,
// since pa_lesson does not link pa_trace: they must agree with the trace
// module, and an enumerator appended to event.hpp must be appended there too.
TEST_CASE("the lesson parser's op and tensor names are pa::trace's", "[viewer][exercise]") {
  int ops = 0, tensors = 0;
  for (int i = 0; trace::is_valid(static_cast<Op>(i)); ++i, ++ops)
    CHECK(std::string(lesson::op_name(static_cast<Op>(i))) == trace::to_string(static_cast<Op>(i)));
  for (int i = 0; trace::is_valid(static_cast<Tensor>(i)); ++i, ++tensors)
    CHECK(std::string(lesson::tensor_name(static_cast<Tensor>(i))) == trace::to_string(static_cast<Tensor>(i)));
  CHECK(ops == 10);
  CHECK(tensors == 27);
  CHECK(std::string(lesson::op_name(static_cast<Op>(ops))) == "?");
  CHECK(std::string(lesson::tensor_name(static_cast<Tensor>(tensors))) == "?");
}

// ---- the rules, on synthetic events ------------------------------------------------
namespace {
Event ev(int warp, int lane, Step step, Op op, Tensor t, std::int64_t byte, int bytes, int seq_in_thread) {
  Event e{};
  e.stage = trace::Stage::qk;
  e.step = step;
  e.op = op;
  e.tensor = t;
  e.warp = static_cast<std::uint16_t>(warp);
  e.lane = static_cast<std::uint16_t>(lane);
  e.iter = 0;
  e.seq_in_thread = seq_in_thread;
  e.token = -1;
  e.logical_block = -1;
  e.physical_block = -1;
  e.dim_begin = -1;
  e.byte_offset = byte;
  e.bytes = bytes;
  e.value = NAN;
  return e;
}
lesson::ExerciseMarker marker(lesson::ExerciseAsk ask, Step step) {
  lesson::ExerciseMarker m;
  m.id = "x";
  m.ask = ask;
  m.step = step;
  return m;
}
}  // namespace

TEST_CASE("exercise answers: occurrence, op defaults, ambiguity, missing events", "[viewer][exercise]") {
  // Warp 0: two K loads per lane; the first 4-byte aligned, the second strided 64 bytes apart.
  std::vector<Event> evs;
  for (int lane = 0; lane < 32; ++lane) {
    evs.push_back(ev(0, lane, Step::k_load, Op::global_load, Tensor::k_cache, 4 * lane, 4, 0));
    evs.push_back(ev(0, lane, Step::k_load, Op::global_load, Tensor::k_cache, 4096 + 64 * lane, 4, 1));
    evs.back().token = lane;
  }
  const ProblemSpec spec;
  using lesson::ExerciseAsk;

  auto sectors = marker(ExerciseAsk::sectors, Step::k_load);
  sectors.select.warp = 0;
  // Both loads match: two requests, so the question is ill-posed.
  ExerciseAnswer a = solve_exercise(sectors, evs, spec, {});
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, ContainsSubstring("2 requests"));
  sectors.select.occurrence = 0;
  a = solve_exercise(sectors, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 4);   // 128 contiguous bytes
  CHECK(a.events.size() == 32);
  CHECK(a.lane == -1);   // a request is the whole warp's
  sectors.select.occurrence = 1;
  a = solve_exercise(sectors, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 32);  // every lane in its own sector
  sectors.select.occurrence = 2;
  a = solve_exercise(sectors, evs, spec, {});
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, ContainsSubstring("no k_load events") && ContainsSubstring("occurrence 2"));

  // Wavefronts keep only shared-memory ops when no op is given.
  auto wf = marker(ExerciseAsk::wavefronts, Step::k_load);
  wf.select.warp = 0;
  CHECK_THAT(solve_exercise(wf, evs, spec, {}).error, ContainsSubstring("no k_load events"));

  // A value every matching event must share.
  auto lane = marker(ExerciseAsk::lane, Step::k_load);
  lane.select.token = 9;
  a = solve_exercise(lane, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 9);
  CHECK(a.warp == 0);
  CHECK(a.lane == 9);
  lane.select.token.reset();
  a = solve_exercise(lane, evs, spec, {});
  CHECK_FALSE(a.ok);
  CHECK_THAT(a.error, ContainsSubstring("ill-posed") && ContainsSubstring("32 different lanes") &&
                          ContainsSubstring("0, 1, 2, 3, ..."));
  // A field the events do not carry.
  auto token = marker(ExerciseAsk::physical_block, Step::k_load);
  token.select.lane = 3;
  token.select.occurrence = 0;
  CHECK_THAT(solve_exercise(token, evs, spec, {}).error, ContainsSubstring("carry no physical block"));

  auto count = marker(ExerciseAsk::events, Step::k_load);
  count.select.lane = 5;
  a = solve_exercise(count, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 2);
  auto threads = marker(ExerciseAsk::threads, Step::k_load);
  a = solve_exercise(threads, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 32);
}

TEST_CASE("exercise answers: the first thread block of the role; the block table", "[viewer][exercise]") {
  using lesson::ExerciseAsk;
  std::vector<Event> evs;
  for (int p : {kReduceBlock, 1, 0}) {  // trace order: the reduce block first
    Event e = ev(0, 4, Step::max_reduce, Op::shared_store, Tensor::red_scratch, 0, 4, 0);
    e.partition = p;
    e.warp = static_cast<std::uint16_t>(p == kReduceBlock ? 3 : p + 1);
    evs.push_back(e);
  }
  const ProblemSpec spec;
  auto warp = marker(ExerciseAsk::warp, Step::max_reduce);
  ExerciseAnswer a = solve_exercise(warp, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 3);
  CHECK(a.partition == kReduceBlock);
  warp.block = BlockRole::main;
  a = solve_exercise(warp, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 2);  // partition 1 comes first in the trace
  warp.select.partition = 0;
  a = solve_exercise(warp, evs, spec, {});
  REQUIRE(a.ok);
  CHECK(a.value == 1);

  auto table = marker(ExerciseAsk::physical_block, Step::k_load);
  table.step.reset();
  table.select.token = 40;
  const std::vector<std::vector<int>> tables = {{7, 3, 9, 1, 4, 6, 2}};
  a = solve_exercise(table, {}, spec, tables);
  REQUIRE(a.ok);
  CHECK(a.value == 9);  // token 40 / 16 = logical block 2
  CHECK(a.from_table);
  table.select.token = 100;  // the default problem's sequence has 100 tokens
  CHECK_THAT(solve_exercise(table, {}, spec, tables).error, ContainsSubstring("has 100 tokens"));
  table.select.token = 40;
  CHECK_THAT(solve_exercise(table, {}, spec, {}).error, ContainsSubstring("not available"));
  table.select.seq = 1;
  CHECK_THAT(solve_exercise(table, {}, spec, tables).error, ContainsSubstring("1 sequence(s)"));
}

TEST_CASE("typed answers: whole numbers, decimal or hex; verdicts", "[viewer][exercise]") {
  CHECK(parse_typed_answer("8") == 8);
  CHECK(parse_typed_answer("  22811 ") == 22811);
  CHECK(parse_typed_answer("0x1f") == 31);
  CHECK(parse_typed_answer("0X1F") == 31);
  CHECK(parse_typed_answer("-3") == -3);
  CHECK_FALSE(parse_typed_answer("").has_value());
  CHECK_FALSE(parse_typed_answer("8 sectors").has_value());
  CHECK_FALSE(parse_typed_answer("1.5").has_value());
  CHECK_FALSE(parse_typed_answer("0x").has_value());
  CHECK_FALSE(parse_typed_answer("1f").has_value());
  CHECK_FALSE(parse_typed_answer("9999999999999999").has_value());  // more digits than fit safely

  ExerciseAnswer a;
  a.ok = true;
  a.value = 16;
  CHECK(check_answer("16", a) == Verdict::right);
  CHECK(check_answer("0x10", a) == Verdict::right);
  CHECK(check_answer("15", a) == Verdict::wrong);
  CHECK(check_answer(" ", a) == Verdict::empty);
  CHECK(check_answer("sixteen", a) == Verdict::not_a_number);
  a.ok = false;
  CHECK(check_answer("16", a) == Verdict::unanswerable);

  CHECK(describe_answer(lesson::ExerciseAsk::sectors, 1) == "1 sector");
  CHECK(describe_answer(lesson::ExerciseAsk::sectors, 8) == "8 sectors");
  CHECK(describe_answer(lesson::ExerciseAsk::lane, 7) == "lane 7");
}

TEST_CASE("hints point at the tab and the thread, never at the number", "[viewer][exercise]") {
  using lesson::ExerciseAsk;
  auto m = marker(ExerciseAsk::sectors, Step::k_load);
  ExerciseAnswer a;
  a.ok = true;
  a.value = 8;
  a.warp = 2;
  a.lane = -1;
  const std::string h = exercise_hint(m, a);
  CHECK_THAT(h, ContainsSubstring("Requests tab") && ContainsSubstring("warp 2") && ContainsSubstring("k_load"));
  CHECK(h.find('8') == std::string::npos);
  CHECK(std::string(exercise_tab(m)) == "requests");
  m.ask = ExerciseAsk::byte_offset;
  a.lane = 7;
  a.value = 22811;
  CHECK_THAT(exercise_hint(m, a), ContainsSubstring("warp 2 lane 7") && ContainsSubstring("tooltip"));
  CHECK(exercise_hint(m, a).find("22811") == std::string::npos);
  a.from_table = true;
  a.table_seq = 0;
  m.ask = ExerciseAsk::physical_block;
  CHECK_THAT(exercise_hint(m, a), ContainsSubstring("Paged KV cache tab") && ContainsSubstring("block table"));
  CHECK(std::string(exercise_tab(m)) == "kv");
}

TEST_CASE("pa-viewer --answer ID=VALUE: repeatable, refused without an id or a value", "[viewer][exercise][args]") {
  const Args a = parse_args({"--lesson", "2", "--answer", "k_load_sectors=8", "--answer", "warp1_block=0x1f"});
  REQUIRE(a.answers.size() == 2);
  CHECK(a.answers[0] == std::pair<std::string, std::string>{"k_load_sectors", "8"});
  CHECK(a.answers[1] == std::pair<std::string, std::string>{"warp1_block", "0x1f"});
  for (const char* bad : {"k_load_sectors", "=8", "id=", "x=" "0123456789012345678901234567890123"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_args({"--answer", bad}), UsageError);
  }
  CHECK_THROWS_AS(parse_args({"--answer"}), UsageError);
}
