#include "core/exercise.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "pa/index/events.hpp"
#include "pa/trace/analysis.hpp"

namespace pa::viewer {
namespace {

using lesson::ExerciseAsk;
using trace::Event;
using trace::Op;

bool is_global_op(Op o) {
  return o == Op::global_load || o == Op::global_store || o == Op::async_copy || o == Op::atomic;
}
bool is_shared_op(Op o) { return o == Op::shared_load || o == Op::shared_store; }

// What the exercise's filters say, for messages: "k_load events (op global_load, warp 0, iter 0)".
std::string describe_filter(const lesson::ExerciseMarker& ex) {
  std::string f;
  auto add = [&](const std::string& s) { f += (f.empty() ? "" : ", ") + s; };
  if (ex.block) add(std::string("block ") + lesson::block_role_name(*ex.block));
  if (ex.op) add(std::string("op ") + lesson::op_name(*ex.op));
  if (ex.tensor) add(std::string("tensor ") + lesson::tensor_name(*ex.tensor));
  const auto& s = ex.select;
  const std::pair<const char*, const std::optional<int>*> keys[] = {
      {"seq", &s.seq},     {"head", &s.head},   {"partition", &s.partition}, {"warp", &s.warp},
      {"lane", &s.lane},   {"iter", &s.iter},   {"token", &s.token},         {"dim", &s.dim},
      {"logical_block", &s.logical_block},      {"occurrence", &s.occurrence}};
  for (const auto& [name, v] : keys)
    if (v->has_value()) add(std::string(name) + " " + std::to_string(**v));
  return std::string(ex.step ? lesson::step_name(*ex.step) : "block table") + " events" +
         (f.empty() ? "" : " (" + f + ")");
}

bool matches(const lesson::ExerciseMarker& ex, const Event& e) {
  if (e.step != *ex.step) return false;
  if (ex.block && block_role(e.partition) != *ex.block) return false;
  if (ex.op) {
    if (e.op != *ex.op) return false;
  } else if (ex.ask == ExerciseAsk::sectors) {
    if (!is_global_op(e.op)) return false;
  } else if (ex.ask == ExerciseAsk::wavefronts) {
    if (!is_shared_op(e.op)) return false;
  }
  if (ex.tensor && e.tensor != *ex.tensor) return false;
  const auto& s = ex.select;
  if (s.warp && e.warp != *s.warp) return false;
  if (s.lane && e.lane != *s.lane) return false;
  if (s.iter && e.iter != *s.iter) return false;
  if (s.token && e.token != *s.token) return false;
  if (s.dim && !(e.dim_begin >= 0 && e.dim_begin <= *s.dim && *s.dim < e.dim_begin + std::max(1, int{e.dim_count})))
    return false;
  if (s.seq && e.seq != *s.seq) return false;
  if (s.head && e.head != *s.head) return false;
  if (s.partition && e.partition != *s.partition) return false;
  if (s.logical_block && e.logical_block != *s.logical_block) return false;
  return true;
}

ExerciseAnswer fail(std::string why) {
  ExerciseAnswer a;
  a.error = std::move(why);
  return a;
}

// The answer from the problem's block table (lesson 0: no kernel involved).
ExerciseAnswer from_block_table(const lesson::ExerciseMarker& ex, const ProblemSpec& spec,
                                const std::vector<std::vector<int>>& tables) {
  const int seq = ex.select.seq.value_or(0);
  if (seq >= spec.num_seqs())
    return fail("the problem has " + std::to_string(spec.num_seqs()) + " sequence(s); the exercise asks about sequence " +
                std::to_string(seq));
  if (ex.select.token && *ex.select.token >= spec.context_lens[seq])
    return fail("sequence " + std::to_string(seq) + " has " + std::to_string(spec.context_lens[seq]) +
                " tokens; the exercise asks about token " + std::to_string(*ex.select.token));
  const int lb = ex.select.logical_block ? *ex.select.logical_block : *ex.select.token / std::max(1, spec.block_size);
  if (tables.empty()) return fail("the block tables of this problem are not available (too large to build here)");
  if (seq >= static_cast<int>(tables.size()) || lb >= static_cast<int>(tables[seq].size()) || tables[seq][lb] < 0)
    return fail("sequence " + std::to_string(seq) + " has no logical block " + std::to_string(lb));
  ExerciseAnswer a;
  a.ok = true;
  a.value = tables[seq][lb];
  a.from_table = true;
  a.table_seq = seq;
  a.logical_block = lb;
  a.seq = seq;
  return a;
}

}  // namespace

ExerciseAnswer solve_exercise(const lesson::ExerciseMarker& ex, std::span<const Event> events, const ProblemSpec& spec,
                              const std::vector<std::vector<int>>& tables) {
  if (!ex.step) {
    if (ex.ask != ExerciseAsk::physical_block || !(ex.select.token || ex.select.logical_block))
      return fail("the exercise names no step");  // the parser refuses this; kept for hand-built markers
    return from_block_table(ex, spec, tables);
  }

  // The matching events; with occurrence=K each thread's K-th in program order.
  std::vector<std::uint32_t> hit;
  for (std::uint32_t i = 0; i < events.size(); ++i)
    if (matches(ex, events[i])) hit.push_back(i);
  if (ex.select.occurrence) {
    using Thread = std::tuple<int, int, int, int, int>;  // seq, head, partition, warp, lane
    std::map<Thread, std::vector<std::uint32_t>> per_thread;
    for (std::uint32_t i : hit) {
      const Event& e = events[i];
      per_thread[{e.seq, e.head, e.partition, e.warp, e.lane}].push_back(i);
    }
    std::vector<std::uint32_t> kept;
    for (auto& [t, v] : per_thread) {
      std::sort(v.begin(), v.end(), [&](std::uint32_t a, std::uint32_t b) {
        return std::tie(events[a].epoch, events[a].seq_in_thread) < std::tie(events[b].epoch, events[b].seq_in_thread);
      });
      if (static_cast<std::size_t>(*ex.select.occurrence) < v.size()) kept.push_back(v[*ex.select.occurrence]);
    }
    std::sort(kept.begin(), kept.end());
    hit = std::move(kept);
  }
  if (hit.empty()) return fail("this trace has no " + describe_filter(ex));

  // The first thread block (in trace order) that has any.
  ExerciseAnswer a;
  {
    const Event& first = events[hit.front()];
    a.seq = first.seq;
    a.head = first.head;
    a.partition = first.partition;
    a.warp = first.warp;
    a.lane = first.lane;
  }
  std::erase_if(hit, [&](std::uint32_t i) {
    return events[i].seq != a.seq || events[i].head != a.head || events[i].partition != a.partition;
  });
  a.events = hit;

  // A value every matching event must agree on.
  auto unique_value = [&](const char* what, auto field) -> ExerciseAnswer {
    std::set<std::int64_t> values;
    for (std::uint32_t i : hit) values.insert(static_cast<std::int64_t>(field(events[i])));
    if (values.size() != 1) {
      std::string list;
      int shown = 0;
      for (std::int64_t v : values) {
        if (shown++ == 4) {
          list += ", ...";
          break;
        }
        list += (list.empty() ? "" : ", ") + std::to_string(v);
      }
      return fail("ill-posed for this trace: the " + describe_filter(ex) + " have " + std::to_string(values.size()) +
                  " different " + what + "s (" + list + ")");
    }
    if (*values.begin() < 0) return fail(std::string("the ") + describe_filter(ex) + " carry no " + what);
    ExerciseAnswer r = a;
    r.ok = true;
    r.value = *values.begin();
    return r;
  };

  switch (ex.ask) {
    case ExerciseAsk::sectors:
    case ExerciseAsk::wavefronts: {
      // The requests of the chosen warp's events of this step: a request never
      // spans warps or steps, so measuring only these loses nothing.
      const Event& f = events[hit.front()];
      std::vector<std::uint32_t> scope;
      for (std::uint32_t i = 0; i < events.size(); ++i) {
        const Event& e = events[i];
        if (e.seq == f.seq && e.head == f.head && e.partition == f.partition && e.warp == f.warp && e.step == f.step)
          scope.push_back(i);
      }
      std::vector<Event> local;
      local.reserve(scope.size());
      for (std::uint32_t i : scope) local.push_back(events[i]);
      const auto requests = trace::memory_requests(local);
      const auto req_of = trace::request_index_of_events(requests, local.size());
      std::set<int> which;
      for (std::uint32_t i : hit) {
        const auto at = std::lower_bound(scope.begin(), scope.end(), i) - scope.begin();
        which.insert(at < static_cast<std::ptrdiff_t>(scope.size()) && scope[at] == i ? req_of[at] : -1);
      }
      if (which.count(-1)) return fail("the " + describe_filter(ex) + " include accesses of no bytes (not a memory request)");
      if (which.size() != 1)
        return fail("ill-posed for this trace: the " + describe_filter(ex) + " belong to " +
                    std::to_string(which.size()) + " requests (narrow it with iter= or occurrence=)");
      const trace::MemoryRequest& r = requests[*which.begin()];
      if (ex.ask == ExerciseAsk::sectors && r.shared) return fail("the " + describe_filter(ex) + " are shared-memory accesses: ask wavefronts");
      if (ex.ask == ExerciseAsk::wavefronts && !r.shared) return fail("the " + describe_filter(ex) + " are global accesses: ask sectors");
      a.ok = true;
      a.value = ex.ask == ExerciseAsk::sectors ? r.sectors : r.wavefronts;
      a.lane = -1;  // the request is the whole warp's
      a.events.clear();
      for (std::uint32_t li : r.events) a.events.push_back(scope[li]);
      std::sort(a.events.begin(), a.events.end());
      return a;
    }
    case ExerciseAsk::lane: return unique_value("lane", [](const Event& e) { return e.lane; });
    case ExerciseAsk::warp: return unique_value("warp", [](const Event& e) { return e.warp; });
    case ExerciseAsk::byte_offset: return unique_value("byte offset", [](const Event& e) { return e.byte_offset; });
    case ExerciseAsk::physical_block:
      return unique_value("physical block", [](const Event& e) { return e.physical_block; });
    case ExerciseAsk::token: return unique_value("token", [](const Event& e) { return e.token; });
    case ExerciseAsk::dim: return unique_value("head dimension", [](const Event& e) { return e.dim_begin; });
    case ExerciseAsk::threads: {
      std::set<std::pair<int, int>> threads;
      for (std::uint32_t i : hit) threads.insert({events[i].warp, events[i].lane});
      a.ok = true;
      a.value = static_cast<std::int64_t>(threads.size());
      if (threads.size() > 1) a.lane = -1;
      return a;
    }
    case ExerciseAsk::events:
      a.ok = true;
      a.value = static_cast<std::int64_t>(hit.size());
      return a;
  }
  return fail("unknown ask");
}

std::optional<std::int64_t> parse_typed_answer(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  bool neg = false;
  if (!t.empty() && (t.front() == '-' || t.front() == '+')) {
    neg = t.front() == '-';
    t.remove_prefix(1);
  }
  int base = 10;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    base = 16;
    t.remove_prefix(2);
  }
  if (t.empty() || t.size() > 15) return std::nullopt;  // 15 hex digits stay below 2^63
  std::int64_t v = 0;
  for (char c : t) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return std::nullopt;
    v = v * base + d;
  }
  return neg ? -v : v;
}

