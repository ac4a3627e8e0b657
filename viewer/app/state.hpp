// The viewer's state shared by the panels, in three parts: the data loaded
// (LoadedData: the trace shown with its problem and index, the lesson text,
// the files read, the timeline), what the learner chose and how the window
// shows it (UiState: replay position, thread block, selection, tabs, scroll,
// the timeline's view), and AppState, which holds both with the command
// line, the fonts and the loads running in the background. A load replaces
// LoadedData as a whole (app/loader.cpp) and resets the parts of UiState
// that pointed into it.
#pragma once
#include <functional>
#include <map>
#include <unordered_map>
#include <optional>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/style.hpp"
#include "core/args.hpp"
#include "core/config_info.hpp"
#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/trace_index.hpp"
#include "core/trace_load.hpp"
#include "core/background.hpp"
#include "core/exercise.hpp"
#include "core/lesson_binding.hpp"
#include "core/timeline_model.hpp"
#include "core/timeline_view.hpp"
#include "pa/lessons/lesson.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/multilevel_cascade.hpp"
#include "pa/reference/sharded.hpp"
#include "pa/core/problem.hpp"
#include "pa/core/event.hpp"

namespace pa::viewer {

// The CPU reference's values for the shown problem (values and partitions
// panels), computed in the background: a problem of millions of elements
// takes seconds to draw and reduce.
struct RefValues {
  std::string key;    // ProblemSpec::describe() it was computed for
  std::string error;  // e.g. too large to recompute here
  V2Ref v2;
  CascadeRef cascade;
  bool have_cascade = false;
  WarpPartials wp;
  std::vector<double> out;
  // The cache's scales as make_problem resolved them (an fp8 cache's scales
  // chosen from the data, when the problem gives none; 1 otherwise).
  float k_scale = 1.0f, v_scale = 1.0f;
  // Context parallelism (the Partitions tab's "Across GPUs"): the problem
  // sharded over kShardCounts[i] GPUs with each policy, [policy][i]; empty
  // with shard_error set where the problem is too large to redo that often.
  static constexpr int kShardCounts[3] = {2, 4, 8};
  ShardedRef sharded[2][3];
  std::string shard_error;
  // Multi-level cascade (the Partitions tab's "Across levels"): the levels
  // text it was computed for (parse_cascade_levels over the problem's
  // sequences as requests), the tables and every level's states; ml_error
  // says why there are none.
  std::string ml_text;
  MultiLevelCascade ml_cascade;
  MultiLevelRef ml;
  std::string ml_error;
};

struct SourceFile {
  std::string path;
  std::vector<std::string> lines;
  std::string error;
};

// Where a panel drew what the screenshot tests check (screen pixels).
struct DrawnGeometry {
  bool kv_valid = false;
  ImVec2 kv_origin;
  KvPanelLayout kv;
  std::vector<int> slot_physical;
  int kv_head = 0;
  bool grid_valid = false;
  ImVec2 grid_origin;
  ThreadGridLayout grid;
  // The toolbar's "Lesson" label (HiDPI test: its glyphs' height in the image).
  bool label_valid = false;
  ImVec2 label_min, label_max;
  float left_w = 0, mid_w = 0, right_w = 0, col_h = 0;  // the three columns
  // The kv_smem tile view (first word's cell, cell size, words drawn).
  bool smem_valid = false;
  ImVec2 smem_origin;
  float smem_cell_w = 0, smem_cell_h = 0;
  int smem_words = 0;
  std::int64_t smem_base = 0;  // byte offset of word 0
  // The tile view's scroll, and its visible part on screen (smem_origin
  // moves with the scroll: a word is visible when its rectangle is inside).
  float smem_scroll_y = 0, smem_view_top = 0, smem_view_h = 0;
  // The lesson's code blocks as drawn: the width their longest line needs
  // (with padding), the box's width, whether it has a horizontal scrollbar,
  // whether it is on screen, and how far it scrolls (measured on screen
  // only). Readable: needed <= box, or a scrollbar reaching needed.
  struct CodeBlock {
    int line = 0;
    float needed_w = 0, box_w = 0;
    bool scrollbar = false, visible = false;
    float scroll_max_x = 0;
  };
  std::vector<CodeBlock> code_blocks;
  // The Partitions tab's "Across GPUs" as drawn: GPUs, policy, the page map's
  // blocks and each GPU's weight e^(lse_g - lse) (0 for an empty state).
  int shard_gpus = 0, shard_policy = -1, shard_blocks = 0;
  std::vector<double> shard_weights;
  // Its "Across levels" as drawn: the request shown, then each level's weight
  // e^(lse_l - lse) (0 where the request's group there is empty).
  int level_request = -1;
  std::vector<double> level_weights;
  // The lesson's link words as drawn (a link of several words: one entry a
  // word), and whether the link is a timeline that a click opens.
  struct LessonLink {
    ImVec2 min, max;
    std::string url;
    bool timeline = false;
  };
  std::vector<LessonLink> lesson_links;
  // The lesson text's visible rows (top, bottom) and, when the step is bound
  // to a section of the lesson shown, that section's top: on screen when
  // top <= section < bottom.
  bool lesson_section_valid = false;
  float lesson_view_top = 0, lesson_view_bottom = 0, lesson_section_top = 0;
  // The Timeline panel: its plot (the rows' area right of the labels and
  // below the axis), the rows' height and scroll, and each legend swatch
  // (phase, then its rectangle x0 y0 x1 y1).
  bool timeline_valid = false;
  ImVec2 timeline_plot_min;
  float timeline_plot_w = 0, timeline_plot_h = 0, timeline_row_h = 0;
  int timeline_rows = 0, timeline_lane_capacity = 1;
  std::vector<std::pair<int, ImVec4>> timeline_legend;
};

// One exercise of the lesson shown (panels/exercise_panel.cpp): what the
// learner typed and checked, and the answer computed from the trace shown
// (recomputed when the trace changes, so the verdict follows the trace).
struct ExerciseUi {
  char typed[32] = {};
  std::string checked;  // the text last checked; its verdict is drawn
  int checks = 0;
  bool show_answer = false;
  bool from_args = false;  // --answer ID=VALUE filled it in
  float hold_scroll = 0;   // "Show me": the lesson text's scroll, kept while the step changes
  int hold_frames = 0;
  std::string answer_key;  // the trace the answer was computed for
  ExerciseAnswer answer;
};

// The Timeline panel's choices (panels/timeline_panel.cpp), and what it
// keeps between frames: the rows of the level shown and the rectangles of
// the last frame, recomputed only when something they depend on changes.
struct TimelineUi {
  TimelineLevel level = TimelineLevel::grid;
  int sm = 0;     // level sm: the SM shown
  int block = 0;  // level block: the block shown (index into TimelineModel::blocks())
  TimeRange view;
  bool view_set = false;      // false: fit the view at the next frame (a timeline just arrived)
  int legend_phase = -1;      // a phase picked in the legend (-1: none; the replay's step then picks)
  std::uint32_t highlight = 0;  // the phases highlighted in the last frame (bit p: Phase p)
  float scroll_y = 0;         // the rows' vertical scroll, in pixels
  float pane_fraction = 0.42f;  // the panel's share of the window's height
  bool dragging = false;      // a drag that began in the plot pans it
  std::optional<TimelineViewArg> pending_view;  // --timeline-view, applied when the timeline arrives
  std::string view_note;      // why --timeline-view was not followed (an SM or block the timeline lacks)

