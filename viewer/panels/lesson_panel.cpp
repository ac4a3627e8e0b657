// The lesson text: headings, paragraphs, lists, code, quotes, tables and
// emphasis from the lesson parser's Document. The section whose step marker
// matches the current replay step is marked and scrolled into view; a
// marker's button jumps the replay to its step (in another thread block of
// the trace when the shown one has no such step).
#include <cmath>
#include <imgui.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "app/state.hpp"
#include "core/lesson_problem.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

// A link of the lesson: the file it names, without the #fragment (a cited
// figure's: which value of the file); relative to the lesson files' folder.
std::string link_file(const std::string& url) { return url.substr(0, url.find('#')); }
std::string link_path(const AppState& s, const std::string& url) {
  return (std::filesystem::path(s.lessons_dir) / link_file(url)).lexically_normal().string();
}
bool is_timeline_link(const std::string& url) {
  const std::string file = link_file(url);
  return file.size() > 5 && file.compare(file.size() - 5, 5, ".patl") == 0 && url.find("://") == std::string::npos;
}

// Hovering a link says where it points (a figure: the file and the value it
// is quoted from); clicking a timeline's link opens it in the Timeline panel.
void link_word(AppState& s, const lesson::Span& sp, ImVec2 min, ImVec2 max) {
  const bool timeline = is_timeline_link(sp.url);
  s.drawn.lesson_links.push_back({min, max, sp.url, timeline});
  if (!ImGui::IsWindowHovered() || !ImGui::IsMouseHoveringRect(min, max)) return;
  const std::string file = link_file(sp.url);
  if (timeline) ImGui::SetTooltip("%s\nclick: open this timeline below the replay", sp.url.c_str());
  else if (file.size() < sp.url.size())  // a cited figure: the file it was measured in, and which value
    ImGui::SetTooltip("measured: %s\nvalue: %s", file.c_str(), sp.url.c_str() + file.size() + 1);
  else ImGui::SetTooltip("%s", sp.url.c_str());
  if (timeline && ImGui::IsMouseClicked(ImGuiMouseButton_Left)) open_timeline_file(s, link_path(s, sp.url));
}

ImFont* span_font(const AppState& s, lesson::SpanKind k, ImFont* base) {
  switch (k) {
    case lesson::SpanKind::strong: return s.fonts.bold;
    case lesson::SpanKind::emphasis: return s.fonts.italic;
    case lesson::SpanKind::code: return s.fonts.mono;
    default: return base;
  }
}

// Inline spans flowed word by word inside [x_left, x_right) of the window.
void flow_spans(AppState& s, const std::vector<lesson::Span>& spans, ImFont* base, float indent = 0) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float x_left = ImGui::GetCursorScreenPos().x + indent;
  const float x_right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x - 4;
  float x = x_left, y = ImGui::GetCursorScreenPos().y;
  const float line_h = base->FontSize * 1.32f;
  const ImU32 text_col = ImGui::GetColorU32(ImGuiCol_Text);
  for (const auto& sp : spans) {
    ImFont* f = span_font(s, sp.kind, base);
    const float fs = f->FontSize * (sp.kind == lesson::SpanKind::code ? 0.97f : 1.0f);
    ImU32 c = text_col;
    if (sp.kind == lesson::SpanKind::link) c = IM_COL32(120, 175, 255, 255);
    if (sp.kind == lesson::SpanKind::code) c = IM_COL32(240, 200, 140, 255);
    std::string_view t = sp.text;
    std::size_t i = 0;
    while (i < t.size()) {
      // One word plus its trailing spaces.
      std::size_t j = i;
      while (j < t.size() && t[j] != ' ') ++j;
      std::size_t k = j;
      while (k < t.size() && t[k] == ' ') ++k;
      const std::string word(t.substr(i, j - i));
      const float ww = f->CalcTextSizeA(fs, FLT_MAX, 0, word.c_str()).x;
      const float sw = f->CalcTextSizeA(fs, FLT_MAX, 0, " ").x * static_cast<float>(k - j);
      if (x + ww > x_right && x > x_left) {
        x = x_left;
        y += line_h;
      }
      if (sp.kind == lesson::SpanKind::code)
        dl->AddRectFilled(ImVec2(x - 1, y), ImVec2(x + ww + 1, y + fs + 2), IM_COL32(60, 55, 50, 255), 2);
      dl->AddText(f, fs, ImVec2(x, y + (base->FontSize - fs) * 0.5f), c, word.c_str());
      if (sp.kind == lesson::SpanKind::link) {
        dl->AddLine(ImVec2(x, y + fs + 1), ImVec2(x + ww, y + fs + 1), c);
        link_word(s, sp, ImVec2(x, y), ImVec2(x + ww, y + base->FontSize * 1.32f));
      }
      x += ww + sw;
      i = k;
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(x_left - indent, y));
  ImGui::Dummy(ImVec2(std::max(1.0f, x_right - x_left), line_h));
}

