// The help overlay ('?'): keys and mouse, and the key to every colour the
// panels draw (the same palette the panels use: core/highlight.hpp).
#include <cmath>
#include <imgui.h>

#include "app/state.hpp"

namespace pa::viewer {
namespace {

void draw_colour_key(AppState& s) {
  ImGui::Spacing();
  section_title(s, "Colours");
  if (!ImGui::BeginTable("##colours", 2, ImGuiTableFlags_SizingFixedFit)) return;
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  {
    Legend key(s, /*per_row=*/true);
    ImGui::TextDisabled("thread block");
    key.lanes("a thread: hue by lane, shade by warp (warp 0 brightest)");
    key.swatch(dimmed(thread_color(0, 8, 4), 0.86f), "faint: idle at this step");
    key.swatch(dimmed(thread_color(0, 8, 4), 0.65f), "dimmed: active, outside the selection");
    key.framed(thread_color(0, 8, 4), {1, 1, 1, 1}, "white frame: the selected thread (a selected warp: its label)");
    ImGui::TextDisabled("paged KV cache");
    key.lanes("lit: touched now, in the touching thread's colour");
    key.swatch(dimmed(tensor_color(trace::Tensor::k_cache), palette::earlier_dim), "K element loaded at an earlier step");
    key.swatch(dimmed(tensor_color(trace::Tensor::v_cache), palette::earlier_dim), "V element loaded at an earlier step");
    key.swatch(palette::untouched, "not loaded yet");
    key.swatch(palette::past_context, "past the sequence's context: masked (a load of its block may read it)");
    key.swatch(palette::table_read, "block-table entry read now");
    key.swatch(palette::table_shared, "another sequence's entry: a physical block shared");
  }
  ImGui::TableNextColumn();
  {
    Legend key(s, /*per_row=*/true);
    ImGui::TextDisabled("shared memory and global buffers");
    key.lanes("lit: touched now, in the touching thread's colour");
    key.swatch(dimmed(tensor_color(trace::Tensor::q_smem), palette::earlier_dim), "stored at an earlier step (q_vecs)");
    key.swatch(dimmed(tensor_color(trace::Tensor::kv_smem), palette::earlier_dim), "stored at an earlier step (K/V tiles)");
    key.swatch(dimmed(tensor_color(trace::Tensor::logits), palette::earlier_dim), "stored at an earlier step (logits)");
    key.swatch(dimmed(tensor_color(trace::Tensor::out_scratch), palette::earlier_dim),
               "stored at an earlier step (reduction and out scratch)");
    key.swatch(palette::word_even, "bank rows (shared) / sectors (global), alternating");
    key.framed(palette::word_even, palette::atomic_frame, "an atomic's word");
    ImGui::TextDisabled("requests (global: sectors, L2 requests; shared: bank wavefronts)");
    key.words(palette::at_ideal, "8 / 8", "cost at the ideal");
    key.words(palette::over_ideal, "16 / 8", "over the ideal: wasted sectors or a bank conflict");
    key.swatch(palette::sector_fetched, "a sector the request fetches");
    ImGui::TextDisabled("kernel source and lesson text");
    key.band(palette::own_region, palette::own_number, "the lines (and section) of the step");
    key.band(palette::enclosing_region, palette::enclosing_number, "a step without its own: the enclosing region");
    ImGui::TextDisabled("timeline (its legend names each phase's colour)");
    key.swatch(phase_color(trace::Phase::opt_pipeline_wait), "a phase's spans: full colour, or highlighted");
    key.swatch(dimmed(phase_color(trace::Phase::opt_pipeline_wait), 0.72f), "dimmed: another phase is highlighted");
    key.swatch(dimmed(phase_color(trace::Phase::opt_pipeline_wait), 0.5f), "faint: a pixel column only partly busy");
  }
  ImGui::EndTable();
}

}  // namespace

void draw_help_overlay(AppState& s) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(ImVec2(vp->WorkPos.x + vp->WorkSize.x * 0.5f, vp->WorkPos.y + vp->WorkSize.y * 0.5f),
                          ImGuiCond_Always, ImVec2(0.5f, 0.5f));
  ImGui::SetNextWindowBgAlpha(0.96f);
  if (ImGui::Begin("Keys, mouse and colours", &s.show_help,
                   ImGuiWindowFlags_AlwaysAutoResize | ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse)) {
    static const char* rows[][2] = {
        {"Space", "play / pause"},
        {"Left / Right", "previous / next step"},
        {"Home / End", "first / last step"},
        {"0 .. 9", "open lesson N"},
        {"?", "this help"},
        {"Esc", "clear the selection / close help"},
        {"click a lane", "select that thread: what it touches, when"},
        {"click a warp label", "select the whole warp"},
        {"click a K/V element or word", "who touches it, and at which steps"},
        {"hover anything", "coordinates, byte offsets, banks"},
        {"timeline: wheel / Shift+wheel", "zoom around the pointer / scroll the rows"},
        {"timeline: drag, F", "pan in time and through the rows; fit the whole timeline"},
        {"timeline: click a phase or a span", "highlight that phase's spans (again: clear)"},
        {"timeline: click a row label", "one level down: an SM's blocks, a block's warps"},
        {"timeline: double-click a row", "one level down, as clicking its label"},
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
    draw_colour_key(s);
  }
  ImGui::End();
}

}  // namespace pa::viewer
