// Loading lessons, traces (host model or file) and timelines in the
// background (core/trace_load.cpp and core/timeline_model.cpp do the work on
// the loaders' threads; this file starts jobs and applies their results on
// the UI thread).
// Nothing here throws: failures become messages the window shows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <unordered_map>
#include <utility>

#include "app/state.hpp"
#include "core/lesson_problem.hpp"
#include "core/names.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/timeline_file.hpp"
#include "pa/trace/trace_file.hpp"

namespace pa::viewer {
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

const StepBinding& current_binding(AppState& s) {
  AppState::BindingCache& c = s.binding_cache;
  const int step = s.replay.current();
  if (c.trace_generation != s.trace_generation || c.block != s.block || c.step != step || c.lesson != s.lesson) {
    c.trace_generation = s.trace_generation;
    c.block = s.block;
    c.step = step;
    c.lesson = s.lesson;
    c.binding = bind_step(s.all_markers, s.stage, s.index, s.block, step, s.lesson);
  }
  return c.binding;
}

void select_block(AppState& s, int b) {
  s.block = std::clamp(b, 0, std::max(0, s.index.num_blocks() - 1));
  s.replay.set_count(s.index.num_steps(s.block));
  s.focus = Focus{};
  s.focus_touches.clear();
  s.focus_steps.clear();
  s.last_step_seen = -1;
  static_cast<BlockCaches&>(s) = compute_block_caches(s.spec, s.stage, s.cfg, s.events, s.index, s.tables, s.block);
  s.cfg.num_warps = std::max(s.cfg.num_warps, s.traced_warps);
  s.memory_tab = s.reads_k || s.reads_v ? 0 : 1;
  s.memory_tab_request = true;
}

std::string default_levels_text(const ProblemSpec& spec) {
  // Everyone shares a span that ends inside a page, pairs share whole pages
  // (where there are pairs to tell apart from everyone), each request has
  // its own tokens.
  const int n = spec.num_seqs(), b = spec.block_size;
  std::string t = std::to_string(n) + ":" + std::to_string(3 * b + 5) + ",";
  if (n >= 4 && n % 2 == 0) t += "2:" + std::to_string(2 * b) + ",";
  return t + "1:" + std::to_string(b + 1);
}

const RefValues* reference_values(AppState& s) {
  const std::string levels = s.levels_text.empty() ? default_levels_text(s.spec) : s.levels_text;
  const std::string key = s.spec.describe() + " | levels " + levels;
  if (s.ref_task.poll() == TaskStatus::done) {
    if (auto r = s.ref_task.take()) s.ref = std::make_shared<const RefValues>(std::move(*r));
  } else if (s.ref_task.status() == TaskStatus::failed) {
    auto r = std::make_shared<RefValues>();
    r->key = s.ref_loading_key;
    r->error = s.ref_task.take_error();
    s.ref = r;
  }
  if (s.ref && s.ref->key == key) return s.ref.get();
  if (!s.ref_task.running() || s.ref_loading_key != key) {
    s.ref_loading_key = key;
    s.ref_task.start([spec = s.spec, key, levels](LoadControl& ctl) {
      RefValues r;
      r.key = key;
      long long tokens = 0;
      for (int c : spec.context_lens) tokens += c;
      if (tokens * spec.num_kv_heads * spec.head_size > (1ll << 23)) {
        r.error = "problem too large to recompute the reference here (" + std::to_string(tokens) + " tokens)";
        return r;
      }
      ctl.set_phase("drawing the problem");
      const PagedProblem p = make_problem(spec);
      r.k_scale = p.k_scale;
      r.v_scale = p.v_scale;
      ctl.check();
      ctl.set_progress(0.3f);
      ctl.set_phase("V2 partitions");
      r.v2 = ref_v2(p, spec.partition_size > 0 ? spec.partition_size : kDefaultPartitionSize);
      ctl.check();
      ctl.set_progress(0.5f);
      if (spec.shared_prefix_len > 0) {
        ctl.set_phase("cascade states");
        r.cascade = ref_cascade(p);
        r.have_cascade = true;
      }
      ctl.check();
      ctl.set_progress(0.7f);
      ctl.set_phase("warp partials");
      r.wp = ref_warp_partials(p);
      r.out = ref_output(p);
      // Every shard count x policy recomputes the whole reference once (the
      // shards partition the tokens): six times, so a smaller bound.
      if (tokens * spec.num_kv_heads * spec.head_size > (1ll << 21)) {
        r.shard_error = "problem too large to shard here (" + std::to_string(tokens) + " tokens)";
      } else {
        ctl.set_phase("shard states");
        for (int policy = 0; policy < 2; ++policy)
          for (int i = 0; i < 3; ++i) {
            ctl.check();
            r.sharded[policy][i] = ref_sharded(p, static_cast<ShardPolicy>(policy), RefValues::kShardCounts[i]);
          }
      }
      // The multi-level cascade of the same shape: its own pages (the
      // levels' spans, drawn like any problem's), the problem's sequences
      // as its requests, no ALiBi (the reference cascade has none).
      r.ml_text = levels;
      try {
        ctl.set_phase("multi-level cascade states");
        const std::vector<CascadeLevelSpec> lv = parse_cascade_levels(levels, spec.num_seqs());
        long long ml_tokens = 0;
        for (const CascadeLevelSpec& l : lv)
          for (int t : l.group_tokens) ml_tokens += t;
        if (ml_tokens * spec.num_kv_heads * spec.head_size > (1ll << 21)) {
          r.ml_error = "levels too large to compute here (" + std::to_string(ml_tokens) + " tokens)";
        } else {
          ProblemSpec base = spec;
          base.alibi = false;
          const CascadeProblem cp = make_cascade_problem(base, lv);
          r.ml = ref_multilevel_cascade(cp.queries, cp.cache(KvLayout::vllm), cp.cascade);
          r.ml_cascade = cp.cascade;
        }
      } catch (const std::exception& e) {
        r.ml_error = e.what();
      }
      ctl.set_progress(1.0f);
      return r;
    });
  }
  if (s.screenshot_mode) {  // deterministic pictures: wait for it
    s.ref_task.wait();
    return reference_values(s);
  }
  return nullptr;
}

const ProblemSpec& edited_spec(const AppState& s) {
  return s.loader.running() && s.loading_spec ? *s.loading_spec : s.spec;
}

void start_load(AppState& s, LoadRequest req) {
  s.loading = req;
  s.loading_spec.reset();
  if (req.kind == LoadRequest::Kind::model) s.loading_spec = req.spec;
  s.loader.start([req = std::move(req)](LoadControl& ctl) { return load_trace(req, ctl); });
}

namespace {

// The block of the trace with the label asked for, in row (seq, head); a
// prefix chunk is labelled with the first row it computes, so any block with
// its label will do. -1 if the trace has none.
int find_labelled_block(const TraceIndex& index, int seq, int head, int label) {
  if (const int b = index.find_block(BlockKey{seq, head, label}); b >= 0) return b;
  if (is_prefix_block(label))
    for (int b = 0; b < index.num_blocks(); ++b)
      if (index.block(b).partition == label) return b;
  return -1;
}

std::string blocks_of(const TraceIndex& index, trace::Stage stage) {
  std::string out;
  const int n = index.num_blocks();
  for (int b = 0; b < n && b < 8; ++b) out += (b ? ", " : "") + describe_block(index.block(b), stage);
  if (n > 8) out += ", ... (" + std::to_string(n) + " in all)";
  return out;
}

// The finished load becomes what the window shows (UI thread, cheap moves).
void apply(AppState& s, LoadedTrace&& t) {
  s.spec = t.spec;
  if (s.levels_text.empty()) s.levels_edit[0] = '\0';  // the new problem's default levels, once computed
  s.stage = t.stage;
  s.problem_stage = t.stage;
  s.cfg = t.cfg;
  s.trace_source = t.source;
  s.trace_revision = t.revision;
  s.trace_path = t.path;
  s.sel_seq = t.sel_seq;
  s.sel_head = t.sel_head;
  s.sel_partition = t.sel_partition;
  s.events = std::move(t.events);
  s.index = std::move(t.index);
  s.granularity = s.index.granularity();
  s.tables = std::move(t.tables);
  s.load_ms = t.load_ms;
  s.index_ms = t.index_ms;
  s.last_total_load_ms = t.total_ms;
  s.load_message = t.message;
  ++s.trace_generation;
  const int keep = s.replay.current();
  s.block = t.block;
  s.replay.set_count(s.index.num_steps(s.block));
  s.focus = Focus{};
  s.focus_touches.clear();
  s.focus_steps.clear();
  s.last_step_seen = -1;
  static_cast<BlockCaches&>(s) = std::move(t.block0);
  // Kernels that are not KernelConfig's (stage 7's merge kernel: 256 threads)
  // draw as many warps as their trace has.
  s.cfg.num_warps = std::max(s.cfg.num_warps, s.traced_warps);
  s.memory_tab = s.reads_k || s.reads_v ? 0 : 1;
  s.memory_tab_request = true;
  // The thread block asked for (--block, the Problem tab): a reduce, merge or
  // prefix block is traced alongside a partition and shown instead of it.
  if (t.kind != LoadRequest::Kind::file || s.block_requested) {
    const int b = find_labelled_block(s.index, s.sel_seq, s.sel_head, s.sel_label);
    if (b >= 0 && b != s.block) select_block(s, b);
    if (b < 0 && s.index.num_blocks() > 0)
      s.load_error = "thread block seq " + std::to_string(s.sel_seq) + ", head " + std::to_string(s.sel_head) +
                     ", block " + block_label_text(s.sel_label) + " is not in this " + stage_name(s.stage) +
                     " trace; showing " + describe_block(s.index.block(s.block), s.stage) + ". Its blocks: " +
                     blocks_of(s.index, s.stage) + ".";
  }
  s.replay.jump(t.step_after >= 0 ? t.step_after : keep);
}

}  // namespace

void request_model(AppState& s, const ProblemSpec& spec, trace::Stage stage, int step_after) {
  LoadRequest r;
  r.kind = LoadRequest::Kind::model;
  r.spec = spec;
  r.stage = stage;
  r.sel_seq = s.sel_seq;
  r.sel_head = s.sel_head;
  r.sel_partition = model_partition_of_label(s.sel_label);
  r.granularity = s.granularity;
  r.step_after = step_after;
  s.load_error.clear();
  s.problem_stage = stage;
  start_load(s, std::move(r));
}

void regenerate_from_model(AppState& s) { request_model(s, edited_spec(s), s.stage, 0); }

void open_trace_file(AppState& s, const std::string& path, bool fallback_to_model) {
  LoadRequest r;
  r.kind = LoadRequest::Kind::file;
  r.path = path;
  r.granularity = s.granularity;
  r.step_after = 0;
  r.fallback_to_model = fallback_to_model;
  s.load_error.clear();
  start_load(s, std::move(r));
}

void rebuild_index(AppState& s) {
  LoadRequest r;
  r.kind = LoadRequest::Kind::reindex;
  r.spec = s.spec;
  r.stage = s.stage;
  r.path = s.trace_path;
  r.source = s.trace_source;
  r.revision = s.trace_revision;
  r.sel_seq = s.sel_seq;
  r.sel_head = s.sel_head;
  r.sel_partition = s.sel_partition;
  r.events = std::make_shared<const std::vector<trace::Event>>(s.events);
  r.tables = s.tables;
  r.granularity = s.granularity;
  r.step_after = -1;
  start_load(s, std::move(r));
}

void cancel_load(AppState& s) {
  s.loader.cancel();
  s.loader.clear_cancelled();
  s.loading_spec.reset();
}

namespace {
// The block tables of a large problem arrive after its trace (tables_pending).
void poll_tables(AppState& s) {
  if (s.tables_task.poll() != TaskStatus::done) {
    if (s.tables_task.status() == TaskStatus::failed) s.tables_task.take_error();  // problem_tables never throws
    return;
  }
  auto t = s.tables_task.take();
  if (!t || s.tables_key != s.spec.describe()) return;
  s.tables = std::move(*t);
  // Slots the trace does not map (a stage that does not read the table) take the problem's.
  if (std::find(s.slot_physical.begin(), s.slot_physical.end(), -1) != s.slot_physical.end() || s.slot_physical.empty()) {
    const int keep = s.replay.current();
    const Focus f = s.focus;
    select_block(s, s.block);
    s.replay.jump(keep);
    if (f.active()) s.set_focus(f);
  }
}

// A finished timeline replaces the one shown; a failed one leaves it and
// says why (the reader's message names the file and what is wrong).
void poll_timeline(AppState& s) {
  switch (s.timeline_loader.poll()) {
    case TaskStatus::done:
      if (auto t = s.timeline_loader.take()) {
        s.timeline = std::move(t->model);
        s.timeline_read_ms = t->read_ms;
        s.timeline_index_ms = t->index_ms;
        s.timeline_error.clear();
        TimelineUi& ui = s.timeline_ui;
        ui.view_set = false;
        ui.legend_phase = -1;
        ui.scroll_y = 0;
        ui.level = TimelineLevel::grid;
        ui.sm = 0;
        ui.block = 0;
        ui.rows.reset();
        ui.rows_model = nullptr;
        ui.view_note.clear();
        if (const auto v = std::exchange(ui.pending_view, std::nullopt)) {
          const std::string shown = "; showing the grid";
          if (v->level == TimelineLevel::sm) {
            if (v->sm < s.timeline->num_sms()) {
              ui.level = TimelineLevel::sm;
              ui.sm = v->sm;
            } else {
              ui.view_note = "--timeline-view: the timeline has SMs 0-" + std::to_string(s.timeline->num_sms() - 1) + shown;
            }
          } else if (v->level == TimelineLevel::block) {
            TimelineBlock named;
            named.kernel = v->kernel;
            named.index = v->block;
            if (const int b = s.timeline->find_block(v->kernel, v->block); b >= 0) {
              ui.level = TimelineLevel::block;
              ui.block = b;
            } else {
              ui.view_note = "--timeline-view: the timeline has no " + block_label(named) + shown;
            }
          }
        }
      }
      break;
    case TaskStatus::failed:
      s.timeline_error = s.timeline_loader.take_error();
      break;
    case TaskStatus::cancelled:
      s.timeline_loader.clear_cancelled();
      break;
    default:
      break;
  }
}

}  // namespace

void open_timeline_file(AppState& s, const std::string& path) {
  s.timeline_error.clear();
  s.timeline_loading = path;
  s.timeline_loader.start([path](LoadControl& ctl) {
    using Clock = std::chrono::steady_clock;
    const auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    AppState::LoadedTimeline out;
    ctl.set_phase("reading the timeline");
    const auto t0 = Clock::now();
    trace::TimelineData data = trace::read_timeline(path);
    const auto t1 = Clock::now();
    ctl.check();
    ctl.set_progress(0.5f);
    ctl.set_phase("indexing the timeline");
    out.model = std::make_shared<const TimelineModel>(std::move(data), path);
    out.read_ms = ms(t0, t1);
    out.index_ms = ms(t1, Clock::now());
    return out;
  });
}

void close_timeline(AppState& s) {
  s.timeline_loader.cancel();
  s.timeline_loader.clear_cancelled();
  s.timeline.reset();
  s.timeline_error.clear();
  s.timeline_ui.rows.reset();
  s.timeline_ui.rows_model = nullptr;
  s.timeline_ui.rects.clear();
  s.timeline_ui.rects_key = {};
}

bool poll_load(AppState& s) {
  poll_tables(s);
  poll_timeline(s);
  switch (s.loader.poll()) {
    case TaskStatus::done: {
      std::optional<LoadedTrace> t = s.loader.take();
      s.loading_spec.reset();
      if (!t) return false;
      const bool from_file = t->kind == LoadRequest::Kind::file;
      const bool tables_pending = t->tables_pending;
      apply(s, std::move(*t));
      apply_open_step(s);
      if (tables_pending) {
        s.tables_key = s.spec.describe();
        s.tables_task.start([spec = s.spec](LoadControl&) { return problem_tables(spec); });
      }
      // A trace file shows the lesson of its stage (lesson N teaches stage N).
      const int n = static_cast<int>(s.stage);
      if (from_file && !s.keep_lesson && n != s.lesson && n >= 0 && n <= 8) load_lesson(s, n);
      s.keep_lesson = false;
      return true;
    }
    case TaskStatus::failed: {
      const std::string e = s.loader.take_error();
      s.loading_spec.reset();
      if (s.loading.kind == LoadRequest::Kind::file) {
        // Keep what was shown before; say why the file was not opened.
        s.load_error = "cannot open trace '" + s.loading.path + "': " + e;
        s.keep_lesson = false;
        if (s.loading.fallback_to_model || s.index.num_blocks() == 0) {
          const std::string keep = s.load_error + "  (showing the host model instead)";
          s.trace_path.clear();
          load_lesson(s, s.lesson);  // the lesson's stage from the host model
          s.load_error = keep;
        }
      } else if (s.loading.kind == LoadRequest::Kind::model) {
        s.load_error = "cannot build the trace: " + e +
                       (s.index.num_blocks() > 0 ? " (the trace shown is the previous problem's)" : "");
      } else {
        s.load_error = "cannot index the trace: " + e;
      }
      return false;
    }
    case TaskStatus::cancelled:
      s.loader.clear_cancelled();
      return false;
    default:
      return false;
  }
}

void wait_for_load(AppState& s) {
  for (int guard = 0;
       guard < 8 && (s.loader.running() || s.tables_task.running() || s.timeline_loader.running()); ++guard) {
    s.loader.wait();
    s.tables_task.wait();
    s.timeline_loader.wait();
    poll_load(s);  // may start a fallback or the trace's lesson (no new load for a file's lesson)
  }
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
          for (LessonMarker& m : lesson_markers(d, e.number)) s.all_markers.push_back(std::move(m));
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
  // The lesson's natural tab (lesson 0: the paged cache; 6 and 7: the
  // partitions picture) and opening step (core/lesson_problem.hpp).
  const LessonOpening opening = lesson_opening(n, st);
  if (*opening.tab) {
    s.tab_request = opening.tab;
    s.tab_request_frames = 2;
  }
  s.open_step = opening.step;
  s.open_tensor = opening.tensor;
  // The problem the lesson needs to show its stage (core/lesson_problem.hpp:
  // 6 several partitions, 7 a shared prefix, 8 a GQA group); the command
  // line's problem values are kept.
  if (s.trace_path.empty()) {
    LessonProblemLocks locks;
    locks.context = !s.args.context_lens.empty();
    locks.heads = s.args.num_heads.has_value() || s.args.num_kv_heads.has_value();
    locks.partition_size = s.args.partition_size.has_value();
    locks.prefix = s.args.prefix.has_value();
    const LessonProblem lp = lesson_problem_of(n, edited_spec(s), st, s.sel_seq, locks);
    // Already showing (or loading) this stage's trace of this problem: nothing to do.
    const trace::Stage shown = s.loader.running() && s.loading.kind == LoadRequest::Kind::model ? s.loading.stage : s.stage;
    const bool have = s.loader.running() ? s.loading.kind == LoadRequest::Kind::model
                                         : s.index.num_blocks() > 0 || !s.load_message.empty();
    if (lp.changed || st != shown || !have) {
      s.replay.jump(0);
      request_model(s, lp.spec, st, 0);
    }
  }
  if (!s.loader.running()) apply_open_step(s);  // the trace shown already fits: open it now
  s.last_step_seen = -1;
}

void apply_open_step(AppState& s) {
  if (!s.open_step) return;
  for (int k = s.index.find_step(s.block, *s.open_step); k >= 0; k = s.index.find_step(s.block, *s.open_step, k + 1))
    if (s.open_tensor == trace::Tensor::none || s.index.steps(s.block)[k].tensor == s.open_tensor) {
      s.replay.jump(k);
      break;
    }
  s.open_step.reset();
}

}  // namespace pa::viewer
