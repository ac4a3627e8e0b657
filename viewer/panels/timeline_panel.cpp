// The Timeline panel: when each warp ran each step function of a stage, as
// measured on a GPU (a timeline file, core/timeline_model.hpp), below the
// replay. Rows at three levels (the SMs of the grid, the blocks of one SM,
// the warps of one block; a label or a double click goes one level down)
// over time, coloured by phase with a legend. The wheel zooms around the
// pointer, a drag pans (sideways in time, up and down through the rows), F
// fits the whole timeline; hovering a span tells its phase, iteration,
// block, warp, SM and duration in ns and in cycles. A phase picked in the
// legend (or a clicked span's) is highlighted, else the phase that times the
// replay's current step. Which rectangles to draw (culling, pixel merging)
// and what the pointer is over come from core/timeline_view.hpp; this file
// only lays out and draws.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

// "1,234,567": span counts are large.
std::string grouped(std::uint64_t n) {
  std::string d = std::to_string(n), out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

std::string mhz(std::uint32_t khz) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f MHz", khz / 1000.0);
  return b;
}

// The header's facts: where and how the timeline was measured.
void draw_facts(AppState& s, const TimelineModel& m) {
  const trace::TimelineHeader& h = m.header();
  std::string facts = h.source + "  |  stage " + std::to_string(static_cast<int>(h.stage)) + " " +
                      stage_name(h.stage);
  if (!h.launch.empty()) facts += "  |  launch: " + h.launch;
  facts += "  |  " + std::to_string(m.num_sms()) + " SMs";
  facts += "  |  SM clock " + (h.sm_clock_khz ? mhz(h.sm_clock_khz) : std::string("unknown"));
  if (h.globaltimer_resolution_ns) facts += "  |  timer step " + format_ns(h.globaltimer_resolution_ns);
  facts += "  |  " + grouped(m.spans().size()) + " spans over " + format_ns(static_cast<double>(m.duration_ns()));
  char loaded[96];
  std::snprintf(loaded, sizeof loaded, "\nread in %.0f ms, indexed in %.0f ms", s.timeline_read_ms, s.timeline_index_ms);
  const std::string help = "problem: " + h.spec.describe() + "\nrevision: " + h.revision + "\nfile: " + m.path() +
                           loaded +
                           "\n\nTime 0 is the first span's %globaltimer (one clock for the whole GPU). Durations in "
                           "cycles come from clock64, each SM's own counter, converted at the SM clock.";
  title_with_detail(s, "Timeline", facts, help.c_str());
  // The tracer's cost, measured on the same run: what the timeline's times include.
  if (h.untimed_ns && h.timed_ns) {
    const double pct = 100.0 * (static_cast<double>(h.timed_ns) - static_cast<double>(h.untimed_ns)) /
                       static_cast<double>(h.untimed_ns);
    ImGui::TextDisabled("tracer overhead: the launch takes %s untimed, %s with the timing tracer (%+.1f%%)",
                        format_ns(static_cast<double>(h.untimed_ns)).c_str(),
                        format_ns(static_cast<double>(h.timed_ns)).c_str(), pct);
  } else {
    ImGui::TextDisabled("tracer overhead: not measured for this timeline");
  }
  if (h.dropped_spans > 0) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
    ImGui::TextWrapped("%s spans dropped: the tracer's buffer overflowed, so this timeline is incomplete "
                       "(the spans shown are as recorded, but warps may be missing steps).",
                       grouped(h.dropped_spans).c_str());
    ImGui::PopStyleColor();
  }
}

// The phases that time the replay's current step (through its lesson
// anchor), limited to those the timeline has; `why` says what was matched.
std::uint32_t replay_phases(AppState& s, const TimelineModel& m, std::string& why) {
  if (s.index.num_steps(s.block) == 0) return 0;
  const StepBinding& b = current_binding(s);
  if (!b.marker) return 0;
  const std::string& anchor = b.marker->marker.anchor;
  const std::uint32_t mask = phases_of_anchor(anchor) & m.phases_present();
  why = "the replay's step " + s.step_label(s.replay.current()) + " runs in " + anchor;
  if (mask == 0) why += ", which this timeline does not time";
  return mask;
}

