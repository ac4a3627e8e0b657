// The thread block as warps x lanes. Threads active at the current step are
// drawn in their colour (the colour their accesses get in the memory panels);
// thread groups (the threads that share one token in QK) are outlined.
#include <cmath>
#include <imgui.h>

#include <cstdio>
#include <string>
#include <vector>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {

void draw_thread_panel(AppState& s) {
  const ConfigInfo& c = s.cfg;
  char detail[160];
  std::snprintf(detail, sizeof detail, "%d warps x 32 lanes, thread group = %d lane%s (%d groups/warp)", c.num_warps,
                c.thread_group_size, c.thread_group_size > 1 ? "s" : "", c.thread_groups_per_warp);
  title_with_detail(s, "Thread block", detail);

  ThreadGridLayout g;
  g.warps = c.num_warps;
  g.group_size = c.thread_group_size;
  g.label_w = ImGui::GetFontSize() * 3.6f;
  g.cell = ThreadGridLayout::fit_cell(ImGui::GetContentRegionAvail().x - 4, g.label_w, 32, 6 * s.fonts.scale, 24 * s.fonts.scale);
  g.header_h = ImGui::GetFontSize() * 0.95f;
  g.row_gap = std::round(4 * s.fonts.scale);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  s.drawn.grid_valid = true;
  s.drawn.grid_origin = o;
  s.drawn.grid = g;
  ImGui::InvisibleButton("##threads", ImVec2(std::max(1.0f, g.width()), std::max(1.0f, g.height())));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();

  // Which threads act at this step (and with which events).
  std::vector<int> first_event(static_cast<std::size_t>(c.num_warps) * 32, -1);
  for (std::uint32_t i : s.current_events()) {
    const auto& e = s.events[i];
    if (e.warp < c.num_warps && e.lane < 32 && first_event[e.warp * 32 + e.lane] < 0)
      first_event[e.warp * 32 + e.lane] = static_cast<int>(i);
  }

  ImFont* sf = s.fonts.small;
  for (int l = 0; l < 32; l += (g.cell >= 16 ? 2 : 4)) {
    const Rect r = g.cell_rect(0, l);
    dl->AddText(sf, sf->FontSize, ImVec2(o.x + r.x0, o.y), IM_COL32(140, 145, 160, 255), std::to_string(l).c_str());
  }
  for (int w = 0; w < g.warps; ++w) {
    const Rect lr = g.warp_label_rect(w);
    const bool wsel = s.focus.kind == Focus::Kind::warp && s.focus.warp == w;
    const std::string wl = "warp " + std::to_string(w);
    dl->AddText(ImVec2(o.x + lr.x0, o.y + lr.y0 + (g.cell - ImGui::GetFontSize()) * 0.5f),
                wsel ? IM_COL32(255, 210, 90, 255) : IM_COL32(190, 195, 210, 255), wl.c_str());
    for (int l = 0; l < 32; ++l) {
      const Rect r = g.cell_rect(w, l).offset(o.x, o.y);
      const bool active = first_event[w * 32 + l] >= 0;
      const Rgba tc = thread_color(w, l, c.num_warps);
      bool in_focus = true;
      if (s.focus.kind == Focus::Kind::thread) in_focus = s.focus.warp == w && s.focus.lane == l;
      if (s.focus.kind == Focus::Kind::warp) in_focus = s.focus.warp == w;
      if (s.focus.kind == Focus::Kind::element)
        in_focus = active && s.focus.matches(s.events[first_event[w * 32 + l]]);
      ImU32 fill = active ? (in_focus ? col(tc) : dim_col(tc, 0.65f)) : dim_col(tc, 0.86f);
      dl->AddRectFilled(ImVec2(r.x0 + 1, r.y0 + 1), ImVec2(r.x1 - 1, r.y1 - 1), fill, 2);
    }
    for (int gi = 0; gi < 32 / g.group_size; ++gi) {
      if (g.group_size <= 1) break;
      const Rect r = g.group_rect(w, gi).offset(o.x, o.y);
      dl->AddRect(ImVec2(r.x0, r.y0), ImVec2(r.x1, r.y1), IM_COL32(225, 228, 240, 150), 3, 0, 1.0f);
    }
  }
  if (s.focus.kind == Focus::Kind::thread && s.focus.warp < g.warps) {
    const Rect r = g.cell_rect(s.focus.warp, s.focus.lane).offset(o.x, o.y);
    dl->AddRect(ImVec2(r.x0 - 1, r.y0 - 1), ImVec2(r.x1 + 1, r.y1 + 1), IM_COL32(255, 255, 255, 255), 2, 0, 2.5f);
  }

  if (hovered) {
    const ImVec2 m = ImGui::GetMousePos();
    if (auto h = g.hit(m.x - o.x, m.y - o.y)) {
      const auto [w, l] = *h;
      if (l < 0) {
        ImGui::SetTooltip("warp %d: threads %d-%d\nclick: select the warp", w, w * 32, w * 32 + 31);
        if (clicked) s.set_focus(s.focus.kind == Focus::Kind::warp && s.focus.warp == w ? Focus{} : Focus::whole_warp(w));
      } else {
        const int tid = w * 32 + l;
        ImGui::BeginTooltip();
        ImGui::PushFont(s.fonts.bold);
        ImGui::Text("warp %d, lane %d  (threadIdx.x %d)", w, l, tid);
        ImGui::PopFont();
        ImGui::Text("thread group %d (offset %d in group, %d in warp)", tid / c.thread_group_size,
                    tid % c.thread_group_size, l / c.thread_group_size);
        const int ev = first_event[tid];
        if (ev >= 0) {
          int shown = 0;
          for (std::uint32_t i : s.current_events()) {
            const auto& e = s.events[i];
            if (e.warp != w || e.lane != l) continue;
            if (++shown > 6) { ImGui::TextDisabled("..."); break; }
            ImGui::Text("%s %s", op_name(e.op), tensor_name(e.tensor));
            if (e.byte_offset >= 0) { ImGui::SameLine(); ImGui::Text("bytes [%lld, +%d)", static_cast<long long>(e.byte_offset), e.bytes); }
            if (e.token >= 0) { ImGui::SameLine(); ImGui::Text("token %d", e.token); }
            if (e.dim_begin >= 0) { ImGui::SameLine(); ImGui::Text("dims %d..%d", e.dim_begin, e.dim_begin + e.dim_count - 1); }
          }
        } else {
          ImGui::TextDisabled("idle at this step");
        }
        ImGui::TextDisabled("click: select this thread");
        ImGui::EndTooltip();
        if (clicked) s.set_focus(s.focus.kind == Focus::Kind::thread && s.focus.warp == w && s.focus.lane == l ? Focus{}
                                                                                                              : Focus::thread(w, l));
      }
    }
  }
}

}  // namespace pa::viewer
