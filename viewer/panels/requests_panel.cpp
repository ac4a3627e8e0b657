// The memory requests of the current step, one per warp instruction:
// global requests with the 32-byte sectors they touch and the requests they
// send to L2, each against the ideal (perfect coalescing), shared requests
// with their bank wavefronts.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <set>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {

void draw_requests_panel(AppState& s) {
  const auto cur = s.current_events();
  const std::vector<Request> reqs = requests_of_step(s.events, cur);
  if (reqs.empty()) {
    ImGui::TextDisabled("no memory requests at this step (compute, shuffle or barrier)");
    return;
  }
  ImGui::TextWrapped("One row per warp instruction. Global: 32-byte sectors fetched / the fewest that hold the "
                     "bytes, and L2 requests / the fewest. An L2 request is one ask from the SM to the L2 cache, "
                     "for up to the four sectors of one 128-byte line. Shared: wavefronts (bank passes) / the "
                     "fewest.");
  if (ImGui::BeginTable("##reqs", 6, ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_ScrollY |
                                         ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("w");
    ImGui::TableSetupColumn("access");
    ImGui::TableSetupColumn("lanes x B");
    ImGui::TableSetupColumn("cost/ideal");
    ImGui::TableSetupColumn("L2");
    ImGui::TableSetupColumn("sectors", ImGuiTableColumnFlags_WidthStretch, 2.0f);
    ImGui::TableHeadersRow();
    for (const Request& r : reqs) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%d", r.warp);
      ImGui::TableNextColumn();
      // ld / st; cp.async (global -> shared: its global side), atom (read-modify-write).
      const Rgba tcol = tensor_color(r.tensor);
      ImGui::TextColored(ImVec4(tcol.r, tcol.g, tcol.b, 1), "%s %s", access_verb(r.op), tensor_name(r.tensor));
      if (ImGui::IsItemHovered() && (r.op == trace::Op::async_copy || r.op == trace::Op::atomic))
        ImGui::SetTooltip(r.op == trace::Op::async_copy ? "cp.async: a global load written straight to shared memory "
                                                          "(no registers); sectors count its global side"
                                                        : "atomic read-modify-write in global memory");
      ImGui::TableNextColumn();
      ImGui::Text("%d x %d", r.lanes, r.access_bytes);
      ImGui::TableNextColumn();
      auto cost_text = [](int cost, int ideal) { ImGui::TextColored(cost_colour(cost, ideal), "%d / %d", cost, ideal); };
      if (r.global()) {
        cost_text(r.sectors, r.ideal_sectors);
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("%d sector%s of 32 B (fewest %d)", r.sectors, r.sectors == 1 ? "" : "s", r.ideal_sectors);
      } else {
        cost_text(r.wavefronts, r.ideal_wavefronts);
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("%d wavefront%s (fewest %d)", r.wavefronts, r.wavefronts == 1 ? "" : "s", r.ideal_wavefronts);
      }
      ImGui::TableNextColumn();
      if (r.global()) {
        cost_text(r.l2_requests, r.ideal_l2_requests);
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("L2 requests %d (fewest %d): one per 128-byte line the warp reads or writes;\n"
                            "a cp.async whose line lands split across shared memory costs one per sector,\n"
                            "or one per 16-byte piece where a sector splits (trace/ANALYSIS.md)",
                            r.l2_requests, r.ideal_l2_requests);
      }
      ImGui::TableNextColumn();
      // Picture: the sectors from the lowest to the highest touched, lit if fetched.
      if (r.global()) {
        std::set<std::int64_t> sec;
        int pl = 0;
        for (std::uint32_t i : r.events) {
          const auto& e = s.events[i];
          if (e.byte_offset < 0 || e.bytes <= 0) continue;
          for (std::int64_t q = e.byte_offset / 32; q <= (e.byte_offset + e.bytes - 1) / 32; ++q) sec.insert(q);
          ++pl;
        }
        if (!sec.empty()) {
          const std::int64_t lo = *sec.begin(), hi = *sec.rbegin();
          const int n = static_cast<int>(std::min<std::int64_t>(hi - lo + 1, 64));
          const float w = std::clamp((ImGui::GetContentRegionAvail().x - 4) / n, 2.0f * s.fonts.scale, 10.0f * s.fonts.scale);
          const ImVec2 o = ImGui::GetCursorScreenPos();
          ImDrawList* dl = ImGui::GetWindowDrawList();
          for (int k = 0; k < n; ++k) {
            const bool hit = sec.count(lo + k) > 0;
            dl->AddRectFilled(ImVec2(o.x + k * w, o.y + 2), ImVec2(o.x + (k + 1) * w - 1, o.y + ImGui::GetFontSize()),
                              col(hit ? palette::sector_fetched : palette::sector_skipped), 1);
          }
          ImGui::Dummy(ImVec2(n * w, ImGui::GetFontSize()));
          if (ImGui::IsItemHovered())
            ImGui::SetTooltip("sectors %lld..%lld (byte %lld..%lld): %zu touched%s", static_cast<long long>(lo),
                              static_cast<long long>(hi), static_cast<long long>(lo * 32),
                              static_cast<long long>(hi * 32 + 31), sec.size(), hi - lo + 1 > 64 ? " (first 64 drawn)" : "");
        }
      } else {
        ImGui::TextDisabled("%s, %lld B", r.wavefronts > r.ideal_wavefronts ? "bank conflict" : "no conflict", static_cast<long long>(r.bytes));
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace pa::viewer