// The legend: the timeline's phases, each a toggle; then what is highlighted.
void draw_legend(AppState& s, const TimelineModel& m) {
  TimelineUi& ui = s.timeline_ui;
  s.drawn.timeline_legend.clear();
  double warp_time = 0;
  for (int p = 0; p < static_cast<int>(trace::Phase::count_); ++p)
    warp_time += static_cast<double>(m.phase_time_ns(static_cast<trace::Phase>(p)));
  std::string why;
  const std::uint32_t from_replay = replay_phases(s, m, why);
  ui.highlight = ui.legend_phase >= 0 ? 1u << ui.legend_phase : from_replay;
  {
    Legend key(s);
    for (int p = 0; p < static_cast<int>(trace::Phase::count_); ++p) {
      const auto phase = static_cast<trace::Phase>(p);
      if (!(m.phases_present() & phase_bit(phase))) continue;
      if (key.toggle(phase_color(phase), trace::to_string(phase), (ui.highlight & phase_bit(phase)) != 0))
        ui.legend_phase = ui.legend_phase == p ? -1 : p;
      const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
      s.drawn.timeline_legend.push_back({p, ImVec4(a.x, a.y, b.x, b.y)});
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s: %s spans, %.1f%% of all warp time\nclick: highlight its spans (again: clear)",
                          trace::to_string(phase), grouped(m.phase_spans(phase)).c_str(),
                          warp_time > 0 ? 100.0 * static_cast<double>(m.phase_time_ns(phase)) / warp_time : 0.0);
    }
  }
  if (ui.legend_phase >= 0) {
    ui.highlight = 1u << ui.legend_phase;
    ImGui::TextDisabled("highlighted: %s (picked; click it again to clear)",
                        trace::to_string(static_cast<trace::Phase>(ui.legend_phase)));
  } else {
    ui.highlight = from_replay;
    if (!why.empty()) ImGui::TextDisabled("%s%s", why.c_str(), from_replay ? ": its spans are highlighted" : "");
    else ImGui::TextDisabled("pick a phase above to highlight its spans");
  }
}

const char* level_name(TimelineLevel l) {
  return l == TimelineLevel::grid ? "SMs of the grid" : l == TimelineLevel::sm ? "blocks of one SM" : "warps of one block";
}

