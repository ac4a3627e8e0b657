// The lessons themselves: all nine exist and parse; every step marker names a
// step that its stage's trace contains (host model) and an anchor that exists
// in that stage's kernel source; every constant a lesson quotes in a
// `pa-constants` block equals the KernelConfig value.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "pa/lessons/lesson.hpp"
#include "pa/index/config.hpp"
#include "pa/index/dtype.hpp"
#include "pa/index/optimized.hpp"

#if PA_LESSON_HAVE_HOST_MODEL
#include "pa/trace/host_model.hpp"
#endif

using namespace pa::lesson;
using pa::trace::Stage;
using pa::trace::Step;
namespace fs = std::filesystem;

namespace {

std::vector<std::pair<LessonEntry, Document>> all_lessons() {
  std::vector<std::pair<LessonEntry, Document>> out;
  for (const auto& e : list_lessons(PA_LESSONS_DIR)) out.emplace_back(e, load_lesson(e.path));
  return out;
}

// kernels/stages/0N_*.cuh and 0N_*.cu: the source files of stage N (a stage
// may have a header with the steps and .cu files with launchers); empty if
// none has landed yet.
std::vector<std::string> stage_sources(Stage s) {
  const std::string prefix = "0" + std::to_string(static_cast<int>(s)) + "_";
  std::error_code ec;
  std::vector<std::string> found;
  for (auto it = fs::directory_iterator(PA_KERNEL_STAGES_DIR, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string ext = it->path().extension().string();
    if (name.rfind(prefix, 0) == 0 && (ext == ".cuh" || ext == ".cu")) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

TEST_CASE("the nine lessons exist, parse and have titles", "[lessons]") {
  const auto lessons = all_lessons();
  std::set<int> numbers;
  for (const auto& [e, d] : lessons) {
    INFO(e.path);
    numbers.insert(e.number);
    CHECK_FALSE(d.title.empty());
    CHECK(d.sections.size() >= 4);
  }
  for (int n = 0; n <= 8; ++n) {
    INFO("lesson " << n << " (lessons/0" << n << "_*.md)");
    CHECK(numbers.count(n) == 1);
  }
}

TEST_CASE("lesson markers name anchors that exist in their stage's kernel source", "[lessons][markers]") {
  int checked = 0;
  for (const auto& [e, d] : all_lessons()) {
    for (const auto& ref : d.markers()) {
      const StepMarker& m = *ref.marker;
      INFO(e.path << ":" << m.line << ": stage=" << m.stage_name << " step=" << m.step_name
                  << " anchor=" << m.anchor);
      const auto srcs = stage_sources(m.stage);
      if (srcs.empty()) {
        FAIL_CHECK("no kernel source for stage " << m.stage_name << " (looked for " << PA_KERNEL_STAGES_DIR << "/0"
                                                 << static_cast<int>(m.stage) << "_*.cuh / .cu)");
        continue;
      }
      std::optional<AnchorRange> a;
      for (const auto& src : srcs) {
        try {
          a = find_anchor(src, m.anchor);
        } catch (const LessonError& err) {
          FAIL_CHECK("anchors of " << src << " are malformed: " << err.what());
        }
        if (a) break;
      }
      if (!a) FAIL_CHECK("anchor '" << m.anchor << "' not found in the stage's sources (" << srcs.front() << " ...)");
      ++checked;
    }
  }
  CHECK(checked > 0);
}

TEST_CASE("lessons 1-8 tie sections to their own stage", "[lessons][markers]") {
  for (const auto& [e, d] : all_lessons()) {
    if (e.number < 1 || e.number > 8) continue;
    INFO(e.path);
    const auto refs = d.markers();
    CHECK(refs.size() >= 2);
    for (const auto& ref : refs) {
      INFO("line " << ref.marker->line);
      CHECK(static_cast<int>(ref.marker->stage) == e.number);
    }
  }
}

#if PA_LESSON_HAVE_HOST_MODEL
namespace {
// A problem on which every step of the stage happens: several partitions for
// V2, a shared prefix for the cascade, GQA so that stage 8 groups heads, ALiBi
// (its slope loads are steps of their own); with fp8, an fp8_e4m3 cache and
// bf16 queries (the dequant steps, and stage 8's q_scale; the viewer's marker
// buttons switch to such a problem the same way).
pa::ProblemSpec spec_for(Stage s, bool fp8 = false) {
  pa::ProblemSpec spec;  // fp16, head 128, block 16, 128 threads
  spec.alibi = true;
  if (fp8) {
    spec.kv_dtype = pa::KvDType::fp8_e4m3;
    spec.dtype = pa::DType::bf16;
  }
  spec.context_lens = {100};
  if (s == Stage::v2_partition) spec.context_lens = {1100};
  if (s == Stage::cascade_merge) {
    spec.context_lens = {96, 120};
    spec.shared_prefix_len = 64;
  }
  if (s == Stage::optimized) {
    spec.num_heads = 8;
    spec.num_kv_heads = 2;
    spec.context_lens = {600};
  }
  return spec;
}

// Stage 8: every split CTA of sequence 0's first unit, so that the trace
// holds the arrival and the last CTA's merge.
pa::trace::Selection selection_for(Stage s, bool fp8 = false) {
  if (s != Stage::optimized) return {};
  const auto plan = pa::trace::optimized_model_plan(spec_for(s, fp8));
  pa::trace::Selection sel;
  for (int sp = 0; sp < plan.splits; ++sp) sel.blocks.push_back({0, 0, sp});
  return sel;
}

struct MarkerStepCheck {
  int checked = 0;
  std::vector<std::string> failures;  // markers whose step should be in the trace but is not
};

MarkerStepCheck check_marker_steps() {
  MarkerStepCheck r;
  // (block role, step) pairs of each stage's trace; a marker without block=
  // matches any role.
  // Keyed by (stage, fp8 cache): a dequant or q_scale marker is checked on an fp8 trace.
  using Key = std::pair<Stage, bool>;
  std::map<Key, std::set<std::pair<pa::BlockRole, Step>>> steps_of;
  std::map<Key, std::string> errors;
  for (const auto& [e, d] : all_lessons()) {
    for (const auto& ref : d.markers()) {
      const StepMarker& m = *ref.marker;
      const std::string where = e.path + ":" + std::to_string(m.line) + ": stage=" + m.stage_name +
                                " step=" + m.step_name +
                                (m.block ? std::string(" block=") + block_role_name(*m.block) : std::string());
      const Key key{m.stage, m.step == Step::dequant || m.step == Step::q_scale};
      if (!steps_of.count(key) && !errors.count(key)) {
        try {
          auto& set = steps_of[key];
          for (const auto& ev :
               pa::trace::model_events(spec_for(m.stage, key.second), m.stage, selection_for(m.stage, key.second)))
            set.insert({pa::block_role(ev.partition), ev.step});
        } catch (const std::exception& err) {
          steps_of.erase(key);
          errors[key] = err.what();
        }
      }
      bool in_trace = false;
      if (steps_of.count(key))
        for (const auto& [role, step] : steps_of[key])
          in_trace = in_trace || (step == m.step && (!m.block || role == *m.block));
      if (in_trace) {
        ++r.checked;
      } else if (errors.count(key)) {
        r.failures.push_back(where + ": host model failed: " + errors[key]);
      } else {
        r.failures.push_back(where + ": the " + m.stage_name + " trace has no " + m.step_name + " events" +
                             (m.block ? std::string(" in a ") + block_role_name(*m.block) + " block" : std::string()));
      }
    }
  }
  return r;
}
}  // namespace

TEST_CASE("lesson markers name steps that their stage's trace contains", "[lessons][markers]") {
  const auto r = check_marker_steps();
  for (const auto& f : r.failures) FAIL_CHECK(f);
  CHECK(r.checked > 0);
}

// The parser's own name tables must spell every Stage and Step exactly as
// the trace module does (a renamed or reordered enumerator fails here).
TEST_CASE("lesson name tables match pa::trace::to_string", "[lessons][markers]") {
  for (int i = 0; i < static_cast<int>(Step::count_); ++i) {
    const auto st = static_cast<Step>(i);
    CHECK(std::string(step_name(st)) == pa::trace::to_string(st));
  }
  for (int i = 1; i <= 8; ++i) {
    const auto sg = static_cast<Stage>(i);
    CHECK(std::string(stage_name(sg)) == pa::trace::to_string(sg));
  }
}

#else
TEST_CASE("lesson markers name steps that their stage's trace contains", "[lessons][markers]") {
  FAIL("the host model (pa::trace::model_events, trace/src/host_model.cpp) is not part of pa_trace yet: "
       "the markers' steps cannot be checked. Re-run cmake once it lands.");
}
#endif

// ---- quoted constants -------------------------------------------------------
namespace {

using Constants = std::map<std::string, long>;

template <pa::DType DT, int H, int B, int T>
Constants constants_of() {
  using C = pa::KernelConfig<DT, H, B, T>;
  return {{"elem_bytes", C::kElemBytes},
          {"num_warps", C::kNumWarps},
          {"x", C::kX},
          {"thread_group_size", C::kThreadGroupSize},
          {"num_thread_groups", C::kNumThreadGroups},
          {"thread_groups_per_warp", C::kThreadGroupsPerWarp},
          {"vec_size", C::kVecSize},
          {"vec_bytes", C::kVecBytes},
          {"elems_per_thread", C::kNumElemsPerThread},
          {"vecs_per_thread", C::kNumVecsPerThread},
          {"v_vec_size", C::kVVecSize},
          {"v_vec_bytes", C::kVVecBytes},
          {"v_vecs_per_row", C::kNumVVecsPerRow},
          {"rows_per_iter", C::kNumRowsPerIter},
          {"rows_per_thread", C::kNumRowsPerThread}};
}

template <pa::DType DT, int H, int... Bs>
bool find_b(int b, int t, Constants& out) {
  return ((b == Bs && t == 128 ? (out = constants_of<DT, H, Bs, 128>(), true) : false) || ...);
}
template <pa::DType DT, int... Hs>
bool find_h(int h, int b, int t, Constants& out) {
  return ((h == Hs ? find_b<DT, Hs, 8, 16, 32>(b, t, out) : false) || ...);
}
// Constants of a supported configuration; false if unsupported.
bool constants_for(const std::string& dtype, int h, int b, int t, Constants& out) {
  if (dtype == "fp16") return find_h<pa::DType::f16, 64, 80, 96, 112, 128, 192, 256>(h, b, t, out);
  if (dtype == "bf16") return find_h<pa::DType::bf16, 64, 80, 96, 112, 128, 192, 256>(h, b, t, out);
  if (dtype == "fp32") return find_h<pa::DType::f32, 64, 80, 96, 112, 128, 192, 256>(h, b, t, out);
  return false;
}

template <pa::DType DT, int H, int B, int HT>
Constants opt_constants_of() {
  using C = pa::OptConfig<DT, H, B, HT>;
  return {{"step_tokens", C::kStepTokens},   {"blocks_per_step", C::kBlocksPerStep},
          {"tile_chunks", C::kTileChunks},   {"step_bytes", C::kStepBytes},
          {"stages", C::kStages},            {"pipe_bytes", C::kPipeBytes},
          {"qk_k_steps", C::kQkKSteps},      {"qk_n_tiles", C::kQkNTiles},
          {"pv_k_steps", C::kPvKSteps},      {"dim_tiles", C::kDimTiles},
          {"smem_bytes", C::kSmemBytes},     {"max_unit_heads", C::kMaxUnitHeads}};
}
template <pa::DType DT, int H, int... Bs>
bool opt_find_b(int b, int ht, Constants& out) {
  return ((b == Bs ? (out = ht == 1 ? opt_constants_of<DT, H, Bs, 1>() : opt_constants_of<DT, H, Bs, 2>(), true)
                   : false) ||
          ...);
}
template <pa::DType DT, int... Hs>
bool opt_find_h(int h, int b, int ht, Constants& out) {
  return ((h == Hs ? opt_find_b<DT, Hs, 8, 16, 32>(b, ht, out) : false) || ...);
}
// Stage 8's OptConfig (fp16/bf16 only, head tiles 1 or 2).
bool opt_constants_for(const std::string& dtype, int h, int b, int ht, Constants& out) {
  if (ht != 1 && ht != 2) return false;
  if (dtype == "fp16") return opt_find_h<pa::DType::f16, 64, 80, 96, 112, 128, 192, 256>(h, b, ht, out);
  if (dtype == "bf16") return opt_find_h<pa::DType::bf16, 64, 80, 96, 112, 128, 192, 256>(h, b, ht, out);
  return false;
}

}  // namespace

// Every `pa-constants` block (KernelConfig: keys dtype head_size block_size
// threads + derived names) and `pa-opt-constants` block (OptConfig: keys dtype
// head_size block_size head_tiles + derived names) in every lesson, including
// those inside <details>. Every key must be checkable: a typo fails.
TEST_CASE("constants quoted by the lessons equal KernelConfig / OptConfig", "[lessons][constants]") {
  int blocks = 0, opt_blocks = 0, values = 0;
  for (const auto& [e, d] : all_lessons()) {
    std::vector<const Block*> code;
    for (const auto& s : d.sections)
      for (const auto& b : s.blocks) {
        if (b.kind == BlockKind::code) code.push_back(&b);
        for (const auto& c : b.children)
          if (c.kind == BlockKind::code) code.push_back(&c);
      }
    for (const Block* b : code) {
      const bool opt = b->language == "pa-opt-constants";
      if (b->language != "pa-constants" && !opt) continue;
      ++(opt ? opt_blocks : blocks);
      INFO(e.path << ":" << b->line << " (" << b->language << " block)");
      std::map<std::string, std::string> kv;
      std::istringstream in(b->code);
      std::string line;
      auto strip = [](std::string s) {
        const auto b0 = s.find_first_not_of(" \t"), e0 = s.find_last_not_of(" \t");
        return b0 == std::string::npos ? std::string() : s.substr(b0, e0 - b0 + 1);
      };
      while (std::getline(in, line)) {
        const auto hash = line.find('#');
        if (hash != std::string::npos) line.resize(hash);
        if (line.find_first_not_of(" \t") == std::string::npos) continue;
        const auto eq = line.find('=');
        INFO("line: " << line);
        REQUIRE(eq != std::string::npos);
        kv[strip(line.substr(0, eq))] = strip(line.substr(eq + 1));
      }
      const char* fourth = opt ? "head_tiles" : "threads";
      REQUIRE(kv.count("dtype"));
      REQUIRE(kv.count("head_size"));
      REQUIRE(kv.count("block_size"));
      REQUIRE(kv.count(fourth));
      Constants c;
      const int h = std::stoi(kv["head_size"]), bs = std::stoi(kv["block_size"]), t = std::stoi(kv[fourth]);
      REQUIRE((opt ? opt_constants_for(kv["dtype"], h, bs, t, c) : constants_for(kv["dtype"], h, bs, t, c)));
      for (const auto& [k, v] : kv) {
        if (k == "dtype" || k == "head_size" || k == "block_size" || k == fourth) continue;
        INFO("key " << k);
        REQUIRE(c.count(k));  // every quoted key is one we can check
        CHECK(std::stol(v) == c[k]);
        ++values;
      }
    }
  }
  CHECK(blocks >= 3);
  CHECK(opt_blocks >= 1);
  CHECK(values >= 10);
}

// The parts every lesson promises: exercises with collapsed answers, and (1-8)
// the command that runs the lesson's own stage.
TEST_CASE("each lesson has exercises with answers and its stage's run command", "[lessons]") {
  for (const auto& [e, d] : all_lessons()) {
    INFO(e.path);
    bool exercises = false, answers = false, run = false;
    for (const auto& s : d.sections) {
      const std::string h = plain_text(s.heading);
      if (h.rfind("Exercises", 0) == 0) {
        exercises = true;
        for (const auto& b : s.blocks) answers = answers || (b.kind == BlockKind::details && !b.children.empty());
      }
      if (e.number >= 1 && e.number <= 8) {
        const std::string want =
            std::string("pa-lab run --stage ") + stage_name(static_cast<Stage>(e.number)) + " ";
        for (const auto& b : s.blocks) run = run || (b.kind == BlockKind::code && b.code.find(want) != std::string::npos);
      }
    }
    CHECK(exercises);
    CHECK(answers);
    if (e.number >= 1 && e.number <= 8) CHECK(run);
  }
}

namespace {
// Every block's visible text (headings, paragraphs, items, tables, details), in order.
void block_text(const Block& b, std::string& out) {
  out += plain_text(b.spans);
  out += '\n';
  for (const auto& row : b.rows)
    for (const auto& cell : row) out += plain_text(cell) + " | ";
  if (b.kind == BlockKind::code) out += b.code;
  for (const auto& c : b.children) block_text(c, out);
}
std::string section_text(const Section& s) {
  std::string out = plain_text(s.heading) + "\n";
  for (const auto& b : s.blocks) block_text(b, out);
  return out;
}
int count_links(const std::vector<Block>& blocks, const std::string& prefix) {
  int n = 0;
  for (const auto& b : blocks) {
    for (const auto& sp : b.spans) n += sp.kind == SpanKind::link && sp.url.rfind(prefix, 0) == 0;
    n += count_links(b.children, prefix);
  }
  return n;
}
}  // namespace

// The lessons and the README speak to learners: no project history (who ran
// what when, which issue asked for it); measured history is kept in
// kernels/NOTES.md.
TEST_CASE("lessons and the README carry no internal history", "[lessons][words]") {
  std::vector<std::string> files;
  for (const auto& e : list_lessons(PA_LESSONS_DIR)) files.push_back(e.path);
  files.push_back((fs::path(PA_LESSONS_DIR).parent_path() / "README.md").string());
  const std::regex history(
      R"(\b(issue|session|call|run) [0-9]+\b|\bthe team\b|\bby a hair\b|\bfinal run\b|\bhelper\b)",
      std::regex::icase);
  for (const auto& f : files) {
    const Document d = load_lesson(f);
    for (const auto& s : d.sections) {
      const std::string t = section_text(s);
      for (auto it = std::sregex_iterator(t.begin(), t.end(), history); it != std::sregex_iterator(); ++it) {
        INFO(f << ", section '" << plain_text(s.heading) << "': '" << it->str() << "'");
        CHECK(false);
      }
    }
  }
}

// Each lesson places its kernel among real systems, with links (vLLM, the
// PagedAttention paper, FlashDecoding, FlashInfer ...).
TEST_CASE("each lesson says where its kernel sits among real systems", "[lessons][words]") {
  for (const auto& [e, d] : all_lessons()) {
    INFO(e.path);
    const Section* found = nullptr;
    for (const auto& s : d.sections)
      if (plain_text(s.heading).rfind("Where this sits among real systems", 0) == 0) found = &s;
    REQUIRE(found);
    CHECK(count_links(found->blocks, "https://") >= 1);
    const std::string t = section_text(*found);
    CHECK((t.find("vLLM") != std::string::npos || t.find("FlashInfer") != std::string::npos ||
           t.find("Flash-Decoding") != std::string::npos));
  }
}

// Lessons 7 and 8 explain mma, ldmatrix, cp.async and swizzling in a primer
// before any other section uses them.
TEST_CASE("lessons 7 and 8 open with a primer on the tensor-core instructions", "[lessons][words]") {
  for (const auto& [e, d] : all_lessons()) {
    if (e.number != 7 && e.number != 8) continue;
    INFO(e.path);
    for (const char* word : {"mma", "ldmatrix", "cp.async", "swizzl"}) {
      INFO(word);
      std::size_t first = d.sections.size();
      for (std::size_t i = 0; i < d.sections.size() && first == d.sections.size(); ++i)
      {
        std::string t = section_text(d.sections[i]);
        std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (t.find(word) != std::string::npos) first = i;
      }
      REQUIRE(first < d.sections.size());
      const std::string h = plain_text(d.sections[first].heading);
      CHECK(h.rfind("Primer", 0) == 0);
    }
  }
}

// Lesson 0 guides the learner through the viewer like the other lessons.
TEST_CASE("lesson 0 has viewer guidance on the paged cache and block table", "[lessons][words]") {
  for (const auto& [e, d] : all_lessons()) {
    if (e.number != 0) continue;
    const Section* found = nullptr;
    for (const auto& s : d.sections)
      if (plain_text(s.heading).rfind("What to watch in the viewer", 0) == 0) found = &s;
    REQUIRE(found);
    const std::string t = section_text(*found);
    CHECK(t.find("Paged KV cache") != std::string::npos);
    CHECK(t.find("block table") != std::string::npos);
    CHECK(t.find("--lesson 0") != std::string::npos);
  }
}
