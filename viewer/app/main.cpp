// pa-viewer: step through each stage's thread/warp/block mapping over the
// paged KV cache. GLFW + OpenGL 3.3 core + Dear ImGui; the data layer is
// pa_viewer_core (viewer/core), the panels are viewer/panels/*.cpp.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "app/state.hpp"
#include "pa/core/atomic_file.hpp"

#ifndef PA_LESSONS_DIR
#define PA_LESSONS_DIR "lessons"
#endif
#ifndef PA_KERNEL_STAGES_DIR
#define PA_KERNEL_STAGES_DIR "kernels/stages"
#endif

namespace fs = std::filesystem;
using namespace pa::viewer;

namespace {

// SIGINT/SIGTERM end the main loop cleanly, so settings are still saved.
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_signal(int) { g_stop = 1; }

const char* kFontDir = "/usr/share/fonts/truetype/dejavu/";

std::string config_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  fs::path p = xdg && *xdg ? fs::path(xdg) : home && *home ? fs::path(home) / ".config" : fs::path();
  if (p.empty()) return {};
  p /= "pa-lab";
  std::error_code ec;
  fs::create_directories(p, ec);
  return ec ? std::string() : p.string();
}

// Our own settings (lesson, step, speed, granularity): key=value lines.
void load_settings(const std::string& path, AppState& s, bool& have_lesson, int& step) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    try {
      if (k == "lesson") { s.lesson = std::clamp(std::stoi(v), 0, 8); have_lesson = true; }
      else if (k == "step") step = std::max(0, std::stoi(v));
      else if (k == "speed") s.replay.set_speed(std::stof(v));
      else if (k == "granularity") s.granularity = v == "step" ? Granularity::step : Granularity::instruction;
    } catch (...) {
      // A damaged settings file is ignored, value by value.
    }
  }
}

void save_settings(const std::string& path, const AppState& s) {
  std::ofstream out(path);
  out << "lesson=" << s.lesson << "\nstep=" << s.replay.current() << "\nspeed=" << s.replay.speed()
      << "\ngranularity=" << (s.granularity == Granularity::step ? "step" : "instruction") << "\n";
}

Fonts load_fonts(float scale) {
  ImGuiIO& io = ImGui::GetIO();
  Fonts f;
  f.scale = scale;
  // Latin, Greek (lessons write sigma, alpha...), arrows, math and the
  // typographic marks the lessons use.
  static ImVector<ImWchar> ranges;
  if (ranges.empty()) {
    ImFontGlyphRangesBuilder b;
    b.AddRanges(io.Fonts->GetGlyphRangesDefault());
    static const ImWchar extra[] = {0x0370, 0x03FF, 0x2010, 0x205E, 0x2190, 0x21FF, 0x2200, 0x22FF,
                                    0x2300, 0x23FF, 0x2500, 0x257F, 0x25A0, 0x25FF, 0x2713, 0x2717, 0};
    b.AddRanges(extra);
    b.BuildRanges(&ranges);
  }
  auto add = [&](const char* file, float px) -> ImFont* {
    const std::string p = std::string(kFontDir) + file;
    if (!fs::exists(p)) return nullptr;
    return io.Fonts->AddFontFromFileTTF(p.c_str(), px * scale, nullptr, ranges.Data);
  };
  f.regular = add("DejaVuSans.ttf", 15.0f);
  if (!f.regular) {  // no TTF: ImGui's built-in font, still readable
    ImFontConfig c;
    c.SizePixels = 13.0f * scale;
    f.regular = io.Fonts->AddFontDefault(&c);
  }
  f.bold = add("DejaVuSans-Bold.ttf", 15.0f);
  f.italic = add("DejaVuSans-Oblique.ttf", 15.0f);
  f.mono = add("DejaVuSansMono.ttf", 14.0f);
  f.h1 = add("DejaVuSans-Bold.ttf", 21.0f);
  f.h2 = add("DejaVuSans-Bold.ttf", 17.5f);
  f.small = add("DejaVuSans.ttf", 12.0f);
  for (ImFont** p : {&f.bold, &f.italic, &f.mono, &f.h1, &f.h2, &f.small})
    if (!*p) *p = f.regular;
  return f;
}