  // The rows shown: for (timeline, level, target).
  const TimelineModel* rows_model = nullptr;
  TimelineLevel rows_level = TimelineLevel::grid;
  int rows_target = -1;
  TimelineRows rows;
  // The last frame's rectangles, for its (rows, view, plot size, lane capacity, scroll).
  struct RectKey {
    const void* rows = nullptr;
    double begin = 0, end = 0;
    int width = 0, first_row = 0, last_row = 0, lane_capacity = 0;
    bool operator==(const RectKey&) const = default;
  } rects_key;
  std::vector<TimelineRect> rects;
  TimelineScratch scratch;
  TimelineRectStats stats;     // of the last time the rectangles were computed
  double rects_ms = 0;         // how long that took
  int recomputed = 0;          // how many times they were (the bench reports it)
  std::uint32_t hovered = kNoSpan;  // the span under the pointer in the last frame
};

// What was loaded: the trace shown (from the host model or a file) with the
// problem and the thread block it was made for, its index, what the load
// said, and the lesson text with the kernel files it quotes. A load writes it
// when it is applied; the panels read it, except that the source panel reads
// kernel files into the caches when first shown and the Problem tab sets the
// thread block (and a message) for the next load.
struct LoadedData {
  // ---- problem and trace
  ProblemSpec spec;
  trace::Stage stage = trace::Stage::q_to_smem;
  std::string trace_source = "host model";
  std::string trace_revision;
  std::string trace_path;  // empty: host model
  std::vector<trace::Event> events;
  TraceIndex index;
  int sel_seq = 0, sel_head = 0, sel_partition = 0;  // the thread block the host model traces
  ConfigInfo cfg;
  std::vector<std::vector<int>> tables;   // every sequence's block table (from the problem; empty if too large)
  std::string load_error;  // shown in the window
  std::string load_message;  // not an error (e.g. a stage without a host model)
  double load_ms = 0, index_ms = 0;
  int trace_generation = 0;  // counts the traces applied (caches keyed by the trace compare it)

