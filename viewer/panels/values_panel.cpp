// Values as plots: the logits and the probabilities of the block's tokens
// as far as the replay has computed them, and the reductions' values
// (max, sum, ...) recorded with the events.
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "app/state.hpp"
#include "core/names.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/paged_cache.hpp"

namespace pa::viewer {
namespace {

void plot(const char* title, const std::vector<float>& v, const std::vector<int>& step_of, int step, ImU32 colour) {
  const int n = static_cast<int>(v.size());
  // The axis spans every token's value (and zero), computed or not, so that
  // bars keep their height as the replay steps on.
  float lo = 0, hi = 0;
  int known = 0;
  for (int i = 0; i < n; ++i)
    if (std::isfinite(v[i])) { lo = std::min(lo, v[i]); hi = std::max(hi, v[i]); }
  for (int i = 0; i < n; ++i) known += step_of[i] >= 0 && step_of[i] <= step;
  ImGui::Text("%s", title);
  ImGui::SameLine();
  ImGui::TextDisabled("%d of %d tokens so far; axis [%.3g, %.3g] spans all %d", known, n, lo, hi, n);
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
  // Accumulators: after LV each warp holds a partial output row over the
  // blocks it walked; their sum is the output (stage 5). From the CPU reference.
  if (static_cast<int>(s.stage) >= static_cast<int>(trace::Stage::lv) && s.index.num_blocks() > 0) {
    const RefValues* ref = reference_values(s);
    const std::string err = !ref ? "computing the CPU reference..." : ref->error;
    ImGui::TextUnformatted("accumulators: per-warp partial outputs, and their sum");
    if (!err.empty()) {
      ImGui::TextDisabled("%s", err.c_str());
    } else {
      const WarpPartials& wp = ref->wp;
      const std::vector<double>& out = ref->out;
      const BlockKey b = s.index.block(s.block);
      const int H = s.spec.head_size;
      double scale = 1e-9;
      for (int w = 0; w < wp.num_warps; ++w)
        for (int d = 0; d < H; ++d) scale = std::max(scale, std::abs(wp.values[wp.index(b.seq, b.head, w, d)]));
      ImDrawList* dl = ImGui::GetWindowDrawList();
      const float fs = ImGui::GetFontSize();
      const float w_all = ImGui::GetContentRegionAvail().x - fs * 4;
      auto strip = [&](const char* label, auto value_of) {
        const ImVec2 o = ImGui::GetCursorScreenPos();
        dl->AddText(ImVec2(o.x, o.y), IM_COL32(190, 195, 210, 255), label);
        const float cw = w_all / H;
        for (int d = 0; d < H; ++d) {
          const float t = static_cast<float>(std::clamp(value_of(d) / scale, -1.0, 1.0));
          const ImU32 c = t >= 0 ? IM_COL32(60 + static_cast<int>(190 * t), 70, 80, 255)
                                 : IM_COL32(60, 80, 80 + static_cast<int>(-170 * t), 255);
          dl->AddRectFilled(ImVec2(o.x + fs * 4 + d * cw, o.y + 2), ImVec2(o.x + fs * 4 + (d + 1) * cw, o.y + fs), c);
        }
        ImGui::Dummy(ImVec2(w_all + fs * 4, fs + 2));
        if (ImGui::IsItemHovered()) {
          const int d = std::clamp(static_cast<int>((ImGui::GetMousePos().x - o.x - fs * 4) / cw), 0, H - 1);
          ImGui::SetTooltip("%s, head dim %d: %.5g", label, d, value_of(d));
        }
      };
      for (int w = 0; w < wp.num_warps; ++w) {
        const std::string lbl = "warp " + std::to_string(w);
        strip(lbl.c_str(), [&](int d) { return wp.values[wp.index(b.seq, b.head, w, d)]; });
      }
      strip("output", [&](int d) { return out[(static_cast<std::size_t>(b.seq) * s.spec.num_heads + b.head) * H + d]; });
    }
    ImGui::Spacing();
  }

  // Reductions and other recorded values up to this step, latest first;
  // the same value reported by many lanes of one step is one row.

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
    // Two lanes' reports that make one row: the same step, value and dims.
    auto same_report = [](const AppState::Stat& a, const AppState::Stat& b) {
      return a.step == b.step && a.what == b.what && a.value == b.value && a.dim_begin == b.dim_begin;
    };
    const AppState::Stat* prev = nullptr;
    for (auto it = s.stats.rbegin(); it != s.stats.rend() && shown < 200; ++it) {
      if (it->step > step) continue;
      if (prev && same_report(*prev, *it)) continue;
      prev = &*it;
      ++shown;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%d", it->step);
      ImGui::TableNextColumn();
      const char* tensor = it->tensor != trace::Tensor::none ? tensor_name(it->tensor) : "";
      if (it->dim_begin >= 0 && it->dim_count > 1) {
        // One store of several dims reports its first dim's value.
        ImGui::Text("%s %s, dim %d (of %d-%d)", step_name(it->what), tensor, it->dim_begin, it->dim_begin,
                    it->dim_begin + it->dim_count - 1);
      } else if (it->dim_begin >= 0 && it->dim_count == 1) {
        ImGui::Text("%s %s, dim %d", step_name(it->what), tensor, it->dim_begin);
      } else {
        ImGui::Text("%s %s", step_name(it->what), tensor);
      }
      ImGui::TableNextColumn();
      ImGui::Text("w%d l%d%s", it->warp, it->lane,
                  std::next(it) != s.stats.rend() && same_report(*std::next(it), *it) ? " +" : "");
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