void apply_style(float scale) {
  ImGui::StyleColorsDark();
  ImGuiStyle& st = ImGui::GetStyle();
  st.WindowRounding = 0;
  st.ChildRounding = 4;
  st.FrameRounding = 4;
  st.GrabRounding = 4;
  st.TabRounding = 4;
  st.WindowPadding = ImVec2(8, 8);
  st.FramePadding = ImVec2(7, 4);
  st.ItemSpacing = ImVec2(8, 6);
  st.ScrollbarSize = 13;
  ImVec4* c = st.Colors;
  c[ImGuiCol_WindowBg] = ImVec4(0.105f, 0.11f, 0.125f, 1);
  c[ImGuiCol_ChildBg] = ImVec4(0.13f, 0.135f, 0.155f, 1);
  c[ImGuiCol_PopupBg] = ImVec4(0.12f, 0.125f, 0.145f, 0.97f);
  c[ImGuiCol_Border] = ImVec4(0.25f, 0.26f, 0.30f, 1);
  c[ImGuiCol_FrameBg] = ImVec4(0.19f, 0.20f, 0.23f, 1);
  c[ImGuiCol_Tab] = ImVec4(0.17f, 0.18f, 0.21f, 1);
  c[ImGuiCol_TabActive] = ImVec4(0.25f, 0.35f, 0.55f, 1);
  c[ImGuiCol_TabHovered] = ImVec4(0.30f, 0.42f, 0.65f, 1);
  c[ImGuiCol_Header] = ImVec4(0.22f, 0.30f, 0.45f, 1);
  c[ImGuiCol_Button] = ImVec4(0.21f, 0.27f, 0.38f, 1);
  c[ImGuiCol_ButtonHovered] = ImVec4(0.29f, 0.39f, 0.56f, 1);
  st.ScaleAllSizes(scale);
}

void handle_keys(AppState& s) {
  ImGuiIO& io = ImGui::GetIO();
  if (io.WantTextInput) return;
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Space))) s.replay.toggle_play();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_RightArrow))) s.step_by(+1);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_LeftArrow))) s.step_by(-1);
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Home))) s.replay.home();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_End))) s.replay.end();
  if (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Escape))) {
    if (s.show_help) s.show_help = false;
    else s.set_focus(Focus{});
  }
  for (unsigned c : io.InputQueueCharacters) {
    if (c == '?') s.show_help = !s.show_help;
    if (c >= '0' && c <= '8') {
      s.replay.jump(0);
      load_lesson(s, static_cast<int>(c - '0'));
    }
  }
}

ImGuiTabItemFlags tab_flag(const AppState& s, const char* name) {
  return s.tab_request == name ? ImGuiTabItemFlags_SetSelected : 0;
}