// Level, SM and block pickers, fit, close.
void draw_controls(AppState& s, const TimelineModel& m) {
  TimelineUi& ui = s.timeline_ui;
  const float fs = ImGui::GetFontSize();
  for (TimelineLevel l : {TimelineLevel::grid, TimelineLevel::sm, TimelineLevel::block}) {
    if (l != TimelineLevel::grid) ImGui::SameLine();
    if (ImGui::RadioButton(level_name(l), ui.level == l)) ui.level = l;
  }
  ImGui::SameLine(0, fs);
  ImGui::SetNextItemWidth(fs * 5);
  const std::string sm_label = "SM " + std::to_string(ui.sm);
  if (ImGui::BeginCombo("##tl_sm", sm_label.c_str())) {
    ImGuiListClipper clip;
    clip.Begin(m.num_sms());
    while (clip.Step())
      for (int sm = clip.DisplayStart; sm < clip.DisplayEnd; ++sm) {
        const std::string l = "SM " + std::to_string(sm) + (m.blocks_on_sm(sm).empty() ? " (idle)" : "");
        if (ImGui::Selectable(l.c_str(), sm == ui.sm)) {
          ui.sm = sm;
          ui.level = TimelineLevel::sm;
        }
      }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::SetNextItemWidth(fs * 7);
  const auto& blocks = m.blocks();
  ui.block = std::clamp(ui.block, 0, std::max(0, static_cast<int>(blocks.size()) - 1));
  const std::string blk_label = blocks.empty() ? std::string("no blocks") : block_label(blocks[static_cast<std::size_t>(ui.block)]);
  if (ImGui::BeginCombo("##tl_block", blk_label.c_str())) {
    ImGuiListClipper clip;
    clip.Begin(static_cast<int>(blocks.size()));
    while (clip.Step())
      for (int b = clip.DisplayStart; b < clip.DisplayEnd; ++b) {
        const std::string l = block_label(blocks[static_cast<std::size_t>(b)]) + " (SM " +
                              std::to_string(blocks[static_cast<std::size_t>(b)].sm) + ")";
        if (ImGui::Selectable(l.c_str(), b == ui.block)) {
          ui.block = b;
          ui.level = TimelineLevel::block;
        }
      }
    ImGui::EndCombo();
  }
  ImGui::SameLine(0, fs);
  if (ImGui::Button("Fit (F)")) ui.view_set = false;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("the whole timeline (wheel: zoom around the pointer, drag: pan)");
  ImGui::SameLine();
  ImGui::TextDisabled("%s .. %s", format_ns(ui.view.begin).c_str(), format_ns(ui.view.end).c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Close")) close_timeline(s);
}

// The rows of the level shown, kept while nothing they depend on changes.
const std::vector<TimelineRow>& current_rows(AppState& s, const TimelineModel& m) {
  TimelineUi& ui = s.timeline_ui;
  ui.sm = std::clamp(ui.sm, 0, std::max(0, m.num_sms() - 1));
  ui.block = std::clamp(ui.block, 0, std::max(0, static_cast<int>(m.blocks().size()) - 1));
  const int target = ui.level == TimelineLevel::sm ? ui.sm : ui.level == TimelineLevel::block ? ui.block : -1;
  if (!ui.rows || ui.rows_model != &m || ui.rows_level != ui.level || ui.rows_target != target) {
    ui.rows = m.rows(ui.level, target);
    ui.rows_model = &m;
    ui.rows_level = ui.level;
    ui.rows_target = target;
    ui.scroll_y = 0;
    // New rows may reuse freed memory: the kept rectangles must not match them by address.
    ui.rects_key = {};
  }
  return *ui.rows;
}

// One level down from a row: an SM's blocks, a block's warps.
void open_row(TimelineUi& ui, const TimelineRow& row) {
  if (ui.level == TimelineLevel::grid) {
    ui.sm = row.target;
    ui.level = TimelineLevel::sm;
  } else if (ui.level == TimelineLevel::sm) {
    ui.block = row.target;
    ui.level = TimelineLevel::block;
  }
}

void draw_tooltip(const TimelineModel& m, std::uint32_t i, int in_pixel) {
  const trace::Span& sp = m.spans()[i];
  const trace::TimelineHeader& h = m.header();
  const TimelineBlock& blk = m.blocks()[static_cast<std::size_t>(m.block_of_span(i))];
  ImGui::BeginTooltip();
  if (sp.iter >= 0) ImGui::Text("%s, iteration %d", trace::to_string(sp.phase), sp.iter);
  else ImGui::Text("%s (runs once)", trace::to_string(sp.phase));
  ImGui::Text("%s (%s kernel), warp %d, SM %d", block_label(blk).c_str(), trace::to_string(sp.kernel), sp.warp, sp.sm);
  const std::uint64_t ns = sp.t_end_ns - sp.t_begin_ns;
  if (ns < 1000) ImGui::Text("%s ns by %%globaltimer", grouped(ns).c_str());
  else ImGui::Text("%s ns by %%globaltimer (%s)", grouped(ns).c_str(), format_ns(static_cast<double>(ns)).c_str());
  const std::uint64_t cyc = sp.clk_end - sp.clk_begin;
  const double cyc_ns = cycles_to_ns(cyc, h.sm_clock_khz);
  if (cyc_ns >= 0)
    ImGui::Text("%s cycles by clock64 = %s at %s", grouped(cyc).c_str(), format_ns(cyc_ns).c_str(),
                mhz(h.sm_clock_khz).c_str());
  else
    ImGui::Text("%s cycles by clock64 (SM clock unknown)", grouped(cyc).c_str());
  ImGui::TextDisabled("from %s to %s", format_ns(static_cast<double>(m.begin_of(i))).c_str(),
                      format_ns(static_cast<double>(m.end_of(i))).c_str());
  if (in_pixel > 1) ImGui::TextDisabled("%d spans within this pixel: zoom in to tell them apart", in_pixel);
  ImGui::EndTooltip();
}

void draw_axis(ImDrawList* dl, const TimelineUi& ui, ImVec2 at, float width, float axis_h, float plot_h) {
  const double step = tick_step_ns(ui.view.width(), width, ImGui::GetFontSize() * 6);
  const double magnitude = std::max(std::fabs(ui.view.begin), std::fabs(ui.view.end));
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = IM_COL32(255, 255, 255, 22);
  dl->PushClipRect(at, ImVec2(at.x + width, at.y + axis_h + plot_h), true);
  for (double t = std::ceil(ui.view.begin / step) * step; t <= ui.view.end; t += step) {
    const float x = at.x + static_cast<float>(x_of(ui.view, t, width));
    dl->AddLine(ImVec2(x, at.y + axis_h - 4), ImVec2(x, at.y + axis_h + plot_h), grid);
    const std::string label = format_tick(t, step, magnitude);
    dl->AddText(ImVec2(x + 3, at.y), text, label.c_str());
  }
  dl->PopClipRect();
}

// The rows: labels on the left, the axis on top, the spans, and the pointer.
void draw_plot(AppState& s, const TimelineModel& m) {
  TimelineUi& ui = s.timeline_ui;
  ImGuiIO& io = ImGui::GetIO();
  const float fs = ImGui::GetFontSize();
  const float sc = s.fonts.scale;
  const std::vector<TimelineRow>& rows = current_rows(s, m);
  if (!ui.view_set) {
    ui.view = fit_view(m.duration_ns());
    ui.view_set = true;
  }
  // The F key fits (when no text field has the keyboard).
  if (!io.WantTextInput)
    for (unsigned c : io.InputQueueCharacters)
      if (c == 'f' || c == 'F') ui.view = fit_view(m.duration_ns());

  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label_w = std::floor(fs * 6.5f);
  const float axis_h = std::floor(fs + 6);
  const float plot_x = origin.x + label_w;
  const float plot_y = origin.y + axis_h;
  const float plot_w = std::max(10.0f, std::floor(avail.x - label_w - 6 * sc));
  const float plot_h = std::max(std::floor(fs * 4), std::floor(avail.y - axis_h));
  const int n = static_cast<int>(rows.size());

  // Row height: the rows share the plot's height, within bounds: a warp's
  // row at least a text line; a block's row enough for its warps' lanes at
  // 4 px (up to a few lines); an SM's row down to 3 px (a GPU's 132 SMs
  // then scroll). More height draws more of an SM's lanes apart.
  int max_lanes = 1;
  for (const TimelineRow& r : rows) max_lanes = std::max(max_lanes, r.lanes);
  float lo = std::floor(fs * 1.2f), hi = std::floor(fs * 3);
  if (ui.level == TimelineLevel::sm) {
    lo = std::floor(std::clamp(max_lanes * 4 * sc, fs * 1.5f, fs * 4));
    hi = std::floor(fs * 6);
  } else if (ui.level == TimelineLevel::grid) {
    lo = std::floor(3 * sc);
    hi = std::floor(fs * 4);
  }
  const float row_h = std::clamp(n > 0 ? std::floor(plot_h / n) : hi, lo, hi);
  const float gap = row_h >= 6 * sc ? 1.0f : 0.0f;
  const float inner = row_h - gap;
  const int lane_capacity = std::max(1, static_cast<int>(inner / (3 * sc)));
  const float content_h = n * row_h;
  ui.scroll_y = std::clamp(ui.scroll_y, 0.0f, std::max(0.0f, content_h - plot_h));
  const int first_row = std::clamp(static_cast<int>(ui.scroll_y / row_h), 0, n);
  const int last_row = std::clamp(static_cast<int>(std::ceil((ui.scroll_y + plot_h) / row_h)), first_row, n);

  s.drawn.timeline_valid = true;
  s.drawn.timeline_plot_min = ImVec2(plot_x, plot_y);
  s.drawn.timeline_plot_w = plot_w;
  s.drawn.timeline_plot_h = plot_h;
  s.drawn.timeline_row_h = row_h;
  s.drawn.timeline_rows = n;
  s.drawn.timeline_lane_capacity = lane_capacity;

  // The plot area takes the mouse: wheel, drag, click, double click.
  ImGui::SetCursorScreenPos(ImVec2(plot_x, origin.y));
  ImGui::InvisibleButton("##timeline_plot", ImVec2(plot_w, axis_h + plot_h));
  const bool hovered = ImGui::IsItemHovered();
  const double mouse_t = time_at(ui.view, io.MousePos.x - plot_x, plot_w);
  if (hovered && io.MouseWheel != 0) {
    if (io.KeyShift) ui.scroll_y -= io.MouseWheel * row_h * 3;
    else ui.view = zoom_view(ui.view, mouse_t, std::pow(1.25, io.MouseWheel), m.duration_ns());
  }
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
    ui.dragging = true;
    ui.view = pan_view(ui.view, -io.MouseDelta.x / plot_w * ui.view.width(), m.duration_ns());
    ui.scroll_y = std::clamp(ui.scroll_y - io.MouseDelta.y, 0.0f, std::max(0.0f, content_h - plot_h));
  }
  const bool released_click = ImGui::IsItemDeactivated() && !ui.dragging;
  if (!ImGui::IsItemActive()) ui.dragging = false;

  // The rectangles, recomputed only when the view, the rows or the plot changed.
  const TimelineUi::RectKey key{ui.rows.get(), ui.view.begin, ui.view.end, static_cast<int>(plot_w), first_row,
                                last_row, lane_capacity};
  if (!(key == ui.rects_key)) {
    const auto t0 = std::chrono::steady_clock::now();
    ui.rects.clear();
    ui.stats = {};
    timeline_rects(rows, first_row, last_row, ui.view, static_cast<int>(plot_w), lane_capacity, ui.rects,
                   ui.scratch, &ui.stats);
    ui.rects_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ui.rects_key = key;
    ++ui.recomputed;
  }

  ImDrawList* dl = ImGui::GetWindowDrawList();
  draw_axis(dl, ui, ImVec2(plot_x, origin.y), plot_w, axis_h, plot_h);
  dl->PushClipRect(ImVec2(plot_x, plot_y), ImVec2(plot_x + plot_w, plot_y + plot_h), true);
  dl->AddRectFilled(ImVec2(plot_x, plot_y), ImVec2(plot_x + plot_w, plot_y + plot_h), IM_COL32(24, 26, 31, 255));
  const float top = plot_y - ui.scroll_y;
  for (int r = first_row; r < last_row; ++r)
    if (r % 2 == 1 && row_h >= 4)
      dl->AddRectFilled(ImVec2(plot_x, top + r * row_h), ImVec2(plot_x + plot_w, top + (r + 1) * row_h),
                        IM_COL32(255, 255, 255, 8));
  for (const TimelineRect& rc : ui.rects) {
    const TimelineRow& row = rows[static_cast<std::size_t>(rc.row)];
    const float lane_h = inner / static_cast<float>(drawn_lanes(row.lanes, lane_capacity));
    const float y0 = top + rc.row * row_h + rc.lane * lane_h;
    Rgba c = phase_color(rc.phase);
    if (ui.highlight && !(ui.highlight & phase_bit(rc.phase))) c = dimmed(c, 0.72f);
    // A merged column only partly busy is drawn fainter, never invisible.
    dl->AddRectFilled(ImVec2(plot_x + rc.x0, y0), ImVec2(plot_x + rc.x1, y0 + std::max(1.0f, lane_h - (lane_h >= 4 ? 1 : 0))),
                      col(c, 0.35f + 0.65f * rc.fill));
  }

  // What the pointer is over.
  ui.hovered = kNoSpan;
  if (hovered && !ui.dragging && io.MousePos.y >= plot_y) {
    const int r = static_cast<int>(std::floor((io.MousePos.y - top) / row_h));
    if (r >= 0 && r < n) {
      const TimelineRow& row = rows[static_cast<std::size_t>(r)];
      const int drawn = drawn_lanes(row.lanes, lane_capacity);
      const float lane_h = inner / static_cast<float>(drawn);
      const int lane = std::clamp(static_cast<int>((io.MousePos.y - top - r * row_h) / lane_h), 0, drawn - 1);
      const double ns_per_px = ui.view.width() / plot_w;
      const TimelineHit hit = timeline_hit(row, lane_capacity, lane, mouse_t, 1.5 * ns_per_px);
      if (hit.span != kNoSpan) {
        ui.hovered = hit.span;
        const float x0 = plot_x + static_cast<float>(x_of(ui.view, static_cast<double>(m.begin_of(hit.span)), plot_w));
        const float x1 = plot_x + static_cast<float>(x_of(ui.view, static_cast<double>(m.end_of(hit.span)), plot_w));
        const float y0 = top + r * row_h + lane * lane_h;
        dl->AddRect(ImVec2(std::min(x0, x1 - 1) - 1, y0 - 1), ImVec2(std::max(x1, x0 + 1) + 1, y0 + lane_h + 1),
                    IM_COL32(255, 255, 255, 255), 0, 0, 1.5f);
        draw_tooltip(m, hit.span, hit.in_pixel);
        // A click on a span highlights its phase (again: clears).
        if (released_click) {
          const int p = static_cast<int>(m.spans()[hit.span].phase);
          ui.legend_phase = ui.legend_phase == p ? -1 : p;
        }
      }
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) open_row(ui, row);
    }
  }
  dl->PopClipRect();
  if (n == 0) {
    const char* empty = ui.level == TimelineLevel::sm ? "this SM ran no block of this timeline" : "no spans";
    dl->AddText(ImVec2(plot_x + fs, plot_y + fs * 0.5f), ImGui::GetColorU32(ImGuiCol_TextDisabled), empty);
  }
  // The scroll position, when the rows do not fit.
  if (content_h > plot_h) {
    const float bar_h = std::max(fs, plot_h * plot_h / content_h);
    const float bar_y = plot_y + (plot_h - bar_h) * ui.scroll_y / (content_h - plot_h);
    dl->AddRectFilled(ImVec2(plot_x + plot_w + 2 * sc, bar_y), ImVec2(plot_x + plot_w + 5 * sc, bar_y + bar_h),
                      IM_COL32(150, 155, 170, 160), 2);
  }

  // Row labels: every row when they fit, else every k-th.
  const int every = std::max(1, static_cast<int>(std::ceil(fs / row_h)));
  dl->PushClipRect(ImVec2(origin.x, plot_y), ImVec2(plot_x - 2, plot_y + plot_h), true);
  for (int r = first_row; r < last_row; ++r) {
    const TimelineRow& row = rows[static_cast<std::size_t>(r)];
    const float y = top + r * row_h;
    const bool labelled = r % every == 0;
    const ImVec2 a(origin.x, y), b(plot_x - 4, y + row_h);
    const bool over = ImGui::IsMouseHoveringRect(a, b) && ImGui::IsWindowHovered() && y + row_h > plot_y;
    if (over && ui.level != TimelineLevel::block) {
      dl->AddRectFilled(a, b, ImGui::GetColorU32(ImGuiCol_HeaderHovered));
      ImGui::SetTooltip("%s: click to show its %s", row.label.c_str(),
                        ui.level == TimelineLevel::grid ? "blocks" : "warps");
      if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) open_row(ui, row);
    }
    if (!labelled) continue;
    const float ty = y + std::max(0.0f, (row_h - fs) * 0.5f);
    const ImU32 tc = row.spans.empty() ? ImGui::GetColorU32(ImGuiCol_TextDisabled) : ImGui::GetColorU32(ImGuiCol_Text);
    dl->AddText(ImVec2(origin.x + 2, ty), tc, row.label.c_str());
  }
  dl->PopClipRect();
  ImGui::SetCursorScreenPos(ImVec2(origin.x, plot_y + plot_h));
}

}  // namespace

