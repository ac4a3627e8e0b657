// pa-viewer: step through each stage's thread/warp/block mapping over the
// paged KV cache. This file reads the command line into the viewer's state,
// opens the window, starts loading the lesson and its trace, and runs the
// loop that draws the frames. What it wires together, one file each: the
// window backend (window.cpp) and the look (style.cpp), the frame's panels
// (frame.cpp, viewer/panels), the screenshot driver (driver.cpp), the frame
// benchmark (bench.cpp), the remembered settings (settings.cpp) and the
// loading (loader.cpp, over pa_viewer_core in viewer/core).
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "app/bench.hpp"
#include "app/driver.hpp"
#include "app/frame.hpp"
#include "app/settings.hpp"
#include "app/state.hpp"
#include "app/window.hpp"

#ifndef PA_LESSONS_DIR
#define PA_LESSONS_DIR "lessons"
#endif
#ifndef PA_KERNEL_STAGES_DIR
#define PA_KERNEL_STAGES_DIR "kernels/stages"
#endif

using namespace pa::viewer;

namespace {

// SIGINT/SIGTERM end the main loop cleanly, so settings are still saved.
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

// The command line's problem, thread block and folders, before anything loads.
void state_from_args(AppState& s, const Args& args) {
  s.args = args;
  s.screenshot_mode = !args.screenshot.empty();
  s.lessons_dir = !args.lessons_dir.empty() ? args.lessons_dir : PA_LESSONS_DIR;
  s.source_dir = !args.source_dir.empty() ? args.source_dir : PA_KERNEL_STAGES_DIR;
  if (args.dtype) s.spec.dtype = *args.dtype;
  if (args.head_size) s.spec.head_size = *args.head_size;
  if (args.block_size) s.spec.block_size = *args.block_size;
  if (args.num_heads) s.spec.num_heads = *args.num_heads;
  if (args.num_kv_heads) s.spec.num_kv_heads = *args.num_kv_heads;
  if (args.partition_size) s.spec.partition_size = *args.partition_size;
  if (args.prefix) s.spec.shared_prefix_len = *args.prefix;
  if (args.alibi) s.spec.alibi = true;
  if (args.kv_dtype) s.spec.kv_dtype = *args.kv_dtype;
  if (args.kv_layout) s.spec.kv_layout = *args.kv_layout;
  if (args.page_table) s.spec.page_table = *args.page_table;
  if (args.k_scale) s.spec.k_scale = *args.k_scale;
  if (args.v_scale) s.spec.v_scale = *args.v_scale;
  if (!args.context_lens.empty()) s.spec.context_lens = args.context_lens;
  if (args.block_seq) {
    s.sel_seq = *args.block_seq;
    s.sel_head = *args.block_head;
    s.sel_label = *args.block_label;
    s.sel_partition = model_partition_of_label(s.sel_label);
    s.block_requested = true;
  }
  if (args.granularity_given) s.granularity = args.coarse ? Granularity::step : Granularity::instruction;
}

// What the command line asks of the replay applies to the first trace, once
// it is in: the step (else the saved one, when resuming the last run's
// lesson: resume is not null) and the selection.
void apply_first_trace_args(AppState& s, const Args& args, const SavedPosition* resume) {
  s.initial_applied = true;
  if (args.step) s.replay.jump(*args.step);
  else if (resume) s.replay.jump(resume->step);
  if (args.sel_warp) s.set_focus(args.sel_lane ? Focus::thread(*args.sel_warp, *args.sel_lane) : Focus::whole_warp(*args.sel_warp));
  if (args.sel_kv) {
    const pa::KvLayoutGeometry g = s.cfg.cache(s.spec.num_kv_heads);
    const std::int64_t off = args.sel_kv == 'k' ? g.k_offset(args.sel_pb, s.kv_head, args.sel_d, args.sel_t)
                                                : g.v_offset(args.sel_pb, s.kv_head, args.sel_d, args.sel_t);
    s.set_focus(Focus::element(args.sel_kv == 'k' ? pa::trace::Tensor::k_cache : pa::trace::Tensor::v_cache,
                               off * s.cfg.kv_elem_bytes, s.cfg.kv_elem_bytes));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& e) {
    std::cerr << "pa-viewer: " << e.what() << "\n\n" << usage();
    return 2;
  }
  if (args.help) {
    std::cout << usage();
    return 0;
  }

  AppState s;
  state_from_args(s, args);
  try {
    check_args_problem(args, s.spec);
  } catch (const UsageError& e) {
    std::cerr << "pa-viewer: " << e.what() << "\n";
    return 2;
  }

  // Settings are remembered between interactive runs only: screenshots and
  // benchmarks must be reproducible.
  const bool interactive = !s.screenshot_mode && args.bench_frames == 0;
  const SettingsPaths settings = interactive ? settings_paths() : SettingsPaths{};
  SavedPosition saved;
  if (!settings.viewer_ini.empty()) saved = load_settings(settings.viewer_ini, s);
  if (args.granularity_given)  // the command line wins over saved settings
    s.granularity = args.coarse ? Granularity::step : Granularity::instruction;
  s.follow_focus = args.follow_selection;
  bool lesson_given = false;
  for (int i = 1; i < argc; ++i) lesson_given |= std::string(argv[i]) == "--lesson";
  if (lesson_given || !saved.have_lesson) s.lesson = args.lesson;

  // Screenshots use scale 1 unless --scale asks otherwise, so they look the
  // same on every machine.
  WindowOptions window_options;
  window_options.width = args.width;
  window_options.height = args.height;
  window_options.size_given = args.size_given;
  window_options.scale = args.scale ? args.scale : s.screenshot_mode ? std::optional<float>(1.0f) : std::nullopt;
  window_options.offscreen = s.screenshot_mode;
  window_options.vsync = args.bench_frames == 0;
  window_options.imgui_ini = settings.imgui_ini;
  Window window;
  if (!window.open(window_options, s.fonts)) return 1;

  std::optional<ScreenshotDriver> driver;
  if (s.screenshot_mode) driver.emplace(args);
  std::optional<FrameBench> bench;
  if (args.bench_frames > 0) bench.emplace(args.bench_frames, args.bench_while_loading);

  // Data: the lesson, then the trace (host model of the lesson's stage, or a
  // file), loaded in the background; the window is up meanwhile.
  if (!args.trace_file.empty()) {
    open_trace_file(s, args.trace_file, /*fallback_to_model=*/true);
    // The lesson's text only (no host model while the file loads); a trace
    // file then shows its own stage's lesson unless --lesson was given.
    s.trace_path = args.trace_file;
    s.keep_lesson = lesson_given;
  }
  // A timeline (its own file, beside the trace) loads in the background too.
  if (!args.timeline_file.empty()) {
    s.timeline_ui.pending_view = args.timeline_view;
    open_timeline_file(s, args.timeline_file);
  }
  load_lesson(s, s.lesson);
  if (!args.tab.empty()) {
    s.tab_request = args.tab;
    s.tab_request_frames = 2;
  }
  if (args.shard_gpus) {
    const int* counts = RefValues::kShardCounts;
    s.shard_count = static_cast<int>(std::find(counts, counts + 3, *args.shard_gpus) - counts);
  }
  if (args.shard_policy) s.shard_policy = *args.shard_policy;
  s.levels_text = args.levels;
  const SavedPosition* resume = interactive && saved.have_lesson && !lesson_given ? &saved : nullptr;
  // Screenshots and benchmarks are deterministic: the frame is drawn once the trace is in.
  // --bench-while-loading measures the frames drawn while the load runs instead.
  const bool wait_loads = s.screenshot_mode || (args.bench_frames > 0 && !args.bench_while_loading);

  int rc = 0;
  auto last = std::chrono::steady_clock::now();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!window.close_requested() && !g_stop) {
    // Apply a finished load (screenshot/bench: wait for it, outside the frame timing).
    if (wait_loads) wait_for_load(s);
    else poll_load(s);
    if (!s.initial_applied && !s.loader.running()) {
      if (bench) bench->first_trace_arrived();
      apply_first_trace_args(s, args, resume);
    }
    if (bench) bench->pace(last, s.loader.running());
    const auto t0 = std::chrono::steady_clock::now();
    if (!interactive || s.replay.playing()) window.poll_events();
    // Idle: no busy loop. While a load runs, the progress bar redraws at
    // 5 Hz (any input wakes the loop at once): a software rasterizer on a
    // small machine would otherwise take the cores the load needs.
    else window.wait_events(s.loader.running() ? 0.2 : 0.25);
    window.follow_content_scale(s.fonts);
    const double dt = std::chrono::duration<double>(t0 - last).count();
    last = t0;
    if (interactive) s.replay.tick(dt);
    if (bench) bench->advance(s.replay);
    if (bench && s.timeline) bench->advance_timeline(s.timeline_ui, *s.timeline);

    if (driver) driver->resize(window);
    window.begin_frame();
    if (driver) driver->inject_input();
    ImGui::NewFrame();
    if (!driver || driver->keys_scripted()) handle_keys(s);
    draw_frame(s);
    ImGui::Render();
    if (bench) {
      bench->ui_built(t0, s.loader.running());
      bench->timeline_drawn(s.timeline_ui, s.loader.running());
    }
    const FramebufferSize fb = window.render();
    if (driver && driver->frame_drawn()) {
      rc = driver->finish(s, fb);
      break;
    }
    window.present();
    if (bench && bench->frame_done(t0, s.loader.running())) break;
  }

  if (bench) bench->report(s);
  if (!settings.viewer_ini.empty()) save_settings(settings.viewer_ini, s);
  return rc;
}
