// Loading lessons, traces (host model or file) and the per-block caches.
// Nothing here throws: failures become messages the window shows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <unordered_map>

#include "app/state.hpp"
#include "core/names.hpp"
#include "pa/reference/paged_cache.hpp"
#include "pa/trace/trace_file.hpp"
#if PA_VIEWER_HAVE_MODEL
#include "pa/trace/host_model.hpp"
#endif

namespace pa::viewer {
namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string AppState::step_label(int step) const {
  if (step < 0 || step >= index.num_steps(block)) return "-";
  const ReplayStep& r = index.steps(block)[step];
  std::string out = step_name(r.step);
  if (r.iter >= 0) out += " it " + std::to_string(r.iter);
  if (r.occurrence > 0) out += " #" + std::to_string(r.occurrence);
  return out;
}

void AppState::set_focus(const Focus& f) {
  focus = f;
  focus_touches.clear();
  focus_steps.clear();
  if (f.kind == Focus::Kind::element)
    focus_touches = who_touches(events, index, block, f.tensor, f.byte_begin, f.bytes);
  else if (f.kind == Focus::Kind::thread || f.kind == Focus::Kind::warp)
    focus_steps = steps_of_thread(events, index, block, f.warp, f.kind == Focus::Kind::thread ? f.lane : -1);
  focus_tab_request = f.active();
}

void AppState::step_by(int dir) {
  replay.pause();
  std::vector<int> stops = focus_steps;
  for (const Touch& t : focus_touches) stops.push_back(t.step);
  if (!follow_focus || stops.empty()) {
    replay.jump(replay.current() + dir);
    return;
  }
  std::sort(stops.begin(), stops.end());
  const int cur = replay.current();
  if (dir > 0) {
    auto it = std::upper_bound(stops.begin(), stops.end(), cur);
    if (it != stops.end()) replay.jump(*it);
  } else {
    auto it = std::lower_bound(stops.begin(), stops.end(), cur);
    if (it != stops.begin()) replay.jump(*std::prev(it));
  }
}

const lesson::StepMarker* marker_for_step(const AppState& s, const ReplayStep* step, int* section) {
  if (!s.doc || !step) return nullptr;
  const lesson::StepMarker* loose = nullptr;
  int loose_sec = -1;
  for (const auto& m : s.doc->markers()) {
    if (m.marker->step != step->step) continue;
    if (m.marker->stage == s.stage) {
      if (section) *section = static_cast<int>(m.section);
      return m.marker;
    }
    if (!loose) {
      loose = m.marker;
      loose_sec = static_cast<int>(m.section);
    }
  }
  if (section) *section = loose_sec;
  if (loose) return loose;
  // Another lesson's marker for this step (composed stages).
  for (const auto& m : s.all_markers)
    if (m.step == step->step) return &m;
  return nullptr;
}

// Every sequence's block table, from the problem (what the lessons about
// paging draw even where a stage does not read the table).
void compute_tables(AppState& s) {
  s.tables.clear();
  try {
    long long tokens = 0;
    for (int c : s.spec.context_lens) tokens += c;
    if (tokens * s.spec.num_kv_heads * s.spec.head_size > (1ll << 22)) return;  // too big to build just for this (seconds)
    const PagedProblem p = make_problem(s.spec);
    for (int q = 0; q < p.num_seqs(); ++q) {
      std::vector<int> row;
      for (int l = 0; l < p.num_logical_blocks(q); ++l) row.push_back(p.physical_block(q, l));
      s.tables.push_back(std::move(row));
    }
  } catch (const std::exception&) {
    s.tables.clear();  // an invalid problem is reported by the trace loader
  }
}

void select_block(AppState& s, int b) {
  s.block = std::clamp(b, 0, std::max(0, s.index.num_blocks() - 1));
  s.replay.set_count(s.index.num_steps(s.block));
  s.focus = Focus{};
  s.focus_touches.clear();
  s.focus_steps.clear();
  s.slot_physical.clear();
  s.k_first_step.clear();
  s.v_first_step.clear();
  s.logit_value.clear();
  s.prob_value.clear();
  s.logit_step.clear();
  s.prob_step.clear();
  s.stats.clear();
  s.last_step_seen = -1;
  s.slot_from_problem.clear();
  if (s.index.num_blocks() == 0) {
    // No trace: still show sequence 0's blocks as the problem lays them out.
    if (!s.tables.empty()) {
      s.slot_physical = s.tables[0];
      s.slot_from_problem.assign(s.slot_physical.size(), 1);
    }
    return;
  }

  const BlockKey key = s.index.block(s.block);
  const int ctx = key.seq >= 0 && key.seq < s.spec.num_seqs() ? s.spec.context_lens[key.seq] : 0;
  const auto pr = partition_range(ctx, s.spec.block_size, s.spec.partition_size > 0 &&
                                  (s.stage == trace::Stage::v2_partition || s.stage == trace::Stage::cascade_merge) ?
                                  s.spec.partition_size : 0, key.partition);
  s.token_begin = pr.token_begin;
  s.token_end = pr.token_end;
  const int nlog = ceil_div(std::max(ctx, 1), s.spec.block_size);
  s.slot_physical.assign(nlog, -1);
  s.kv_head = s.spec.num_kv_heads > 0 ? kv_head_of(key.head, s.spec.num_heads, s.spec.num_kv_heads) : 0;
  s.logit_value.assign(std::max(ctx, 0), NAN);
  s.prob_value.assign(std::max(ctx, 0), NAN);
  s.logit_step.assign(std::max(ctx, 0), -1);
  s.prob_step.assign(std::max(ctx, 0), -1);

  // Block table and values from the block's events.
  for (std::uint32_t i = 0; i < s.events.size(); ++i) {
    if (s.index.block_of_event(i) != s.block) continue;
    const auto& e = s.events[i];
    if (e.logical_block >= 0 && e.logical_block < nlog && e.physical_block >= 0)
      s.slot_physical[e.logical_block] = e.physical_block;
    if (!std::isfinite(e.value)) continue;
    const int step = s.index.step_of_event(i);
    const bool tok_ok = e.token >= 0 && e.token < ctx;
    if (e.step == trace::Step::logit_store && tok_ok) {
      s.logit_value[e.token] = e.value;
      s.logit_step[e.token] = step;
    } else if (e.step == trace::Step::prob_store && tok_ok) {
      s.prob_value[e.token] = e.value;
      s.prob_step[e.token] = step;
    } else {
      s.stats.push_back({step, e.step, e.tensor, e.warp, e.lane, e.value});
    }
  }
  if (s.stats.size() > 4096) s.stats.resize(4096);
  s.slot_from_problem.assign(nlog, 0);
  if (key.seq < static_cast<int>(s.tables.size()))
    for (int l = 0; l < nlog && l < static_cast<int>(s.tables[key.seq].size()); ++l)
      if (s.slot_physical[l] < 0) {
        s.slot_physical[l] = s.tables[key.seq][l];
        s.slot_from_problem[l] = 1;
      }

  // The memory tab a lesson opens on: the KV cache if the stage reads it.
  s.reads_k = s.reads_v = false;
  for (std::uint32_t i = 0; i < s.events.size(); ++i) {
    if (s.index.block_of_event(i) != s.block) continue;
    s.reads_k |= s.events[i].tensor == trace::Tensor::k_cache;
    s.reads_v |= s.events[i].tensor == trace::Tensor::v_cache;
  }
  s.memory_tab = s.reads_k || s.reads_v ? 0 : 1;
  s.memory_tab_request = true;

  // First step that touches each K / V element of each slot (progress shading).
  const int H = s.cfg.head_size, B = s.cfg.block_size;
  auto& slot_of_phys = s.slot_of_physical;
  slot_of_phys.clear();
  for (int l = 0; l < nlog; ++l)
    if (s.slot_physical[l] >= 0) slot_of_phys.emplace(s.slot_physical[l], l);
  const std::size_t cells = static_cast<std::size_t>(nlog) * H * B;
  s.k_first_step.assign(cells, -1);
  s.v_first_step.assign(cells, -1);
  const CacheGeometry g = s.cfg.cache(s.spec.num_kv_heads);
  for (std::uint32_t i = 0; i < s.events.size(); ++i) {
    const auto& e = s.events[i];
    if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) continue;
    if (s.index.block_of_event(i) != s.block) continue;
    auto& arr = e.tensor == trace::Tensor::k_cache ? s.k_first_step : s.v_first_step;
    const int step = s.index.step_of_event(i);
    for_each_kv_element(e, g, s.cfg.elem_bytes, [&](const CacheGeometry::Coords& c) {
      auto it = slot_of_phys.find(c.physical_block);
      if (it == slot_of_phys.end() || c.kv_head != s.kv_head || c.d >= H || c.t >= B) return;
      int& v = arr[(static_cast<std::size_t>(it->second) * H + c.d) * B + c.t];
      if (v < 0 || step < v) v = step;
    });
  }
}