Verdict check_answer(std::string_view typed, const ExerciseAnswer& answer) {
  if (typed.find_first_not_of(" \t") == std::string_view::npos) return Verdict::empty;
  const auto v = parse_typed_answer(typed);
  if (!v) return Verdict::not_a_number;
  if (!answer.ok) return Verdict::unanswerable;
  return *v == answer.value ? Verdict::right : Verdict::wrong;
}

std::string describe_answer(ExerciseAsk ask, std::int64_t v) {
  const std::string n = std::to_string(v);
  const bool one = v == 1;
  switch (ask) {
    case ExerciseAsk::sectors: return n + (one ? " sector" : " sectors");
    case ExerciseAsk::wavefronts: return n + (one ? " wavefront" : " wavefronts");
    case ExerciseAsk::lane: return "lane " + n;
    case ExerciseAsk::warp: return "warp " + n;
    case ExerciseAsk::byte_offset: return "byte offset " + n;
    case ExerciseAsk::physical_block: return "physical block " + n;
    case ExerciseAsk::token: return "token " + n;
    case ExerciseAsk::dim: return "head dimension " + n;
    case ExerciseAsk::threads: return n + (one ? " thread" : " threads");
    case ExerciseAsk::events: return n + (one ? " event" : " events");
  }
  return n;
}

