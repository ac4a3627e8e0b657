// The viewer's state shared by the panels: the problem, the loaded trace and
// its index, the replay position, the selection, the lesson and fonts.
#pragma once
#include <map>
#include <unordered_map>
#include <optional>
#include <string>
#include <vector>

#include <imgui.h>

#include "core/args.hpp"
#include "core/config_info.hpp"
#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/trace_index.hpp"
#include "lesson.hpp"
#include "pa/reference/problem.hpp"
#include "pa/trace/event.hpp"

namespace pa::viewer {

struct Fonts {
  ImFont* regular = nullptr;
  ImFont* bold = nullptr;
  ImFont* italic = nullptr;
  ImFont* mono = nullptr;
  ImFont* h1 = nullptr;
  ImFont* h2 = nullptr;
  ImFont* small = nullptr;
  float scale = 1.0f;  // HiDPI content scale
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
  KvLayout kv;
  std::vector<int> slot_physical;
  int kv_head = 0;
  bool grid_valid = false;
  ImVec2 grid_origin;
  ThreadGridLayout grid;
};

struct AppState {
  Args args;
  Fonts fonts;
  bool screenshot_mode = false;

  // ---- problem and trace
  ProblemSpec spec;
  trace::Stage stage = trace::Stage::q_to_smem;
  std::string trace_source = "host model";
  std::string trace_revision;
  std::string trace_path;  // empty: host model
  std::vector<trace::Event> events;
  TraceIndex index;
  Granularity granularity = Granularity::instruction;
  int sel_seq = 0, sel_head = 0, sel_partition = 0;  // the thread block the host model traces
  ConfigInfo cfg;
  std::string load_error;  // shown in the window
  double load_ms = 0, index_ms = 0;

  // ---- replay
  int block = 0;
  ReplayState replay;
  int last_step_seen = -1;  // panels scroll to the current step when it changes
  bool step_changed = false;

  // ---- per block, computed at load
  std::vector<int> slot_physical;         // logical block -> physical (-1 unknown)
  std::vector<char> slot_from_problem;    // 1: physical block from the problem, not read by this trace
  std::vector<std::vector<int>> tables;   // every sequence's block table (from the problem; empty if too large)
  std::unordered_map<int, int> slot_of_physical;
  int kv_show = 0;                        // 0 auto (what the trace reads), 1 K, 2 V, 3 both
  bool reads_k = true, reads_v = false;
  int kv_head = 0;
  int token_begin = 0, token_end = 0;     // tokens of this block's partition
  std::vector<int> k_first_step, v_first_step;  // per slot*H*B element: first step that loads it (-1 never)
  std::vector<float> logit_value, prob_value;   // per token of the sequence (NaN if not traced)
  std::vector<int> logit_step, prob_step;
  struct Stat { int step; trace::Step what; trace::Tensor tensor; int warp, lane; float value; };
  std::vector<Stat> stats;                // events with finite values other than logits/probs

  // ---- selection
  Focus focus;
  std::vector<Touch> focus_touches;
  std::vector<int> focus_steps;
  bool focus_tab_request = false;
  bool follow_focus = false;  // step only through the steps where the selection is active

  // ---- lesson
  int lesson = 1;
  std::vector<lesson::LessonEntry> lessons;
  std::optional<lesson::Document> doc;
  std::string lesson_error;
  std::string lessons_dir, source_dir;
  std::map<std::string, std::optional<lesson::AnchorRange>> anchor_cache;
  // Markers of every lesson (stages compose: lesson 4's trace replays QK steps
  // whose source anchors lesson 2 marks).
  std::vector<lesson::StepMarker> all_markers;
  std::map<std::string, SourceFile> source_cache;

  // ---- ui
  bool show_help = false;
  std::string tab_request;  // a tab to select (--tab, or a lesson's natural tab)
  int tab_request_frames = 0;
  bool show_open = false;
  char open_path[512] = {};
  int memory_tab = 0;  // 0 KV cache, 1 Q & shared
  bool memory_tab_request = false;
  DrawnGeometry drawn;

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
void load_lesson(AppState& s, int lesson);
void regenerate_from_model(AppState& s);
void open_trace_file(AppState& s, const std::string& path);
void rebuild_index(AppState& s);
void select_block(AppState& s, int block);
// The marker (anchor) that belongs to the current step, if the lesson has one.
const lesson::StepMarker* marker_for_step(const AppState& s, const ReplayStep* step, int* section = nullptr);

// Panels (one file each under viewer/panels/).
void draw_toolbar(AppState& s);
void draw_lesson_panel(AppState& s);
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

// Small drawing helpers (panels/widgets.cpp).
ImU32 col(Rgba c, float alpha = 1.0f);
ImU32 dim_col(Rgba c, float amount);  // towards the background
void help_marker(const char* text);
void section_title(AppState& s, const char* text);

}  // namespace pa::viewer
