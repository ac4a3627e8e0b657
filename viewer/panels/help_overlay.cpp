// The keyboard help overlay ('?').
#include <cmath>
#include <imgui.h>

#include "app/state.hpp"

namespace pa::viewer {

void draw_help_overlay(AppState& s) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.96f);
  if (ImGui::Begin("Keyboard and mouse", &s.show_help,
                   ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse)) {
    static const char* rows[][2] = {
        {"Space", "play / pause"},
        {"Left / Right", "previous / next step"},
        {"Home / End", "first / last step"},
        {"0 .. 8", "open lesson N"},
        {"?", "this help"},
        {"Esc", "clear the selection / close help"},
        {"click a lane", "select that thread: what it touches, when"},
        {"click a warp label", "select the whole warp"},
        {"click a K/V element or word", "who touches it, and at which steps"},
        {"hover anything", "coordinates, byte offsets, banks"},
    };
    if (ImGui::BeginTable("##keys", 2, ImGuiTableFlags_RowBg)) {
      for (auto& r : rows) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::PushFont(s.fonts.bold);
        ImGui::TextUnformatted(r[0]);
        ImGui::PopFont();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(r[1]);
      }
      ImGui::EndTable();
    }
  }
  ImGui::End();
}

}  // namespace pa::viewer