void draw_block(AppState& s, const lesson::Block& b) {
  switch (b.kind) {
    case lesson::BlockKind::paragraph:
      flow_spans(s, b.spans, s.fonts.regular);
      ImGui::Dummy(ImVec2(1, 3));
      break;
    case lesson::BlockKind::bullet_item:
    case lesson::BlockKind::numbered_item: {
      const float ind = ImGui::GetFontSize() * (1.2f + 1.1f * b.indent);
      const ImVec2 p = ImGui::GetCursorScreenPos();
      const std::string mark = b.kind == lesson::BlockKind::bullet_item ? "\xE2\x80\xA2" : std::to_string(b.number) + ".";
      ImGui::GetWindowDrawList()->AddText(ImVec2(p.x + ind - ImGui::CalcTextSize(mark.c_str()).x - 5, p.y),
                                          ImGui::GetColorU32(ImGuiCol_Text), mark.c_str());
      flow_spans(s, b.spans, s.fonts.regular, ind);
      break;
    }
    case lesson::BlockKind::code: {
      // Code keeps its lines (columns of numbers line up in them): a block
      // wider than the panel gets its own horizontal scrollbar instead of
      // being cut off or wrapped. The mouse wheel still scrolls the lesson.
      ImGui::PushFont(s.fonts.mono);
      const char* end = b.code.empty() ? nullptr : b.code.c_str() + b.code.size() - 1;  // without the last '\n'
      const ImVec2 sz = ImGui::CalcTextSize(b.code.c_str(), end);
      const ImVec2 pad(6, 5);
      const float w = std::max(1.0f, ImGui::GetContentRegionAvail().x);
      const bool wide = sz.x + 2 * pad.x > w;
      const float h = sz.y + 2 * pad.y + (wide ? ImGui::GetStyle().ScrollbarSize : 0.0f);
      const bool visible = ImGui::IsRectVisible(ImVec2(w, h));  // ImGui lays out no clipped child's content
      ImGui::PushStyleColor(ImGuiCol_ChildBg, IM_COL32(24, 26, 30, 255));
      ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, pad);
      ImGui::BeginChild(("##code" + std::to_string(b.line)).c_str(), ImVec2(w, h), false,
                        ImGuiWindowFlags_AlwaysUseWindowPadding | ImGuiWindowFlags_NoScrollWithMouse |
                            (wide ? ImGuiWindowFlags_HorizontalScrollbar | ImGuiWindowFlags_AlwaysHorizontalScrollbar : 0));
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.86f, 0.88f, 0.80f, 1));
      ImGui::TextUnformatted(b.code.c_str(), end);
      ImGui::PopStyleColor();
      s.drawn.code_blocks.push_back({b.line, sz.x + 2 * pad.x, ImGui::GetWindowWidth(), wide, visible, ImGui::GetScrollMaxX()});
      // Hovering a wide block shows all of it at once (a tooltip may be as
      // wide as the window).
      if (wide && ImGui::IsWindowHovered()) {
        ImGui::PushStyleColor(ImGuiCol_PopupBg, IM_COL32(24, 26, 30, 255));  // opaque: no text shows through
        ImGui::BeginTooltip();
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.86f, 0.88f, 0.80f, 1));
        ImGui::TextUnformatted(b.code.c_str(), end);
        ImGui::PopStyleColor();
        ImGui::EndTooltip();
        ImGui::PopStyleColor();
      }
      ImGui::EndChild();
      ImGui::PopStyleVar();
      ImGui::PopStyleColor();
      ImGui::PopFont();
      ImGui::Dummy(ImVec2(1, 2));
      break;
    }
    case lesson::BlockKind::quote: {
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.75f, 0.78f, 0.85f, 1));
      flow_spans(s, b.spans, s.fonts.italic, ImGui::GetFontSize());
      ImGui::PopStyleColor();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(p.x + 3, p.y), ImVec2(p.x + 6, ImGui::GetCursorScreenPos().y - 4),
                                                IM_COL32(110, 140, 200, 255));
      break;
    }
    case lesson::BlockKind::table: {
      if (b.rows.empty()) break;
      const int ncol = static_cast<int>(b.rows[0].size());
      if (ncol <= 0 || ncol > 32) break;
      if (ImGui::BeginTable(("##t" + std::to_string(b.line)).c_str(), ncol,
                            ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
        for (std::size_t r = 0; r < b.rows.size(); ++r) {
          ImGui::TableNextRow();
          for (int c = 0; c < ncol; ++c) {
            ImGui::TableNextColumn();
            if (c < static_cast<int>(b.rows[r].size())) {
              if (r == 0) ImGui::PushFont(s.fonts.bold);
              ImGui::TextWrapped("%s", lesson::plain_text(b.rows[r][c]).c_str());
              if (r == 0) ImGui::PopFont();
            }
          }
        }
        ImGui::EndTable();
      }
      break;
    }
    case lesson::BlockKind::rule:
      ImGui::Separator();
      break;
    case lesson::BlockKind::exercise:
      draw_exercise(s, b, [&s](const lesson::Block& question) { draw_block(s, question); });
      break;
    case lesson::BlockKind::details: {
      const std::string title = lesson::plain_text(b.spans) + "##d" + std::to_string(b.line);
      if (ImGui::TreeNode(title.c_str())) {
        for (const auto& c : b.children) draw_block(s, c);
        ImGui::TreePop();
      }
      break;
    }
  }
}

}  // namespace