  // ---- lesson
  std::vector<lesson::LessonEntry> lessons;
  std::optional<lesson::Document> doc;
  std::string lesson_error;
  std::string lessons_dir, source_dir;
  std::map<std::string, std::optional<lesson::AnchorRange>> anchor_cache;
  // Markers of every lesson (stages compose: lesson 4's trace replays QK steps
  // whose source anchors lesson 2 marks).
  std::vector<LessonMarker> all_markers;
  std::map<std::string, SourceFile> source_cache;

  // ---- timeline: when each warp ran each step, measured on a GPU (its own
  // file, loaded beside the trace; the Timeline panel draws it)
  std::shared_ptr<const TimelineModel> timeline;
  std::string timeline_error;  // the reader's message when the last timeline did not open
  double timeline_read_ms = 0, timeline_index_ms = 0;
};

// Frames in which the lesson scrolls to a new step's section: ImGui fits a
// new table's columns over its first three frames, so in the first frames of
// a lesson the text above a section is taller than it will be, and a single
// scroll would land below the section. Screenshot mode draws one frame more.
inline constexpr int kLessonRescrollFrames = 4;

// What the learner chose and how the window shows it: the replay position,
// the thread block and the selection, the lesson open, the tabs, the scroll
// positions kept between frames, and the geometry the last frame drew.
struct UiState {
  // ---- replay
  Granularity granularity = Granularity::instruction;
  int block = 0;
  ReplayState replay;
  int last_step_seen = -1;  // panels scroll to the current step when it changes
  bool step_changed = false;
  // Frames left in which the lesson scrolls to the step's section again
  // (kLessonRescrollFrames from a new step).
  int lesson_rescroll_frames = 0;
  // The thread block to show (--block, the Problem tab): its label in
  // Event::partition, which may name a reduce, merge or prefix block that the
  // model traces alongside partition sel_partition (model_partition_of_label).
  int sel_label = 0;
  bool block_requested = false;  // a trace file shows sel_label's block too (else its first)
  int kv_show = 0;               // 0 auto (what the trace reads), 1 K, 2 V, 3 both
  // The stage the Problem tab traces: the last one asked of the host model,
  // or the shown trace's if that arrived later. After a failed load (a
  // lesson whose stage refuses the problem) it is the stage asked for, so
  // fixing the problem there traces the lesson's stage, not the one still shown.
  trace::Stage problem_stage = trace::Stage::q_to_smem;

  // ---- selection
  Focus focus;
  std::vector<Touch> focus_touches;
  std::vector<int> focus_steps;
  bool focus_tab_request = false;
  bool follow_focus = false;  // step only through the steps where the selection is active

  // ---- lesson
  int lesson = 1;
  std::optional<trace::Step> open_step;  // the lesson opens at its first such step, once its trace is in
  trace::Tensor open_tensor = trace::Tensor::none;  // ... that accesses this tensor (none: any)
  // The binding of the step shown (core/lesson_binding.hpp), kept while the
  // step, block, lesson and trace stay the same: the lesson and source panels
  // both read it every frame.
  struct BindingCache {
    int trace_generation = -1, block = -1, step = -1, lesson = -1;
    StepBinding binding;
  } binding_cache;
  std::map<std::string, int> buffer_scrolled_step;  // shared-memory buffer title -> step it was scrolled to
  // The shared-memory panel's tint of earlier stores: first_store_steps of
  // each shared tensor of the shown block (core/highlight.hpp).
  struct StoreCache {
    int trace_generation = -1, block = -1;
    std::map<trace::Tensor, std::vector<int>> first;
  } store_cache;
  std::map<std::string, ExerciseUi> exercises;  // by "lesson:id"