const char* exercise_tab(const lesson::ExerciseMarker& ex) {
  switch (ex.ask) {
    case ExerciseAsk::sectors:
    case ExerciseAsk::wavefronts: return "requests";
    case ExerciseAsk::physical_block: return "kv";
    case ExerciseAsk::events: return "inspect";
    default: break;
  }
  // Where the touched memory is drawn: shared buffers in the Q & shared tab.
  if (ex.op && is_shared_op(*ex.op)) return "shared";
  if (ex.tensor && (*ex.tensor == trace::Tensor::k_cache || *ex.tensor == trace::Tensor::v_cache)) return "kv";
  return "inspect";
}

std::string exercise_hint(const lesson::ExerciseMarker& ex, const ExerciseAnswer& a) {
  if (a.from_table)
    return "Open the Paged KV cache tab and hover sequence " + std::to_string(a.table_seq) +
           "'s block table: which entry holds the token (logical block = token / block size), and what does it say?";
  const std::string step = ex.step ? lesson::step_name(*ex.step) : "the";
  const std::string thread = a.warp < 0 ? "" : a.lane < 0 ? "warp " + std::to_string(a.warp)
                                                          : "warp " + std::to_string(a.warp) + " lane " + std::to_string(a.lane);
  const std::string show = "\"Show me\" jumps to that " + step + " step and selects " + (thread.empty() ? "it" : thread);
  switch (ex.ask) {
    case ExerciseAsk::sectors:
      return show + "; the Requests tab then lists the warp's request: its cost is the number of distinct 32-byte "
                    "sectors its lanes' bytes fall in.";
    case ExerciseAsk::wavefronts:
      return show + "; the Requests tab then lists the warp's request: a wavefront serves each bank once, so count "
                    "how many distinct 4-byte words the busiest bank holds, per phase.";
    case ExerciseAsk::lane:
    case ExerciseAsk::warp:
      return show + ". Hover the lit lanes of the thread block (each tooltip lists its accesses), or click the "
                    "element in the memory tab: the Inspect tab lists who touches it.";
    case ExerciseAsk::byte_offset:
    case ExerciseAsk::token:
    case ExerciseAsk::dim:
      return show + ". Hover that lane in the thread block: its tooltip lists the access with its bytes, token and "
                    "dims.";
    case ExerciseAsk::physical_block:
      return show + ". The Paged KV cache tab lights the block it reads; hover the block table to see the mapping.";
    case ExerciseAsk::threads:
      return show + ". Count the lit lanes in the thread block at that step (hover one to check what it does).";
    case ExerciseAsk::events:
      return show + ". The Inspect tab then lists every step of that thread.";
  }
  return show;
}

}  // namespace pa::viewer