bool timeline_panel_shown(const AppState& s) {
  return s.timeline || !s.timeline_error.empty() || s.timeline_loader.running();
}

void draw_timeline_panel(AppState& s) {
  if (!s.timeline) section_title(s, "Timeline");
  if (s.timeline_loader.running()) {
    ImGui::TextDisabled("loading the timeline %s ...", s.timeline_loading.c_str());
    ImGui::SameLine();
    if (ImGui::SmallButton("Cancel##timeline")) s.timeline_loader.cancel();
  }
  if (!s.timeline_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
    ImGui::TextWrapped("cannot open the timeline: %s", s.timeline_error.c_str());
    ImGui::PopStyleColor();
    if (!s.timeline) {
      ImGui::TextDisabled("Open another one in the Trace tab (left), or close this panel.");
      if (ImGui::SmallButton("Close")) close_timeline(s);
      return;
    }
  }
  if (!s.timeline) return;
  const TimelineModel& m = *s.timeline;
  draw_facts(s, m);
  if (!s.timeline_ui.view_note.empty()) ImGui::TextDisabled("%s", s.timeline_ui.view_note.c_str());
  draw_controls(s, m);
  if (!s.timeline) return;  // closed
  draw_legend(s, m);
  draw_plot(s, m);
}

}  // namespace pa::viewer