// Three columns: lesson/problem | thread block + memory | source + analyses.
void draw_frame(AppState& s) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(6 * s.fonts.scale, 6 * s.fonts.scale));
  ImGui::Begin("##main", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  ImGui::PopStyleVar();

  // A new step, or a resize (which moves everything), re-scrolls the lesson
  // and the source to the current step.
  static ImVec2 last_size;
  const bool resized = vp->WorkSize.x != last_size.x || vp->WorkSize.y != last_size.y;
  last_size = vp->WorkSize;
  s.step_changed = s.replay.current() != s.last_step_seen || resized;
  draw_toolbar(s);

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float gap = ImGui::GetStyle().ItemSpacing.x;
  const float left_w = std::max(10.0f, std::floor(avail.x * 0.27f));
  const float right_w = std::max(10.0f, std::floor(avail.x * 0.29f));
  const float mid_w = std::max(10.0f, avail.x - left_w - right_w - 2 * gap);
  const float h = std::max(10.0f, avail.y);
  s.drawn.left_w = left_w;
  s.drawn.mid_w = mid_w;
  s.drawn.right_w = right_w;
  s.drawn.col_h = h;

  ImGui::BeginChild("##left", ImVec2(left_w, h), true);
  if (ImGui::BeginTabBar("##lefttabs")) {
    if (ImGui::BeginTabItem("Lesson", nullptr, tab_flag(s, "lesson"))) { draw_lesson_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Problem", nullptr, tab_flag(s, "problem"))) { draw_config_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Trace", nullptr, tab_flag(s, "trace"))) { draw_trace_panel(s); ImGui::EndTabItem(); }
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("##mid", ImVec2(mid_w, h), true);
  draw_thread_panel(s);
  // The memory view follows the step: KV cache for K/V/block-table steps,
  // Q and shared memory otherwise.
  if (s.step_changed) {
    if (const ReplayStep* st = s.current_step()) {
      const bool kv = st->tensor == pa::trace::Tensor::k_cache || st->tensor == pa::trace::Tensor::v_cache ||
                      st->tensor == pa::trace::Tensor::block_table;
      const bool mem = st->op != pa::trace::Op::compute && st->op != pa::trace::Op::barrier &&
                       st->op != pa::trace::Op::shuffle;
      const int want = kv ? 0 : 1;
      if (mem && want != s.memory_tab) { s.memory_tab = want; s.memory_tab_request = true; }
    }
  }
  if (s.tab_request == "kv" || s.tab_request == "shared") {
    s.memory_tab = s.tab_request == "kv" ? 0 : 1;
    s.memory_tab_request = true;
  }
  if (ImGui::BeginTabBar("##memtabs")) {
    const bool req = s.memory_tab_request;
    if (ImGui::BeginTabItem("Paged KV cache", nullptr, req && s.memory_tab == 0 ? ImGuiTabItemFlags_SetSelected : 0)) {
      if (!req) s.memory_tab = 0;
      draw_kv_panel(s);
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Q & shared memory", nullptr, req && s.memory_tab == 1 ? ImGuiTabItemFlags_SetSelected : 0)) {
      if (!req) s.memory_tab = 1;
      draw_smem_panel(s);
      ImGui::EndTabItem();
    }
    s.memory_tab_request = false;
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::SameLine();

  ImGui::BeginChild("##right", ImVec2(right_w, h), false);
  const float src_h = std::floor(h * 0.5f);
  ImGui::BeginChild("##source", ImVec2(right_w, src_h), true);
  draw_source_panel(s);
  ImGui::EndChild();
  ImGui::BeginChild("##analyses", ImVec2(right_w, std::max(10.0f, h - src_h - ImGui::GetStyle().ItemSpacing.y)), true);
  if (ImGui::BeginTabBar("##righttabs")) {
    if (ImGui::BeginTabItem("Requests", nullptr, tab_flag(s, "requests"))) { draw_requests_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Values", nullptr, tab_flag(s, "values"))) { draw_values_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Partitions", nullptr, tab_flag(s, "partitions"))) { draw_partitions_panel(s); ImGui::EndTabItem(); }
    if (ImGui::BeginTabItem("Inspect", nullptr, s.focus_tab_request || tab_flag(s, "inspect") ? ImGuiTabItemFlags_SetSelected : 0)) {
      draw_inspect_panel(s);
      ImGui::EndTabItem();
    }
    s.focus_tab_request = false;
    ImGui::EndTabBar();
    if (s.tab_request_frames > 0 && --s.tab_request_frames == 0) s.tab_request.clear();
  }
  ImGui::EndChild();
  ImGui::EndChild();

  ImGui::End();
  if (s.show_help) draw_help_overlay(s);
  s.last_step_seen = s.replay.current();
}

