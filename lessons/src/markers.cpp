// The marker syntax: the name tables (Stage, Step, BlockRole, Op, Tensor,
// ExerciseAsk, each written as its enum name) and the parsing of the
// `<!-- pa:step ... -->` and `<!-- pa:exercise ... -->` comment bodies. Every
// error names what was written and lists what is accepted, so a lesson author
// can fix a marker from the message alone.
#include <cstddef>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "marker_syntax.hpp"
#include "pa/lessons/error.hpp"
#include "pa/lessons/markers.hpp"
#include "text.hpp"

namespace pa::lesson {

using namespace detail;
using pa::trace::Stage;
using pa::trace::Step;

// ---- names ----------------------------------------------------------------------
namespace {

struct StageName {
  Stage stage;
  const char* name;
};
constexpr StageName kStageNames[] = {
    {Stage::q_to_smem, "q_to_smem"},       {Stage::qk, "qk"},
    {Stage::softmax, "softmax"},           {Stage::lv, "lv"},
    {Stage::warp_reduce, "warp_reduce"},   {Stage::v2_partition, "v2_partition"},
    {Stage::cascade_merge, "cascade_merge"}, {Stage::optimized, "optimized"},
};

// Indexed by the Step value: the order of the enum in event.hpp.
constexpr const char* kStepNames[] = {
    "q_load",        "q_smem_store",   "q_smem_load", "block_table_load", "k_load",
    "qk_dot",        "qk_group_reduce", "logit_store", "max_reduce",      "exp_sum_reduce",
    "prob_store",    "logit_load",     "v_load",      "accumulate",       "warp_reduce",
    "out_store",     "partition_store", "partition_reduce", "merge",      "stage_output",
    "barrier",       "k_smem_load",    "v_smem_load", "rescale",          "split_arrive",
    "alibi_bias",    "dequant",        "q_scale",
};
static_assert(std::size(kStepNames) == static_cast<std::size_t>(Step::count_),
              "kStepNames must list every Step of event.hpp, in order");

constexpr const char* kBlockRoleNames[] = {"main", "reduce", "prefix_reduce", "merge", "prefix"};
static_assert(std::size(kBlockRoleNames) == static_cast<std::size_t>(pa::BlockRole::prefix) + 1,
              "kBlockRoleNames must list every BlockRole of pa/index/events.hpp, in order");

// Indexed by the Op / Tensor value (event.hpp); a test compares them with
// pa::trace::to_string and checks that no enumerator was appended.
constexpr const char* kOpNames[] = {"global_load", "global_store", "shared_load", "shared_store", "shuffle",
                                    "barrier",     "compute",      "async_copy",  "mma",          "atomic"};
constexpr const char* kTensorNames[] = {
    "none",       "q",         "k_cache",    "v_cache",    "block_table", "context_lens", "q_smem",  "logits",
    "red_scratch", "out_scratch", "output",   "part_out",   "part_max",    "part_sum",     "state_out", "state_lse",
    "stage_out",  "kv_smem",   "workspace",  "counter",    "prefix_out",  "prefix_lse",   "suffix_out", "suffix_lse",
    "alibi_slopes", "kv_indptr", "kv_last_page_len"};
constexpr const char* kAskNames[] = {"sectors", "wavefronts", "lane",    "warp",    "byte_offset",
                                     "physical_block", "token", "dim", "threads", "events"};
static_assert(std::size(kAskNames) == static_cast<std::size_t>(kNumExerciseAsks),
              "kAskNames must list every ExerciseAsk of markers.hpp, in order");

// The names of a table separated by spaces: the "accepted: ..." of a message.
template <std::size_t N>
std::string joined(const char* const (&names)[N]) {
  std::string s;
  for (const char* n : names) s += (s.empty() ? "" : " ") + std::string(n);
  return s;
}
std::string joined_stage_names() {
  std::string s;
  for (const auto& e : kStageNames) s += (s.empty() ? "" : " ") + std::string(e.name);
  return s;
}

// The enum value whose name is at the same index of a table (the tables above
// list each enum in declaration order).
template <class E, std::size_t N>
std::optional<E> enum_from_name(const char* const (&names)[N], std::string_view name) {
  for (std::size_t i = 0; i < N; ++i)
    if (name == names[i]) return static_cast<E>(i);
  return std::nullopt;
}
template <class E, std::size_t N>
const char* enum_name(const char* const (&names)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "?";
}

}  // namespace

std::optional<Stage> stage_from_name(std::string_view name) {
  for (const auto& e : kStageNames)
    if (name == e.name) return e.stage;
  return std::nullopt;
}
const char* stage_name(Stage stage) {
  for (const auto& e : kStageNames)
    if (e.stage == stage) return e.name;
  return "?";
}
std::optional<Step> step_from_name(std::string_view name) { return enum_from_name<Step>(kStepNames, name); }
const char* step_name(Step step) { return enum_name(kStepNames, step); }
std::optional<pa::BlockRole> block_role_from_name(std::string_view name) {
  return enum_from_name<pa::BlockRole>(kBlockRoleNames, name);
}
const char* block_role_name(pa::BlockRole role) { return enum_name(kBlockRoleNames, role); }
std::optional<pa::trace::Op> op_from_name(std::string_view name) { return enum_from_name<pa::trace::Op>(kOpNames, name); }
std::optional<pa::trace::Tensor> tensor_from_name(std::string_view name) {
  return enum_from_name<pa::trace::Tensor>(kTensorNames, name);
}
const char* op_name(pa::trace::Op op) { return enum_name(kOpNames, op); }
const char* tensor_name(pa::trace::Tensor tensor) { return enum_name(kTensorNames, tensor); }
std::optional<ExerciseAsk> exercise_ask_from_name(std::string_view name) {
  return enum_from_name<ExerciseAsk>(kAskNames, name);
}
const char* exercise_ask_name(ExerciseAsk ask) { return enum_name(kAskNames, ask); }

// ---- marker comments ------------------------------------------------------------
namespace {

// The whitespace-separated words of a directive comment's body.
std::vector<std::string_view> directive_tokens(std::string_view body) {
  std::vector<std::string_view> tokens;
  std::size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && is_space(body[i])) ++i;
    std::size_t b = i;
    while (i < body.size() && !is_space(body[i])) ++i;
    if (i > b) tokens.push_back(body.substr(b, i - b));
  }
  return tokens;
}