  // ---- window
  bool show_help = false;
  std::string tab_request;  // a tab to select (--tab, or a lesson's natural tab)
  int tab_request_frames = 0;
  bool show_open = false;
  char open_path[512] = {};
  // The Partitions tab's "Across GPUs": ShardPolicy and an index into RefValues::kShardCounts.
  int shard_policy = 0, shard_count = 1;
  // Its "Across levels": G:T,... per level (parse_cascade_levels); empty:
  // default_levels_text of the problem.
  std::string levels_text;
  char levels_edit[128] = {};
  int memory_tab = 0;  // 0 KV cache, 1 Q & shared
  bool memory_tab_request = false;
  char open_timeline_path[512] = {};
  TimelineUi timeline_ui;
  DrawnGeometry drawn;
};

// AppState is-a LoadedData and a UiState, so the panels read s.events and
// s.replay alike; and is-a BlockCaches: the current thread block's caches
// (slot_physical, k_first_step, logit_value, ...) are computed by
// compute_block_caches, in the background at load, and read by the panels as
// s.slot_physical etc.
struct AppState : LoadedData, UiState, BlockCaches {
  Args args;
  Fonts fonts;
  bool screenshot_mode = false;

  // ---- loading in the background (app/loader.cpp)
  BackgroundTask<LoadedTrace> loader;
  LoadRequest loading;                    // what the loader is doing (valid while loader.running())
  std::optional<ProblemSpec> loading_spec;  // the problem being generated (the Problem tab shows it)
  bool initial_applied = false;           // the first trace has arrived (command-line --step/--select applied)
  bool keep_lesson = false;               // a trace file opened with --lesson keeps that lesson
  double last_total_load_ms = 0;
  BackgroundTask<std::vector<std::vector<int>>> tables_task;  // block tables after a large load
  std::string tables_key;
  BackgroundTask<RefValues> ref_task;
  std::string ref_loading_key;
  std::shared_ptr<const RefValues> ref;
  struct LoadedTimeline {
    std::shared_ptr<const TimelineModel> model;
    double read_ms = 0, index_ms = 0;
  };
  BackgroundTask<LoadedTimeline> timeline_loader;
  std::string timeline_loading;  // the path being loaded