// The framebuffer as a PNG: encoded in memory, then written with
// pa::core::write_file_atomically, so a failed write keeps an earlier picture.
// Returns "" or why it failed.
std::string write_png(const std::string& path, int w, int h) {
  if (w <= 0 || h <= 0) return "the window has no pixels (" + std::to_string(w) + "x" + std::to_string(h) + ")";
  std::vector<unsigned char> px(static_cast<std::size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  for (std::size_t i = 3; i < px.size(); i += 4) px[i] = 255;  // opaque
  stbi_flip_vertically_on_write(1);
  std::string png;
  const auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &png, w, h, 4, px.data(), w * 4)) return "PNG encoding failed";
  try {
    pa::core::write_file_atomically(path, png);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void dump_layout(const std::string& path, const AppState& s, float fb_scale) {
  std::ofstream out(path);
  out << "fb_scale " << fb_scale << "\n";
  out << "step " << s.replay.current() << " " << s.replay.count() << "\n";  // current, count
  out << "lesson " << s.lesson << "\n";
  out << "playing " << s.replay.playing() << "\n";
  out << "help " << s.show_help << "\n";
  out << "scale " << s.fonts.scale << "\n";
  out << "font_size " << ImGui::GetFontSize() << "\n";
  out << "events " << s.events.size() << "\n";
  out << "stage " << static_cast<int>(s.stage) << "\n";
  out << "loading " << s.loader.running() << "\n";
  out << "load_error " << !s.load_error.empty() << "\n";
  // State for the tests (every lesson loads): the lesson's own error, a note
  // that is not an error (partial trace, stage without a host model), the
  // problem shown, and the thread blocks' labels (partition: -1 reduce, ...).
  out << "lesson_error " << !s.lesson_error.empty() << "\n";
  out << "load_message " << !s.load_message.empty() << "\n";
  out << "heads " << s.spec.num_heads << " " << s.spec.num_kv_heads << "\n";
  out << "contexts";
  for (int c : s.spec.context_lens) out << " " << c;
  out << "\n";
  out << "partition_size " << s.spec.partition_size << "\n";
  out << "prefix " << s.spec.shared_prefix_len << "\n";
  out << "block_labels";
  for (int b = 0; b < s.index.num_blocks(); ++b) out << " " << s.index.block(b).partition;
  out << "\n";
  if (s.drawn.label_valid)
    out << "lesson_label " << s.drawn.label_min.x << " " << s.drawn.label_min.y << " " << s.drawn.label_max.x << " "
        << s.drawn.label_max.y << "\n";
  out << "columns " << s.drawn.left_w << " " << s.drawn.mid_w << " " << s.drawn.right_w << " " << s.drawn.col_h << "\n";
  if (s.drawn.smem_valid)
    out << "kv_smem " << s.drawn.smem_origin.x << " " << s.drawn.smem_origin.y << " " << s.drawn.smem_cell_w << " "
        << s.drawn.smem_cell_h << " " << s.drawn.smem_words << " " << s.drawn.smem_base << "\n"
        << "kv_smem_view " << s.drawn.smem_scroll_y << " " << s.drawn.smem_view_top << " " << s.drawn.smem_view_h << "\n";
  out << "blocks " << s.index.num_blocks() << " " << s.block << "\n";
  // The lesson section and source region the panels show for the step
  // (core/lesson_binding.hpp): the marker's lesson and section, whether it
  // is the enclosing region of a step without one, and whose step it is.
  if (const StepBinding& b = s.binding_cache.binding; b.marker && s.binding_cache.step == s.replay.current() &&
                                                 s.binding_cache.block == s.block)
    out << "binding " << b.marker->lesson << " " << b.marker->section << " " << b.enclosing << " " << b.marked_step << "\n";
  // The lesson's code blocks (line, needed width, box width, scrollbar, on screen, scroll range).
  for (const DrawnGeometry::CodeBlock& c : s.drawn.code_blocks)
    out << "code_block " << c.line << " " << c.needed_w << " " << c.box_w << " " << c.scrollbar << " " << c.visible << " "
        << c.scroll_max_x << "\n";
  out << "memory_tab " << s.memory_tab << "\n";
  // Checked exercises: "exercise:LESSON:ID verdict answer_ok answer" (Verdict of core/exercise.hpp).
  for (const auto& [key, ui] : s.exercises)
    if (ui.checks > 0)
      out << "exercise:" << key << " " << static_cast<int>(check_answer(ui.checked, ui.answer)) << " " << ui.answer.ok
          << " " << ui.answer.value << "\n";
  if (s.drawn.kv_valid) {
    const KvLayout& l = s.drawn.kv;
    out << "kv_origin " << s.drawn.kv_origin.x << " " << s.drawn.kv_origin.y << "\n";
    out << "kv_layout " << l.head_size << " " << l.block_size << " " << l.x << " " << l.band_rows << " " << l.slots
        << " " << l.show_k << " " << l.show_v << " " << l.cell_w << " " << l.cell_h << " " << l.chunk_gap << " "
        << l.label_w << " " << l.part_gap << " " << l.slot_gap << " " << l.title_h << "\n";
    out << "kv_head " << s.drawn.kv_head << "\n";
    out << "slots";
    for (int p : s.drawn.slot_physical) out << " " << p;
    out << "\n";
  }
  if (s.drawn.grid_valid) {
    const ThreadGridLayout& g = s.drawn.grid;
    out << "grid_origin " << s.drawn.grid_origin.x << " " << s.drawn.grid_origin.y << "\n";
    out << "grid_layout " << g.warps << " " << g.lanes << " " << g.group_size << " " << g.cell << " " << g.label_w
        << " " << g.header_h << " " << g.row_gap << "\n";
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
  if (!args.context_lens.empty()) s.spec.context_lens = args.context_lens;
  if (args.block_seq) {
    s.sel_seq = *args.block_seq;
    s.sel_head = *args.block_head;
    s.sel_label = *args.block_label;
    s.sel_partition = model_partition_of_label(s.sel_label);
    s.block_requested = true;
  }
  if (args.coarse) s.granularity = Granularity::step;
  try {
    check_args_problem(args, s.spec);
  } catch (const UsageError& e) {
    std::cerr << "pa-viewer: " << e.what() << "\n";
    return 2;
  }

  // Settings are remembered between runs, except in screenshot/bench mode
  // (those must be reproducible).
  const bool persistent = !s.screenshot_mode && args.bench_frames == 0;
  const std::string cfg_dir = persistent ? config_dir() : std::string();
  const std::string ini_path = cfg_dir.empty() ? "" : cfg_dir + "/imgui.ini";
  const std::string settings_path = cfg_dir.empty() ? "" : cfg_dir + "/pa-viewer.ini";
  int saved_step = 0;
  bool saved_lesson = false;
  if (!settings_path.empty()) load_settings(settings_path, s, saved_lesson, saved_step);
  if (args.coarse) s.granularity = Granularity::step;  // the command line wins over saved settings
  s.follow_focus = args.follow_selection;
  bool lesson_given = false;
  for (int i = 1; i < argc; ++i) lesson_given |= std::string(argv[i]) == "--lesson";
  if (lesson_given || !saved_lesson) s.lesson = args.lesson;

  glfwSetErrorCallback([](int code, const char* msg) { std::fprintf(stderr, "pa-viewer: GLFW error %d: %s\n", code, msg); });
  if (!glfwInit()) {
    std::fprintf(stderr, "pa-viewer: cannot initialise GLFW (no display? run under xvfb-run for --screenshot)\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (s.screenshot_mode) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  // HiDPI: --scale wins; else the monitor's content scale (screenshots: 1, so
  // they look the same everywhere unless --scale asks otherwise). Without
  // --size the window grows with the scale, within the monitor's work area.
  float scale = 1.0f;
  GLFWmonitor* mon = glfwGetPrimaryMonitor();
  if (args.scale) scale = *args.scale;
  else if (!s.screenshot_mode && mon) {
    float xs = 1.0f, ys = 1.0f;
    glfwGetMonitorContentScale(mon, &xs, &ys);
    scale = std::clamp(std::max(xs, ys), 1.0f, 4.0f);
  }
  int win_w = args.width, win_h = args.height;
  if (!args.size_given && scale != 1.0f) {
    win_w = static_cast<int>(win_w * scale);
    win_h = static_cast<int>(win_h * scale);
    int mx = 0, my = 0, mw = 0, mh = 0;
    if (mon && !s.screenshot_mode) glfwGetMonitorWorkarea(mon, &mx, &my, &mw, &mh);
    if (mw > 0 && mh > 0) {
      win_w = std::min(win_w, mw);
      win_h = std::min(win_h, mh);
    }
  }
  GLFWwindow* win = glfwCreateWindow(win_w, win_h, "pa-viewer: paged attention, step by step", nullptr, nullptr);
  if (!win) {
    std::fprintf(stderr, "pa-viewer: cannot create an OpenGL 3.3 core window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(win);
  glfwSwapInterval(args.bench_frames > 0 ? 0 : 1);
  glfwSetWindowSizeLimits(win, 200, 150, GLFW_DONT_CARE, GLFW_DONT_CARE);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  static std::string ini_store;
  ini_store = ini_path;
  io.IniFilename = ini_store.empty() ? nullptr : ini_store.c_str();
  if (!args.scale && !s.screenshot_mode) {
    float xs = 1.0f, ys = 1.0f;
    glfwGetWindowContentScale(win, &xs, &ys);  // the window's monitor, which may not be the primary
    scale = std::clamp(std::max(xs, ys), 1.0f, 4.0f);
  }
  s.fonts = load_fonts(scale);
  apply_style(scale);
  // Moved to a monitor with another scale: new fonts and sizes next frame.
  static float g_new_scale = 0;
  if (!args.scale && !s.screenshot_mode)
    glfwSetWindowContentScaleCallback(win, [](GLFWwindow*, float xs, float ys) {
      g_new_scale = std::clamp(std::max(xs, ys), 1.0f, 4.0f);
    });
  ImGui_ImplGlfw_InitForOpenGL(win, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");

  // Data: the lesson, then the trace (host model of the lesson's stage, or a
  // file), loaded in the background; the window is up meanwhile.
  const auto t_load = std::chrono::steady_clock::now();
  if (!args.trace_file.empty()) {
    open_trace_file(s, args.trace_file, /*fallback_to_model=*/true);
    // The lesson's text only (no host model while the file loads); a trace
    // file then shows its own stage's lesson unless --lesson was given.
    s.trace_path = args.trace_file;
    s.keep_lesson = lesson_given;
  }
  load_lesson(s, s.lesson);
  if (!args.tab.empty()) {
    s.tab_request = args.tab;
    s.tab_request_frames = 2;
  }
  double total_load_ms = 0;
  // What the command line asks of the replay applies to the first trace.
  auto after_first_load = [&] {
    s.initial_applied = true;
    total_load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_load).count();
    if (args.step) s.replay.jump(*args.step);
    else if (persistent && saved_lesson && !lesson_given) s.replay.jump(saved_step);
    if (args.sel_warp) s.set_focus(args.sel_lane ? Focus::thread(*args.sel_warp, *args.sel_lane) : Focus::whole_warp(*args.sel_warp));
    if (args.sel_kv) {
      const pa::CacheGeometry g = s.cfg.cache(s.spec.num_kv_heads);
      const std::int64_t off = args.sel_kv == 'k' ? g.k_offset(args.sel_pb, s.kv_head, args.sel_d, args.sel_t)
                                                  : g.v_offset(args.sel_pb, s.kv_head, args.sel_d, args.sel_t);
      s.set_focus(Focus::element(args.sel_kv == 'k' ? pa::trace::Tensor::k_cache : pa::trace::Tensor::v_cache,
                                 off * s.cfg.elem_bytes, s.cfg.elem_bytes));
    }
  };
  // Screenshots and benchmarks are deterministic: the frame is drawn once the trace is in.
  // --bench-while-loading measures the frames drawn while the load runs instead.
  const bool wait_loads = s.screenshot_mode || (args.bench_frames > 0 && !args.bench_while_loading);
  std::vector<double> loading_frame_ms;  // frames drawn while a load was under way

  std::vector<double> frame_ms, ui_ms;
  int vtx_max = 0;
  int frame = 0;
  // Layout settles (tabs, scroll) over a few frames; --exercise-resize first
  // shrinks the window to tiny sizes and back (issue 9: resizing is safe).
  const int screenshot_frames = (args.exercise_resize ? 12 : args.mouse ? 6 : 4) + 2 * static_cast<int>(args.keys.size());
  static const int kResizes[][2] = {{320, 200}, {200, 150}, {1, 1}, {640, 120}, {150, 900}};
  int rc = 0;
  auto last = std::chrono::steady_clock::now();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  while (!glfwWindowShouldClose(win) && !g_stop) {
    // Apply a finished load (screenshot/bench: wait for it, outside the frame timing).
    if (wait_loads) wait_for_load(s);
    else poll_load(s);
    if (!s.initial_applied && !s.loader.running()) after_first_load();
    if (args.bench_while_loading && s.loader.running()) {  // the interactive loop's 5 Hz while loading, measured
      const auto since = std::chrono::steady_clock::now() - last;
      if (since < std::chrono::milliseconds(200)) std::this_thread::sleep_for(std::chrono::milliseconds(200) - since);
    }
    const auto t0 = std::chrono::steady_clock::now();
    if (s.screenshot_mode || args.bench_frames > 0) glfwPollEvents();
    else if (s.replay.playing()) glfwPollEvents();
    // Idle: no busy loop. While a load runs, the progress bar redraws at
    // 5 Hz (any input wakes the loop at once): a software rasterizer on a
    // small machine would otherwise take the cores the load needs.
    else glfwWaitEventsTimeout(s.loader.running() ? 0.2 : 0.25);
    if (g_new_scale > 0 && g_new_scale != s.fonts.scale) {
      io.Fonts->Clear();
      s.fonts = load_fonts(g_new_scale);
      apply_style(g_new_scale);
      ImGui_ImplOpenGL3_DestroyFontsTexture();
      ImGui_ImplOpenGL3_CreateFontsTexture();
      g_new_scale = 0;
    }
    const double dt = std::chrono::duration<double>(t0 - last).count();
    last = t0;
    if (!s.screenshot_mode && args.bench_frames == 0) s.replay.tick(dt);
    if (args.bench_frames > 0) s.replay.jump((s.replay.current() + 1) % std::max(1, s.replay.count()));

    if (args.exercise_resize) {
      if (frame < 5) glfwSetWindowSize(win, kResizes[frame][0], kResizes[frame][1]);
      else if (frame == 5) glfwSetWindowSize(win, args.width, args.height);
      glfwPollEvents();
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (s.screenshot_mode && args.mouse) {
      // Synthetic pointer for tooltip/click screenshots (the hidden window has no real one).
      io.MousePos = ImVec2(static_cast<float>(args.mouse->first), static_cast<float>(args.mouse->second));
      io.MouseDown[0] = args.click && frame == 1;
    }
    // Scripted keys (--keys, screenshot mode): one key every other frame, so
    // each is a fresh press that handle_keys sees exactly once.
    const int key_slot = frame / 2;
    const bool key_frame = s.screenshot_mode && frame % 2 == 0 && key_slot < static_cast<int>(args.keys.size());
    if (s.screenshot_mode && !args.keys.empty())
      for (int k : {GLFW_KEY_RIGHT, GLFW_KEY_LEFT, GLFW_KEY_HOME, GLFW_KEY_END, GLFW_KEY_SPACE}) io.KeysDown[k] = false;
    if (key_frame) {
      const char c = args.keys[key_slot];
      if (c == 'R') io.KeysDown[GLFW_KEY_RIGHT] = true;
      else if (c == 'L') io.KeysDown[GLFW_KEY_LEFT] = true;
      else if (c == 'H') io.KeysDown[GLFW_KEY_HOME] = true;
      else if (c == 'E') io.KeysDown[GLFW_KEY_END] = true;
      else if (c == ' ') io.KeysDown[GLFW_KEY_SPACE] = true;
      else io.AddInputCharacter(static_cast<unsigned>(c));
    }
    ImGui::NewFrame();
    if (!s.screenshot_mode || !args.keys.empty()) handle_keys(s);
    draw_frame(s);
    ImGui::Render();
    const auto t_ui = std::chrono::steady_clock::now();
    if (args.bench_frames > 0 && !s.loader.running()) {
      ui_ms.push_back(std::chrono::duration<double, std::milli>(t_ui - t0).count());
      vtx_max = std::max(vtx_max, ImGui::GetDrawData()->TotalVtxCount);
    }
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(win, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.105f, 0.11f, 0.125f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    ++frame;
    if (s.screenshot_mode && frame >= screenshot_frames) {
      glFinish();
      if (const std::string why = write_png(args.screenshot, fw, fh); !why.empty()) {
        std::fprintf(stderr, "pa-viewer: screenshot %s: %s\n", args.screenshot.c_str(), why.c_str());
        rc = 1;
      }
      if (!args.dump_layout.empty()) dump_layout(args.dump_layout, s, fw / std::max(1.0f, io.DisplaySize.x));
      if (!s.load_error.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.load_error.c_str());
      if (!s.load_message.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.load_message.c_str());
      if (!s.lesson_error.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.lesson_error.c_str());
      break;
    }
    glfwSwapBuffers(win);
    if (args.bench_frames > 0) {
      glFinish();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (s.loader.running()) loading_frame_ms.push_back(ms);
      else frame_ms.push_back(ms);
      if (static_cast<int>(frame_ms.size()) >= args.bench_frames) break;
    }
  }

  if (!loading_frame_ms.empty()) {
    std::vector<double> sorted = loading_frame_ms;
    std::sort(sorted.begin(), sorted.end());
    std::printf("while loading: %zu frames drawn, median %.2f ms, p90 %.2f ms, max %.2f ms (the window stays live)\n",
                sorted.size(), sorted[sorted.size() / 2], sorted[sorted.size() * 9 / 10], sorted.back());
  }
  if (args.bench_frames > 0 && !frame_ms.empty()) {
    std::vector<double> sorted = frame_ms;
    std::sort(sorted.begin(), sorted.end());
    std::printf("events %zu  replay steps %d  model/read %.1f ms  index %.1f ms  load job %.1f ms  "
                "start to first trace %.1f ms\n",
                s.events.size(), s.index.num_steps(s.block), s.load_ms, s.index_ms, s.last_total_load_ms, total_load_ms);
    std::printf("frames %zu  median %.2f ms  p90 %.2f ms  max %.2f ms (first frame %.2f ms)\n", sorted.size(),
                sorted[sorted.size() / 2], sorted[sorted.size() * 9 / 10], sorted.back(), frame_ms.front());
    std::sort(ui_ms.begin(), ui_ms.end());
    std::printf("UI build (panels + ImGui::Render, CPU) median %.2f ms  p90 %.2f ms; the rest is GL rasterization; max %d vertices\n",
                ui_ms[ui_ms.size() / 2], ui_ms[ui_ms.size() * 9 / 10], vtx_max);
  }
  if (persistent && !settings_path.empty()) save_settings(settings_path, s);

  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(win);
  glfwTerminate();
  return rc;
}