constexpr const char* kStepForm = "<!-- pa:step stage=NAME step=NAME anchor=NAME [block=ROLE] -->";
constexpr const char* kExerciseForm =
    "<!-- pa:exercise id=ID ask=WHAT [step=STEP] [block=ROLE] [op=OP] [tensor=TENSOR] [select=KEY=N,...] -->";
constexpr const char* kSelectKeys = "warp lane iter occurrence token dim seq head partition logical_block";

}  // namespace

std::vector<KeyValue> split_key_values(std::string_view s) {
  std::vector<KeyValue> out;
  std::size_t b = 0;
  while (b <= s.size()) {
    std::size_t e = s.find(',', b);
    if (e == std::string_view::npos) e = s.size();
    KeyValue kv;
    kv.item = s.substr(b, e - b);
    const std::size_t eq = kv.item.find('=');
    kv.ok = eq != std::string_view::npos && eq > 0;
    if (kv.ok) {
      kv.key = kv.item.substr(0, eq);
      kv.value = kv.item.substr(eq + 1);
    }
    out.push_back(kv);
    b = e + 1;
  }
  return out;
}

namespace {

// select=KEY=N,KEY=N,...: every key once, every N a whole number in [0, 2^30).
ExerciseSelect parse_select(std::string_view value, const std::string& file, int line) {
  ExerciseSelect sel;
  for (const KeyValue& kv : split_key_values(value)) {
    if (!kv.ok || kv.value.empty()) {
      throw LessonError(file, line, "pa:exercise: select item '" + std::string(kv.item.substr(0, 64)) +
                                        "' is not KEY=N (keys: " + kSelectKeys + ")");
    }
    const std::string_view key = kv.key, num = kv.value;
    std::optional<int>* slot = key == "warp"            ? &sel.warp
                               : key == "lane"          ? &sel.lane
                               : key == "iter"          ? &sel.iter
                               : key == "occurrence"    ? &sel.occurrence
                               : key == "token"         ? &sel.token
                               : key == "dim"           ? &sel.dim
                               : key == "seq"           ? &sel.seq
                               : key == "head"          ? &sel.head
                               : key == "partition"     ? &sel.partition
                               : key == "logical_block" ? &sel.logical_block
                                                        : nullptr;
    if (!slot) {
      throw LessonError(file, line, "pa:exercise: unknown select key '" + std::string(key.substr(0, 64)) +
                                        "' (keys: " + kSelectKeys + ")");
    }
    if (slot->has_value()) {
      throw LessonError(file, line, "pa:exercise: select key '" + std::string(key) + "' given twice");
    }
    long long n = 0;
    bool ok = !num.empty() && num.size() <= 10;
    for (char c : num) {
      if (!is_digit(c)) ok = false;
      if (ok) n = n * 10 + (c - '0');
    }
    if (!ok || n >= (1ll << 30)) {
      throw LessonError(file, line, "pa:exercise: select " + std::string(key) + "='" +
                                        std::string(num.substr(0, 64)) + "' is not a whole number in [0, 2^30)");
    }
    *slot = static_cast<int>(n);
  }
  return sel;
}

}  // namespace

