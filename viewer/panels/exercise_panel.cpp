// An exercise of the lesson: the learner predicts a number, types it, and the
// viewer says right or wrong against the answer computed from the trace shown
// (core/exercise.hpp). After a wrong answer: a hint naming the tab and the
// selection that show it, "Show me" (jumps there) and "Show answer".
#include <imgui.h>

#include <cstdint>
#include <string>

#include "app/state.hpp"
#include "core/exercise.hpp"

namespace pa::viewer {
namespace {

// The trace an answer was computed for: another trace (a new problem, block
// tables or file) gets its own answer.
std::string trace_key(const AppState& s) {
  return std::to_string(reinterpret_cast<std::uintptr_t>(s.events.data())) + "/" + std::to_string(s.events.size()) +
         "/" + std::to_string(s.tables.size()) + "/" + s.spec.describe() + "/" + s.trace_path;
}

// Jump to where the answer can be seen: its thread block and step, its
// thread or warp selected, the tab that shows it.
void show_me(AppState& s, ExerciseUi& ui, const lesson::ExerciseMarker& ex, const ExerciseAnswer& a) {
  // The lesson text follows a new step to its section; the exercise stays
  // where the learner was reading instead.
  ui.hold_scroll = ImGui::GetScrollY();
  ui.hold_frames = 3;
  s.replay.pause();
  if (!a.from_table && !a.events.empty()) {
    const int b = s.index.find_block(BlockKey{a.seq, a.head, a.partition});
    if (b >= 0) {
      if (b != s.block) select_block(s, b);
      s.replay.jump(s.index.step_of_event(a.events.front()));
      s.set_focus(a.lane < 0 ? Focus::whole_warp(a.warp) : Focus::thread(a.warp, a.lane));
    }
  }
  s.tab_request = exercise_tab(ex);
  s.tab_request_frames = 2;
  // The selection would bring the Inspect tab forward over the one asked for.
  if (s.tab_request != "inspect") s.focus_tab_request = false;
}

}  // namespace

void draw_exercise(AppState& s, const lesson::Block& b, const std::function<void(const lesson::Block&)>& draw_question) {
  if (!b.exercise) return;
  const lesson::ExerciseMarker& ex = *b.exercise;
  ExerciseUi& ui = s.exercises[std::to_string(s.lesson) + ":" + ex.id];

  // The answer, once per trace.
  const std::string key = trace_key(s);
  if (ui.answer_key != key) {
    ui.answer = solve_exercise(ex, s.events, s.spec, s.tables);
    ui.answer_key = key;
  }
  const ExerciseAnswer& ans = ui.answer;

  // --answer ID=VALUE: typed and checked as if by hand (screenshots).
  if (ui.checks == 0 && !ui.from_args) {
    for (const auto& [id, value] : s.args.answers) {
      if (id != ex.id) continue;
      value.copy(ui.typed, sizeof(ui.typed) - 1);
      ui.checked = value;
      ui.checks = 1;
      ui.from_args = true;
    }
  }
  if (ui.from_args && s.screenshot_mode) ImGui::SetScrollHereY(0.25f);
  if (ui.hold_frames > 0) {
    ImGui::SetScrollY(ui.hold_scroll);
    --ui.hold_frames;
  }

  ImGui::PushID(("exercise:" + ex.id).c_str());
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->ChannelsSplit(2);
  dl->ChannelsSetCurrent(1);
  const float pad = ImGui::GetFontSize() * 0.4f;
  const ImVec2 top = ImGui::GetCursorScreenPos();
  ImGui::Dummy(ImVec2(1, pad));
  ImGui::Indent(pad);

  ImGui::PushFont(s.fonts.small);
  ImGui::TextColored(ImVec4(0.55f, 0.80f, 1.0f, 1), "PREDICT, THEN CHECK IN THE VIEWER");
  ImGui::PopFont();
  if (!b.children.empty()) draw_question(b.children.front());

  if (!ans.ok && s.loader.running()) {
    ImGui::TextDisabled("Waiting for the lesson's trace to check answers against...");
  } else if (!ans.ok) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.72f, 0.45f, 1));
    ImGui::TextWrapped("The trace shown cannot check this one: %s. It is written for the problem this lesson "
                       "opens with.",
                       ans.error.c_str());
    ImGui::PopStyleColor();
  } else {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Your answer");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
    const bool enter = ImGui::InputText("##typed", ui.typed, sizeof(ui.typed), ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if (ImGui::Button("Check") || enter) {
      ui.checked = ui.typed;
      ++ui.checks;
    }
    const Verdict v = ui.checks > 0 ? check_answer(ui.checked, ans) : Verdict::empty;
    switch (v) {
      case Verdict::right:
        ImGui::TextColored(ImVec4(0.45f, 0.92f, 0.55f, 1), "\xE2\x9C\x93 Right: %s.",
                           describe_answer(ex.ask, ans.value).c_str());
        break;
      case Verdict::wrong: {
        ImGui::TextColored(ImVec4(1.0f, 0.5f, 0.45f, 1), "\xE2\x9C\x97 Not %s.", ui.checked.c_str());
        ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.80f, 0.82f, 0.88f, 1));
        ImGui::TextWrapped("Hint: %s", exercise_hint(ex, ans).c_str());
        ImGui::PopStyleColor();
        if (ImGui::SmallButton("Show me")) show_me(s, ui, ex, ans);
        ImGui::SameLine();
        if (ImGui::SmallButton(ui.show_answer ? "Hide answer" : "Show answer")) ui.show_answer = !ui.show_answer;
        break;
      }
      case Verdict::not_a_number:
        ImGui::TextColored(ImVec4(1.0f, 0.72f, 0.45f, 1), "Type a whole number (decimal, or hex such as 0x1f).");
        break;
      case Verdict::empty:
      case Verdict::unanswerable:
        break;
    }
    if (ui.show_answer && v != Verdict::right)
      ImGui::TextColored(ImVec4(0.95f, 0.85f, 0.55f, 1), "Answer: %s.", describe_answer(ex.ask, ans.value).c_str());
  }

  ImGui::Unindent(pad);
  ImGui::Dummy(ImVec2(1, pad));
  const ImVec2 bottom = ImGui::GetCursorScreenPos();
  dl->ChannelsSetCurrent(0);
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x - 2;
  dl->AddRectFilled(ImVec2(top.x - 2, top.y), ImVec2(right, bottom.y), IM_COL32(34, 44, 60, 255), 5);
  dl->AddRectFilled(ImVec2(top.x - 2, top.y), ImVec2(top.x + 1, bottom.y), IM_COL32(90, 160, 255, 255), 2);
  dl->ChannelsMerge();
  ImGui::Dummy(ImVec2(1, pad));
  ImGui::PopID();
}

}  // namespace pa::viewer
