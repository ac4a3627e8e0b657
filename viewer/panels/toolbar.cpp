// Replay controls: lesson, thread block, step buttons, play/pause, speed, scrub bar.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {

void draw_toolbar(AppState& s) {
  ImGui::PushFont(s.fonts.bold);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Lesson");
  s.drawn.label_valid = true;
  s.drawn.label_min = ImGui::GetItemRectMin();
  s.drawn.label_max = ImGui::GetItemRectMax();
  ImGui::PopFont();
  ImGui::SameLine();
  // The lesson's title ("Lesson 6: V2, ...") whole where the row has room:
  // the rest of the row (stage, block, transport, speed) needs about 46 em.
  std::string cur = s.doc && !s.doc->title.empty() ? s.doc->title : "Lesson " + std::to_string(s.lesson);
  const float fs = ImGui::GetFontSize();
  const float want = ImGui::CalcTextSize(cur.c_str()).x + ImGui::GetFrameHeight() + 2 * ImGui::GetStyle().FramePadding.x;
  ImGui::SetNextItemWidth(std::min(want, std::max(15 * fs, ImGui::GetContentRegionAvail().x - 46 * fs)));
  if (ImGui::BeginCombo("##lesson", cur.c_str())) {
    if (s.lessons.empty()) ImGui::TextDisabled("no lessons found in %s", s.lessons_dir.c_str());
    for (const auto& e : s.lessons) {
      const std::string label = std::to_string(e.number) + "  " + e.slug;
      if (ImGui::Selectable(label.c_str(), e.number == s.lesson)) {
        s.replay.jump(0);
        load_lesson(s, e.number);
      }
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::TextDisabled("stage %d %s", static_cast<int>(s.stage), stage_name(s.stage));

  if (s.index.num_blocks() > 1) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
    const BlockKey k = s.index.block(s.block);
    const std::string lbl = describe_block(k, s.stage);
    if (ImGui::BeginCombo("##block", lbl.c_str())) {
      for (int b = 0; b < s.index.num_blocks(); ++b) {
        const BlockKey kb = s.index.block(b);
        const std::string l = describe_block(kb, s.stage);
        if (ImGui::Selectable(l.c_str(), b == s.block)) select_block(s, b);
      }
      ImGui::EndCombo();
    }
  }

  // Transport.
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  if (ImGui::Button("|<")) s.replay.home();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("first step (Home)");
  ImGui::SameLine(0, 3);
  if (ImGui::Button(" < ")) s.step_by(-1);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("previous step (Left)");
  ImGui::SameLine(0, 3);
  if (ImGui::Button(s.replay.playing() ? "pause" : " play ")) s.replay.toggle_play();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("play / pause (Space)");
  ImGui::SameLine(0, 3);
  if (ImGui::Button(" > ")) s.step_by(+1);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("next step (Right)");
  ImGui::SameLine(0, 3);
  if (ImGui::Button(">|")) s.replay.end();
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("last step (End)");
  ImGui::SameLine();
  float speed = s.replay.speed();
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 6);
  if (ImGui::SliderFloat("##speed", &speed, 0.25f, 60.0f, "%.1f steps/s", ImGuiSliderFlags_Logarithmic))
    s.replay.set_speed(speed);
  ImGui::SameLine();
  if (ImGui::SmallButton("?")) s.show_help = !s.show_help;

  // Scrub bar over the whole width, with the step's description.
  const int n = s.replay.count();
  int step = s.replay.current();
  const ReplayStep* st = s.current_step();
  const std::string fmt = n > 0 ? "step %d / " + std::to_string(n - 1) : std::string("no steps");
  ImGui::SetNextItemWidth(std::max(ImGui::GetFontSize() * 10, ImGui::GetContentRegionAvail().x * 0.42f));
  if (ImGui::SliderInt("##scrub", &step, 0, std::max(0, n - 1), fmt.c_str())) {
    s.replay.pause();
    s.replay.jump(step);
  }
  if (st) {
    ImGui::SameLine();
    const char* summary = step_summary(st->step);
    ImGui::PushFont(s.fonts.bold);
    ImGui::TextUnformatted(s.step_label(s.replay.current()).c_str());
    ImGui::PopFont();
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %s", step_name(st->step), summary);
    ImGui::SameLine();
    std::string d = std::string(op_name(st->op));
    if (st->tensor != trace::Tensor::none) d += " " + std::string(tensor_name(st->tensor));
    d += ", epoch " + std::to_string(st->epoch) + ", " + std::to_string(st->threads) + " threads";
    // What the step does, where the row has room for it (else on hover).
    const std::string with_summary = d + "  \xC2\xB7  " + summary;
    ImGui::TextDisabled("%s", ImGui::CalcTextSize(with_summary.c_str()).x <= ImGui::GetContentRegionAvail().x
                                  ? with_summary.c_str() : d.c_str());
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s: %s", step_name(st->step), summary);
  }
  // A load under way: what it does, how far, and a way out. The panels keep
  // showing the previous trace meanwhile.
  if (s.loader.running()) {
    const float p = s.loader.progress();
    char lbl[160];
    std::snprintf(lbl, sizeof lbl, "%s: %s  %.0f%%", s.loading.describe().c_str(), s.loader.phase(), p * 100.0f);
    ImGui::ProgressBar(p, ImVec2(std::max(ImGui::GetFontSize() * 10, ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 6), 0), lbl);
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) cancel_load(s);
  }
  if (!s.load_message.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.8f, 0.4f, 1));
    ImGui::TextWrapped("%s", s.load_message.c_str());
    ImGui::PopStyleColor();
  }
  if (!s.load_error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
    ImGui::TextWrapped("%s", s.load_error.c_str());
    ImGui::PopStyleColor();
  }
}

}  // namespace pa::viewer