void rebuild_index(AppState& s) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s.index = TraceIndex(s.events, s.granularity);
  } catch (const std::exception& e) {
    s.load_error = std::string("cannot index the trace: ") + e.what();
    s.events.clear();
    s.index = TraceIndex();
  }
  s.index_ms = ms_since(t0);
  const int keep = s.replay.current();
  select_block(s, 0);
  s.replay.jump(keep);
}

void regenerate_from_model(AppState& s) {
  s.trace_path.clear();
  s.trace_source = "host model";
  s.trace_revision.clear();
  s.load_error.clear();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    s.cfg = config_info(s.spec.dtype, s.spec.head_size, s.spec.block_size, s.spec.num_threads);
#if PA_VIEWER_HAVE_MODEL
    s.spec.validate();
    trace::Selection sel;
    s.sel_seq = std::clamp(s.sel_seq, 0, std::max(0, s.spec.num_seqs() - 1));
    s.sel_head = std::clamp(s.sel_head, 0, std::max(0, s.spec.num_heads - 1));
    s.sel_partition = std::max(0, s.sel_partition);
    sel.blocks.push_back(trace::BlockId{s.sel_seq, s.sel_head, s.sel_partition});
    s.events = trace::model_events(s.spec, s.stage, sel);
#else
    throw std::runtime_error("this pa-viewer was built without the host model (trace/src/host_model.cpp)");
#endif
  } catch (const std::exception& e) {
    const std::string what = e.what();
    s.load_error = what.find("no host model") != std::string::npos
                       ? "No replay for this stage: " + what + ". The memory and partition panels show the problem and the CPU reference."
                       : "cannot build the trace: " + what;
    s.events.clear();
  }
  s.load_ms = ms_since(t0);
  compute_tables(s);
  rebuild_index(s);
}