namespace detail {

bool is_exercise_directive(std::string_view body) {
  const std::vector<std::string_view> tokens = directive_tokens(body);
  return !tokens.empty() && tokens.front() == "pa:exercise";
}

StepMarker parse_step_marker(std::string_view body, const std::string& file, int line) {
  const std::vector<std::string_view> tokens = directive_tokens(body);
  if (tokens.empty() || tokens[0] != "pa:step") {
    throw LessonError(file, line,
                      "unknown lesson directive '" + std::string(tokens.empty() ? "" : tokens[0]).substr(0, 64) +
                          "' (accepted: " + kStepForm + ", " + kExerciseForm + ")");
  }
  StepMarker m;
  m.line = line;
  bool have_stage = false, have_step = false, have_anchor = false;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    std::string_view tok = tokens[t];
    const std::size_t eq = tok.find('=');
    const std::string shown(tok.substr(0, 64));
    if (eq == std::string_view::npos || eq == 0) {
      throw LessonError(file, line, "pa:step: expected key=value, got '" + shown +
                                        "' (keys: stage step anchor block)");
    }
    std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty()) {
      throw LessonError(file, line, "pa:step: empty value for '" + std::string(key.substr(0, 64)) + "'");
    }
    const std::string v(value.substr(0, 128));
    if (key == "stage") {
      if (have_stage) throw LessonError(file, line, "pa:step: 'stage' given twice");
      auto s = stage_from_name(value);
      if (!s) {
        throw LessonError(file, line, "pa:step: unknown stage '" + v + "' (accepted: " + joined_stage_names() + ")");
      }
      m.stage = *s;
      m.stage_name = v;
      have_stage = true;
    } else if (key == "step") {
      if (have_step) throw LessonError(file, line, "pa:step: 'step' given twice");
      auto s = step_from_name(value);
      if (!s || *s == Step::count_) {
        throw LessonError(file, line, "pa:step: unknown step '" + v + "' (accepted: " + joined(kStepNames) + ")");
      }
      m.step = *s;
      m.step_name = v;
      have_step = true;
    } else if (key == "anchor") {
      if (have_anchor) throw LessonError(file, line, "pa:step: 'anchor' given twice");
      if (!valid_anchor_name(value)) {
        throw LessonError(file, line, "pa:step: bad anchor name '" + v +
                                          "' (accepted: 1-128 characters of A-Z a-z 0-9 _ . -)");
      }
      m.anchor = v;
      have_anchor = true;
    } else if (key == "block") {
      if (m.block) throw LessonError(file, line, "pa:step: 'block' given twice");
      m.block = block_role_from_name(value);
      if (!m.block) {
        throw LessonError(file, line, "pa:step: unknown block '" + v + "' (accepted: " + joined(kBlockRoleNames) +
                                          ")");
      }
    } else {
      throw LessonError(file, line, "pa:step: unknown key '" + std::string(key.substr(0, 64)) +
                                        "' (keys: stage step anchor block)");
    }
  }
  if (!have_stage || !have_step || !have_anchor) {
    std::string missing;
    if (!have_stage) missing += " stage";
    if (!have_step) missing += " step";
    if (!have_anchor) missing += " anchor";
    throw LessonError(file, line, "pa:step: missing" + missing + " (form: " + kStepForm + ")");
  }
  return m;
}

