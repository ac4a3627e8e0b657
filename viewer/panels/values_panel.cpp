// Values as plots: the logits and the probabilities of the block's tokens
// as far as the replay has computed them, and the reductions' values
// (max, sum, ...) recorded with the events.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

void plot(const char* title, const std::vector<float>& v, const std::vector<int>& step_of, int step, ImU32 colour) {
  const int n = static_cast<int>(v.size());
  float lo = 0, hi = 0;
  int known = 0;
  for (int i = 0; i < n; ++i)
    if (std::isfinite(v[i])) { lo = std::min(lo, v[i]); hi = std::max(hi, v[i]); }
  for (int i = 0; i < n; ++i) known += step_of[i] >= 0 && step_of[i] <= step;
  ImGui::Text("%s", title);
  ImGui::SameLine();
  ImGui::TextDisabled("%d of %d tokens so far, range [%.3g, %.3g]", known, n, lo, hi);
  const float w = ImGui::GetContentRegionAvail().x, h = std::max(50.0f, ImGui::GetFontSize() * 5);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(title, ImVec2(std::max(1.0f, w), h));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(o, ImVec2(o.x + w, o.y + h), IM_COL32(30, 32, 38, 255), 3);
  if (n == 0 || hi <= lo) { ImGui::Spacing(); return; }
  const float zero_y = o.y + h * (hi / (hi - lo));
  dl->AddLine(ImVec2(o.x, zero_y), ImVec2(o.x + w, zero_y), IM_COL32(90, 92, 100, 255));
  const float bw = w / n;
  for (int i = 0; i < n; ++i) {
    if (!std::isfinite(v[i]) || step_of[i] < 0 || step_of[i] > step) continue;
    const float y = o.y + h * ((hi - v[i]) / (hi - lo));
    const bool now = step_of[i] == step;
    dl->AddRectFilled(ImVec2(o.x + i * bw, std::min(y, zero_y)), ImVec2(o.x + (i + 1) * bw - (bw > 3 ? 1 : 0), std::max(y, zero_y)),
                      now ? IM_COL32(255, 255, 255, 255) : colour);
  }
  if (ImGui::IsItemHovered()) {
    const int i = std::clamp(static_cast<int>((ImGui::GetMousePos().x - o.x) / bw), 0, n - 1);
    if (step_of[i] >= 0) ImGui::SetTooltip("token %d: %.5g (computed at step %d)", i, v[i], step_of[i]);
    else ImGui::SetTooltip("token %d: not in this trace", i);
  }
  ImGui::Spacing();
}

}  // namespace

void draw_values_panel(AppState& s) {
  const int step = s.replay.current();
  if (s.logit_value.empty()) {
    ImGui::TextDisabled("no trace loaded");
    return;
  }
  plot("logits", s.logit_value, s.logit_step, step, IM_COL32(220, 120, 200, 255));
  plot("probabilities", s.prob_value, s.prob_step, step, IM_COL32(110, 200, 240, 255));
  // Reductions and other recorded values up to this step, latest first.
  ImGui::TextUnformatted("reductions and partial results (up to this step)");
  if (ImGui::BeginTable("##stats", 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp,
                        ImVec2(0, std::max(60.0f, ImGui::GetContentRegionAvail().y)))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("step");
    ImGui::TableSetupColumn("what");
    ImGui::TableSetupColumn("thread");
    ImGui::TableSetupColumn("value");
    ImGui::TableHeadersRow();
    int shown = 0;
    for (auto it = s.stats.rbegin(); it != s.stats.rend() && shown < 200; ++it) {
      if (it->step > step) continue;
      ++shown;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%d", it->step);
      ImGui::TableNextColumn();
      ImGui::Text("%s %s", step_name(it->what), it->tensor != trace::Tensor::none ? tensor_name(it->tensor) : "");
      ImGui::TableNextColumn();
      ImGui::Text("w%d l%d", it->warp, it->lane);
      ImGui::TableNextColumn();
      ImGui::Text("%.6g", it->value);
    }
    if (shown == 0) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextDisabled("none yet");
    }
    ImGui::EndTable();
  }
}

}  // namespace pa::viewer