void open_trace_file(AppState& s, const std::string& path) {
  s.load_error.clear();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    trace::TraceData d = trace::read_trace(path);
    s.cfg = config_info(d.header.spec.dtype, d.header.spec.head_size, d.header.spec.block_size,
                        d.header.spec.num_threads);
    s.spec = d.header.spec;
    s.stage = d.header.stage;
    s.trace_source = d.header.source;
    s.trace_revision = d.header.revision;
    s.events = std::move(d.events);
    s.trace_path = path;
  } catch (const std::exception& e) {
    // Keep what was shown before; say why the file was not opened.
    s.load_error = "cannot open trace '" + path + "': " + e.what();
    return;
  }
  s.load_ms = ms_since(t0);
  s.replay.jump(0);
  compute_tables(s);
  rebuild_index(s);
  // Show the lesson of the trace's stage (lesson N teaches stage N).
  const int n = static_cast<int>(s.stage);
  if (n != s.lesson && n >= 0 && n <= 8) load_lesson(s, n);
}

void load_lesson(AppState& s, int n) {
  s.lesson = n;
  s.doc.reset();
  s.lesson_error.clear();
  s.anchor_cache.clear();
  try {
    if (s.lessons.empty()) {
      s.lessons = lesson::list_lessons(s.lessons_dir);
      for (const auto& e : s.lessons) {
        try {
          const lesson::Document d = lesson::load_lesson(e.path);
          for (const auto& m : d.markers()) s.all_markers.push_back(*m.marker);
        } catch (const std::exception&) {
          // A broken lesson is reported when it is opened.
        }
      }
    }
    const auto it = std::find_if(s.lessons.begin(), s.lessons.end(),
                                 [&](const lesson::LessonEntry& e) { return e.number == n; });
    if (it == s.lessons.end())
      s.lesson_error = "lesson " + std::to_string(n) + " not found in " + s.lessons_dir;
    else
      s.doc = lesson::load_lesson(it->path);
  } catch (const std::exception& e) {
    s.lesson_error = e.what();
  }
  // The lesson's stage: its first marker's, else stage N (lesson 0, the paged
  // KV cache itself, shows the QK stage reading it).
  trace::Stage st = n >= 1 && n <= 8 ? static_cast<trace::Stage>(n) : trace::Stage::qk;
  if (s.doc) {
    const auto ms = s.doc->markers();
    if (!ms.empty()) st = ms.front().marker->stage;
  }
  // Lessons 6 and 7 are about pictures of partitions and states: open that tab;
  // the cascade lesson needs a shared prefix, so give the problem one if it has none.
  if (st == trace::Stage::v2_partition || st == trace::Stage::cascade_merge) {
    s.tab_request = "partitions";
    s.tab_request_frames = 2;
  }
  if (st == trace::Stage::cascade_merge && s.trace_path.empty() && s.spec.shared_prefix_len == 0) {
    if (s.spec.num_seqs() < 2) s.spec.context_lens = {100, 140};
    s.spec.shared_prefix_len = 4 * s.spec.block_size;
    for (int c : s.spec.context_lens) s.spec.shared_prefix_len = std::min(s.spec.shared_prefix_len, (c - 1) / s.spec.block_size * s.spec.block_size);
    s.events.clear();  // regenerate below
  }
  if (s.trace_path.empty()) {
    const bool changed = st != s.stage || s.events.empty();
    s.stage = st;
    if (changed) {
      s.replay.jump(0);
      regenerate_from_model(s);
    }
  }
  s.last_step_seen = -1;
}

}  // namespace pa::viewer