ExerciseMarker parse_exercise_marker(std::string_view body, const std::string& file, int line) {
  const std::vector<std::string_view> tokens = directive_tokens(body);
  ExerciseMarker m;
  m.line = line;
  bool have_id = false, have_ask = false, have_select = false;
  for (std::size_t t = 1; t < tokens.size(); ++t) {
    std::string_view tok = tokens[t];
    const std::size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw LessonError(file, line, "pa:exercise: expected key=value, got '" + std::string(tok.substr(0, 64)) +
                                        "' (form: " + kExerciseForm + ")");
    }
    const std::string_view key = tok.substr(0, eq), value = tok.substr(eq + 1);
    const std::string k(key.substr(0, 64)), v(value.substr(0, 128));
    if (value.empty()) throw LessonError(file, line, "pa:exercise: empty value for '" + k + "'");
    auto once = [&](bool given) {
      if (given) throw LessonError(file, line, "pa:exercise: '" + k + "' given twice");
    };
    if (key == "id") {
      once(have_id);
      if (value.size() > 64 || !valid_anchor_name(value)) {
        throw LessonError(file, line, "pa:exercise: bad id '" + v + "' (accepted: 1-64 characters of A-Z a-z 0-9 _ . -)");
      }
      m.id = v;
      have_id = true;
    } else if (key == "ask") {
      once(have_ask);
      const auto a = exercise_ask_from_name(value);
      if (!a) {
        throw LessonError(file, line, "pa:exercise: unknown ask '" + v + "' (accepted: " + joined(kAskNames) + ")");
      }
      m.ask = *a;
      have_ask = true;
    } else if (key == "step") {
      once(m.step.has_value());
      const auto st = step_from_name(value);
      if (!st || *st == Step::count_) {
        throw LessonError(file, line, "pa:exercise: unknown step '" + v + "' (accepted: " + joined(kStepNames) + ")");
      }
      m.step = *st;
    } else if (key == "block") {
      once(m.block.has_value());
      m.block = block_role_from_name(value);
      if (!m.block) {
        throw LessonError(file, line, "pa:exercise: unknown block '" + v + "' (accepted: " + joined(kBlockRoleNames) +
                                          ")");
      }
    } else if (key == "op") {
      once(m.op.has_value());
      m.op = op_from_name(value);
      if (!m.op) {
        throw LessonError(file, line, "pa:exercise: unknown op '" + v + "' (accepted: " + joined(kOpNames) + ")");
      }
    } else if (key == "tensor") {
      once(m.tensor.has_value());
      m.tensor = tensor_from_name(value);
      if (!m.tensor) {
        throw LessonError(file, line, "pa:exercise: unknown tensor '" + v + "' (accepted: " + joined(kTensorNames) +
                                          ")");
      }
    } else if (key == "select") {
      once(have_select);
      m.select = parse_select(value, file, line);
      have_select = true;
    } else {
      throw LessonError(file, line, "pa:exercise: unknown key '" + k + "' (keys: id ask step block op tensor select)");
    }
  }
  if (!have_id || !have_ask) {
    throw LessonError(file, line, std::string("pa:exercise: missing") + (have_id ? "" : " id") +
                                      (have_ask ? "" : " ask") + " (form: " + kExerciseForm + ")");
  }
  const bool table_lookup = m.ask == ExerciseAsk::physical_block && !m.step &&
                            (m.select.token || m.select.logical_block);
  if (!m.step && !table_lookup) {
    throw LessonError(file, line, "pa:exercise: ask=" + std::string(exercise_ask_name(m.ask)) +
                                      " needs step=STEP (only ask=physical_block with select token= or "
                                      "logical_block= reads the block table without one)");
  }
  if ((m.ask == ExerciseAsk::sectors || m.ask == ExerciseAsk::wavefronts) && !m.select.warp) {
    throw LessonError(file, line, "pa:exercise: ask=" + std::string(exercise_ask_name(m.ask)) +
                                      " needs select warp=W (a memory request is one warp's)");
  }
  return m;
}

}  // namespace detail
}  // namespace pa::lesson