// One line above the text: which section explains the step shown, so the
// learner knows where to read even when it is another lesson's (a composed
// step: lesson 6's partition block runs lesson 3's softmax) or, for a step
// without a section of its own, the enclosing one.
void draw_step_section_line(AppState& s) {
  const ReplayStep* st = s.current_step();
  if (!st) return;
  const StepBinding& b = current_binding(s);
  ImGui::PushFont(s.fonts.small);
  std::string where;
  if (!b.marker) {
    where = "no lesson section describes this thread block's steps";
  } else {
    const LessonMarker& m = *b.marker;
    where = m.lesson == s.lesson ? std::string("this lesson") : "lesson " + std::to_string(m.lesson);
    if (!m.heading.empty()) where += ", \xE2\x80\x9C" + m.heading + "\xE2\x80\x9D";
    if (b.enclosing)
      where = "(no section of its own) enclosing: " + where + ", from step " + std::to_string(b.marked_step);
  }
  ImGui::PushStyleColor(ImGuiCol_Text, b.enclosing ? ImVec4(0.62f, 0.76f, 0.95f, 1) : ImVec4(1.0f, 0.80f, 0.45f, 1));
  ImGui::TextWrapped("Step %s: %s", s.step_label(s.replay.current()).c_str(), where.c_str());
  ImGui::PopStyleColor();
  ImGui::PopFont();
}

