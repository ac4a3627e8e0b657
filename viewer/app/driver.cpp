// The screenshot driver (driver.hpp): scripted input, the PNG, the layout
// dump.
#include "app/driver.hpp"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "pa/core/atomic_file.hpp"

namespace pa::viewer {
namespace {

// --exercise-resize: the sizes of the first frames, down to 1x1.
constexpr int kResizes[][2] = {{320, 200}, {200, 150}, {1, 1}, {640, 120}, {150, 900}};
constexpr int kNumResizes = static_cast<int>(std::size(kResizes));

// The keys --keys can press by name (the others are typed characters).
constexpr int kScriptedKeys[] = {GLFW_KEY_RIGHT, GLFW_KEY_LEFT, GLFW_KEY_HOME, GLFW_KEY_END, GLFW_KEY_SPACE};

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
  out << "alibi " << s.spec.alibi << "\n";
  out << "kv_dtype " << static_cast<int>(s.spec.kv_dtype) << "\n";  // KvDType (pa/index/dtype.hpp) as a number
  out << "kv_elem_bytes " << s.cfg.kv_elem_bytes << "\n";
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
  if (s.drawn.lesson_section_valid)
    out << "lesson_section " << s.drawn.lesson_section_top << " " << s.drawn.lesson_view_top << " "
        << s.drawn.lesson_view_bottom << "\n";
  // The lesson's code blocks (line, needed width, box width, scrollbar, on screen, scroll range).
  for (const DrawnGeometry::CodeBlock& c : s.drawn.code_blocks)
    out << "code_block " << c.line << " " << c.needed_w << " " << c.box_w << " " << c.scrollbar << " " << c.visible << " "
        << c.scroll_max_x << "\n";
  // The lesson's link words on screen (x0 y0 x1 y1 url): a timeline's
  // (a click opens it) and any other.
  for (const DrawnGeometry::LessonLink& l : s.drawn.lesson_links)
    out << (l.timeline ? "lesson_timeline_link " : "lesson_link ") << l.min.x << " " << l.min.y << " " << l.max.x
        << " " << l.max.y << " " << l.url << "\n";
  out << "memory_tab " << s.memory_tab << "\n";
  // The Partitions tab's "Across GPUs": GPUs, policy, blocks, then each GPU's weight.
  if (s.drawn.shard_gpus > 0) {
    out << "shards " << s.drawn.shard_gpus << " " << s.drawn.shard_policy << " " << s.drawn.shard_blocks;
    for (double w : s.drawn.shard_weights) out << " " << w;
    out << "\n";
  }
  // Its "Across levels": the request shown, then each level's weight.
  if (s.drawn.level_request >= 0) {
    out << "levels " << s.drawn.level_request;
    for (double w : s.drawn.level_weights) out << " " << w;
    out << "\n";
  }
  // Checked exercises: "exercise:LESSON:ID verdict answer_ok answer" (Verdict of core/exercise.hpp).
  for (const auto& [key, ui] : s.exercises)
    if (ui.checks > 0)
      out << "exercise:" << key << " " << static_cast<int>(check_answer(ui.checked, ui.answer)) << " " << ui.answer.ok
          << " " << ui.answer.value << "\n";
  // The timeline: loaded / failed / loading, its spans, the level and view
  // shown, the plot's geometry, the rows (count, height, scroll, lanes per
  // row at most), the rectangles drawn, what is highlighted and hovered, and
  // each legend swatch (phase x0 y0 x1 y1, all on one line).
  out << "timeline " << (s.timeline != nullptr) << "\n";
  out << "timeline_error " << !s.timeline_error.empty() << "\n";
  out << "timeline_loading " << s.timeline_loader.running() << "\n";
  if (s.timeline) {
    const TimelineUi& t = s.timeline_ui;
    out << "timeline_spans " << s.timeline->spans().size() << "\n";
    out << "timeline_level " << static_cast<int>(t.level) << " "
        << (t.level == TimelineLevel::sm ? t.sm : t.level == TimelineLevel::block ? t.block : -1) << "\n";
    out << "timeline_view " << t.view.begin << " " << t.view.end << "\n";
    out << "timeline_rects " << t.rects.size() << "\n";
    out << "timeline_highlight " << t.highlight << "\n";
    out << "timeline_hover " << (t.hovered == kNoSpan ? -1 : static_cast<long long>(t.hovered)) << "\n";
  }
  if (s.drawn.timeline_valid) {
    out << "timeline_plot " << s.drawn.timeline_plot_min.x << " " << s.drawn.timeline_plot_min.y << " "
        << s.drawn.timeline_plot_w << " " << s.drawn.timeline_plot_h << "\n";
    out << "timeline_rows " << s.drawn.timeline_rows << " " << s.drawn.timeline_row_h << " " << s.timeline_ui.scroll_y
        << " " << s.drawn.timeline_lane_capacity << "\n";
    out << "timeline_legend";
    for (const auto& [phase, r] : s.drawn.timeline_legend) out << " " << phase << " " << r.x << " " << r.y << " " << r.z << " " << r.w;
    out << "\n";
  }
  if (s.drawn.kv_valid) {
    const KvPanelLayout& l = s.drawn.kv;
    out << "kv_origin " << s.drawn.kv_origin.x << " " << s.drawn.kv_origin.y << "\n";
    out << "kv_layout " << l.head_size << " " << l.block_size << " " << l.x << " " << l.band_rows << " " << l.slots
        << " " << l.show_k << " " << l.show_v << " " << l.cell_w << " " << l.cell_h << " " << l.chunk_gap << " "
        << l.label_w << " " << l.part_gap << " " << l.slot_gap << " " << l.title_h << " " << l.token_rows << "\n";
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

// The layout settles (tabs, scroll: the lesson scrolls to the step's section
// for kLessonRescrollFrames, whose last scroll lands one frame later) over a
// few frames; a pointer's tooltip and a resize need a few more, and each
// scripted key two (pressed, released).
ScreenshotDriver::ScreenshotDriver(const Args& args)
    : args_(args),
      frames_to_draw_((args.exercise_resize ? 12 : args.mouse ? 6 : kLessonRescrollFrames + 1) +
                      2 * static_cast<int>(args.keys.size())) {}

void ScreenshotDriver::resize(Window& window) const {
  if (!args_.exercise_resize) return;
  if (frames_drawn_ < kNumResizes) window.set_size(kResizes[frames_drawn_][0], kResizes[frames_drawn_][1]);
  else if (frames_drawn_ == kNumResizes) window.set_size(args_.width, args_.height);
  window.poll_events();
}

void ScreenshotDriver::inject_input() const {
  ImGuiIO& io = ImGui::GetIO();
  if (args_.mouse) {
    // A synthetic pointer for tooltip and click pictures (the hidden window has no real one).
    io.MousePos = ImVec2(static_cast<float>(args_.mouse->first), static_cast<float>(args_.mouse->second));
    io.MouseDown[0] = args_.click && frames_drawn_ == 1;
    if (args_.wheel != 0 && frames_drawn_ == 1) io.MouseWheel += static_cast<float>(args_.wheel);
    // A drag: pressed on frame 1, moved halfway on 2 and all the way on 3, released on 4.
    if (args_.drag) {
      const float f = frames_drawn_ <= 1 ? 0.0f : frames_drawn_ == 2 ? 0.5f : 1.0f;
      io.MousePos.x += f * static_cast<float>(args_.drag->first);
      io.MousePos.y += f * static_cast<float>(args_.drag->second);
      io.MouseDown[0] = frames_drawn_ >= 1 && frames_drawn_ <= 3;
    }
  }
  // One key every other frame, so each is a fresh press that handle_keys
  // sees exactly once.
  if (args_.keys.empty()) return;
  for (int k : kScriptedKeys) io.KeysDown[k] = false;
  const int key_slot = frames_drawn_ / 2;
  if (frames_drawn_ % 2 != 0 || key_slot >= static_cast<int>(args_.keys.size())) return;
  const char c = args_.keys[key_slot];
  if (c == 'R') io.KeysDown[GLFW_KEY_RIGHT] = true;
  else if (c == 'L') io.KeysDown[GLFW_KEY_LEFT] = true;
  else if (c == 'H') io.KeysDown[GLFW_KEY_HOME] = true;
  else if (c == 'E') io.KeysDown[GLFW_KEY_END] = true;
  else if (c == ' ') io.KeysDown[GLFW_KEY_SPACE] = true;
  else io.AddInputCharacter(static_cast<unsigned>(c));
}

bool ScreenshotDriver::frame_drawn() { return ++frames_drawn_ >= frames_to_draw_; }

int ScreenshotDriver::finish(const AppState& s, FramebufferSize fb) const {
  int rc = 0;
  glFinish();
  if (const std::string why = write_png(args_.screenshot, fb.width, fb.height); !why.empty()) {
    std::fprintf(stderr, "pa-viewer: screenshot %s: %s\n", args_.screenshot.c_str(), why.c_str());
    rc = 1;
  }
  if (!args_.dump_layout.empty())
    dump_layout(args_.dump_layout, s, fb.width / std::max(1.0f, ImGui::GetIO().DisplaySize.x));
  if (!s.load_error.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.load_error.c_str());
  if (!s.load_message.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.load_message.c_str());
  if (!s.lesson_error.empty()) std::fprintf(stderr, "pa-viewer: %s\n", s.lesson_error.c_str());
  if (!s.timeline_error.empty()) std::fprintf(stderr, "pa-viewer: cannot open the timeline: %s\n", s.timeline_error.c_str());
  return rc;
}

}  // namespace pa::viewer