  // ---- helpers
  const std::vector<ReplayStep>& steps() const { return index.steps(block); }
  const ReplayStep* current_step() const {
    const int n = index.num_steps(block);
    return n > 0 ? &index.steps(block)[replay.current()] : nullptr;
  }
  std::span<const std::uint32_t> current_events() const { return index.events_of(block, replay.current()); }
  std::string step_label(int step) const;
  void set_focus(const Focus& f);
  // Next / previous step (dir +1 / -1), through the selection's steps when follow_focus is on.
  void step_by(int dir);
};

// Loading (app/loader.cpp). Never throw: errors land in load_error / lesson_error.
// Traces load in the background: these start a job (cancelling one under
// way) and return at once; poll_load applies the result when it is ready.
void load_lesson(AppState& s, int lesson);
void regenerate_from_model(AppState& s);             // s.spec, s.stage
void request_model(AppState& s, const ProblemSpec& spec, trace::Stage stage, int step_after = 0);
void open_trace_file(AppState& s, const std::string& path, bool fallback_to_model = false);
void rebuild_index(AppState& s);
void cancel_load(AppState& s);
void start_load(AppState& s, LoadRequest req);  // any request (cancels one under way)
// Once per frame: applies a finished load, or shows its error. True if a trace was applied.
bool poll_load(AppState& s);
// Screenshot and bench modes: wait until every load (and a fallback) is done.
void wait_for_load(AppState& s);
// Timelines load in the background too (poll_load applies them); a failure
// keeps the timeline shown and sets timeline_error to the reader's message.
void open_timeline_file(AppState& s, const std::string& path);
void close_timeline(AppState& s);
void select_block(AppState& s, int block);
// Jumps to the opening step of the lesson (s.open_step), once, if set.
void apply_open_step(AppState& s);
// The reference values of s.spec, or nullptr while they are computed in the
// background (the caller shows that; the window stays live). Never throws.
const RefValues* reference_values(AppState& s);
// The Partitions tab's default levels for a problem (G:T,...): all its
// sequences share a span ending inside a page, pairs share two pages, each
// has its own tokens.
std::string default_levels_text(const ProblemSpec& spec);
// The problem the Problem tab edits: the one being loaded, else the shown one.
const ProblemSpec& edited_spec(const AppState& s);
// The lesson marker (section and source anchor) of the current step, chosen
// by the step and the shown thread block's role (core/lesson_binding.hpp);
// for a step without a marker of its own, the nearest marked step's, flagged
// as the enclosing region.
const StepBinding& current_binding(AppState& s);

// Panels (one file each under viewer/panels/).
void draw_toolbar(AppState& s);
void draw_lesson_panel(AppState& s);
// An exercise block of the lesson: its question (drawn by the lesson panel
// through draw_question), the answer box, the verdict, the hint.
void draw_exercise(AppState& s, const lesson::Block& b, const std::function<void(const lesson::Block&)>& draw_question);
void draw_config_panel(AppState& s);
void draw_trace_panel(AppState& s);
void draw_source_panel(AppState& s);
void draw_thread_panel(AppState& s);
void draw_kv_panel(AppState& s);
void draw_smem_panel(AppState& s);
void draw_requests_panel(AppState& s);
void draw_values_panel(AppState& s);
void draw_partitions_panel(AppState& s);
void draw_inspect_panel(AppState& s);
void draw_help_overlay(AppState& s);
// The Timeline panel: the loaded timeline's facts, its legend and the spans
// over time (panels/timeline_panel.cpp); the frame shows it below the
// columns while a timeline is loaded, loading or failed.
void draw_timeline_panel(AppState& s);
bool timeline_panel_shown(const AppState& s);

// Small drawing helpers (panels/widgets.cpp).
ImU32 col(Rgba c, float alpha = 1.0f);
inline ImVec4 vec4(Rgba c) { return ImVec4(c.r, c.g, c.b, c.a); }  // for ImGui's text colours
ImU32 dim_col(Rgba c, float amount);  // towards the background
Rgba dimmed(Rgba c, float amount);    // the same colour, as Rgba
// A request's cost against its ideal (sectors, L2 requests, wavefronts): the
// text colour, palette::over_ideal when over it, else palette::at_ideal.
ImVec4 cost_colour(bool over_ideal);
ImVec4 cost_colour(int cost, int ideal);  // cost_colour(cost > ideal)
void help_marker(const char* text);
void section_title(AppState& s, const char* text);
// A bold title and, after it, a detail in the disabled colour, wrapped at
// the panel's edge (never cut off).
// With help text, a (?) after the title shows it on hover.
void title_with_detail(AppState& s, const char* title, const std::string& detail, const char* help = nullptr);
// A colour key: swatches with words in the small font, flowing onto the next
// line at the panel's edge (the strips above the memory views), or one per
// row (the help overlay's table: per_row).
class Legend {
 public:
  explicit Legend(AppState& s, bool per_row = false);
  ~Legend();
  Legend(const Legend&) = delete;
  Legend& operator=(const Legend&) = delete;
  void swatch(Rgba fill, const char* text);                 // a filled square
  void framed(Rgba fill, Rgba frame, const char* text);     // a square with a frame
  void lanes(const char* text);                             // the thread colours (hue by lane, shade by warp)
  // A line band as the source panel draws a region: its fill, a line number
  // in number_colour, then the text in the region's code colour.
  void band(Rgba fill, Rgba number_colour, const char* text);
  void words(Rgba text_colour, const char* sample, const char* text);  // coloured sample text
  // A swatch that is a button (the timeline's phases): framed white when on.
  // True when clicked.
  bool toggle(Rgba fill, const char* text, bool on);

 private:
  // Reserves an item of the given width on this line (or the next) and
  // returns its top-left; with a button id the item is a button, and
  // clicked_ says whether it was clicked.
  ImVec2 place(float width, const char* button_id = nullptr);
  bool clicked_ = false;
  bool per_row_, first_ = true;
};

}  // namespace pa::viewer