void draw_lesson_panel(AppState& s) {
  s.drawn.code_blocks.clear();
  s.drawn.lesson_links.clear();
  if (s.doc) draw_step_section_line(s);
  ImGui::BeginChild("##lessontext", ImVec2(0, 0), false);
  s.drawn.lesson_section_valid = false;
  s.drawn.lesson_view_top = ImGui::GetWindowPos().y;
  s.drawn.lesson_view_bottom = s.drawn.lesson_view_top + ImGui::GetWindowHeight();
  if (s.step_changed) s.lesson_rescroll_frames = kLessonRescrollFrames;
  ImGui::Indent(10);  // room for the current-section bar
  if (!s.lesson_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.5f, 0.45f, 1));
    ImGui::TextWrapped("Lesson %d could not be shown:\n%s", s.lesson, s.lesson_error.c_str());
    ImGui::PopStyleColor();
    ImGui::TextWrapped("The trace and the other panels still work. Lessons are read from %s.", s.lessons_dir.c_str());
  }
  if (!s.doc) {
    ImGui::Unindent(10);
    ImGui::EndChild();
    return;
  }
  // The section bound to the step (core/lesson_binding.hpp): amber for the
  // step's own section, blue for the enclosing one of a step without its own.
  const StepBinding& binding = current_binding(s);
  const int active_section = binding.marker && binding.marker->lesson == s.lesson ? binding.marker->section : -1;
  const auto& secs = s.doc->sections;
  for (std::size_t i = 0; i < secs.size(); ++i) {
    const auto& sec = secs[i];
    const bool active = static_cast<int>(i) == active_section;
    const ImVec2 top = ImGui::GetCursorScreenPos();
    if (active && s.lesson_rescroll_frames > 0) ImGui::SetScrollHereY(0.1f);
    if (active) {
      s.drawn.lesson_section_valid = true;
      s.drawn.lesson_section_top = top.y;
    }
    if (sec.level > 0) {
      ImFont* f = sec.level == 1 ? s.fonts.h1 : sec.level == 2 ? s.fonts.h2 : s.fonts.bold;
      ImGui::Dummy(ImVec2(1, sec.level <= 2 ? 6.0f : 2.0f));
      ImGui::PushStyleColor(ImGuiCol_Text, sec.level == 1 ? ImVec4(0.95f, 0.96f, 1.0f, 1) : ImVec4(0.72f, 0.83f, 1.0f, 1));
      flow_spans(s, sec.heading, f);
      ImGui::PopStyleColor();
    }
    for (const auto& m : sec.markers) {
      const std::string lbl = std::string("step ") + m.step_name + "  \xE2\x86\x92##m" + std::to_string(m.line);
      ImGui::PushFont(s.fonts.small);
      if (ImGui::SmallButton(lbl.c_str())) {
        // The shown block's first such step, else another block's (stages 6
        // and 7: the reduce, prefix reduce and merge steps are in their own
        // blocks); a marker's block=ROLE keeps it to that kernel's blocks.
        const StepLocation at = locate_step(s.index, s.block, m.step, m.block);
        if (at.found()) {
          s.replay.pause();
          if (at.block != s.block) select_block(s, at.block);
          s.replay.jump(at.step);
        } else if (const auto sp = s.trace_path.empty() ? problem_with_step(s.spec, m.step, s.stage) : std::nullopt) {
          // ALiBi's and fp8's steps exist only in a problem with slopes or an
          // fp8 cache: give it those (the Problem tab's checkbox and KV cache
          // choice) and open the step once traced.
          s.replay.pause();
          s.open_step = m.step;
          s.open_tensor = trace::Tensor::none;
          request_model(s, *sp, s.stage, 0);
        }
      }
      if (ImGui::IsItemHovered()) {
        const StepLocation at = locate_step(s.index, s.block, m.step, m.block);
        const auto with =
            !at.found() && s.trace_path.empty() ? problem_with_step(s.spec, m.step, s.stage) : std::nullopt;
        if (with)
          ImGui::SetTooltip("this problem has no %s step: click to %s,\n"
                            "then jump to its first %s step (source anchor %s)",
                            m.step_name.c_str(), describe_step_change(s.spec, *with).c_str(), m.step_name.c_str(),
                            m.anchor.c_str());
        else if (!at.found())
          ImGui::SetTooltip("no %s step%s%s in this trace (source anchor %s)", m.step_name.c_str(),
                            m.block ? " in a block of kind " : "", m.block ? lesson::block_role_name(*m.block) : "",
                            m.anchor.c_str());
        else if (at.block != s.block)
          ImGui::SetTooltip("switch to %s and jump to its first %s step (source anchor %s)",
                            describe_block(s.index.block(at.block), s.stage).c_str(), m.step_name.c_str(),
                            m.anchor.c_str());
        else
          ImGui::SetTooltip("jump the replay to the first %s step (source anchor %s)", m.step_name.c_str(),
                            m.anchor.c_str());
      }
      ImGui::PopFont();
      ImGui::SameLine();
    }
    if (!sec.markers.empty()) ImGui::NewLine();
    for (const auto& b : sec.blocks) draw_block(s, b);
    if (active) {
      const ImVec2 bot = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(top.x - 8, top.y), ImVec2(top.x - 4, bot.y),
                                                col(binding.enclosing ? palette::enclosing_bar : palette::own_bar), 2);
    }
  }
  ImGui::Dummy(ImVec2(1, ImGui::GetFontSize() * 4));
  ImGui::Unindent(10);
  ImGui::EndChild();
  if (s.lesson_rescroll_frames > 0) --s.lesson_rescroll_frames;
}

}  // namespace pa::viewer
