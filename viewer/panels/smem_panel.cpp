// Q in global memory and the shared-memory buffers (q_vecs, logits,
// reduction scratch, out scratch) drawn as 4-byte words in rows of 32 banks.
// Words the current step touches are lit in the touching thread's colour;
// the bank-conflict count of the step's shared requests is shown per buffer.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "app/state.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

struct Buffer {
  trace::Tensor tensor;
  const char* title;
  const char* what;
  int bytes;
};

void draw_bank_buffer(AppState& s, const Buffer& b, float cell) {
  if (b.bytes <= 0) return;
  const std::span<const std::uint32_t> cur = s.current_events();
  BankGridLayout g;
  g.words = (b.bytes + 3) / 4;
  g.cell_w = cell;
  g.cell_h = std::max(6.0f, cell * 0.75f);
  g.header_h = 0;
  const int max_rows = 48;  // long buffers (logits of long contexts): the rest scrolls in a child
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted(b.title);
  ImGui::PopFont();
  ImGui::SameLine();
  ImGui::TextDisabled("%s, %d B = %d words, %d bank row%s", b.what, b.bytes, g.words, g.rows(), g.rows() == 1 ? "" : "s");
  // Requests of this step on this buffer: conflicts.
  std::vector<std::uint32_t> mine;
  for (std::uint32_t i : cur)
    if (s.events[i].tensor == b.tensor) mine.push_back(i);
  if (!mine.empty()) {
    for (const Request& r : requests_of_step(s.events, mine)) {
      ImGui::TextColored(r.wavefronts > r.ideal_wavefronts ? ImVec4(1, 0.55f, 0.4f, 1) : ImVec4(0.5f, 0.9f, 0.55f, 1),
                         "  warp %d %s: %d lanes x %d B, %d wavefront%s (ideal %d)%s", r.warp, op_name(r.op), r.lanes,
                         r.access_bytes, r.wavefronts, r.wavefronts == 1 ? "" : "s", r.ideal_wavefronts,
                         r.wavefronts > r.ideal_wavefronts ? "  bank conflict" : "");
      if (r.warp >= 3 && ImGui::GetContentRegionAvail().y < 200) break;
    }
  }
  const bool scrolls = g.rows() > max_rows;
  const float h = std::min(g.height(), max_rows * g.cell_h) + ImGui::GetFontSize() * 0.8f + 4;
  ImGui::BeginChild((std::string("##buf") + b.title).c_str(), ImVec2(g.width() + (scrolls ? 16 : 2), h), false,
                    scrolls ? 0 : ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  // Bank numbers above the first row.
  for (int k = 0; k < 32; k += 4)
    dl->AddText(s.fonts.small, s.fonts.small->FontSize * 0.85f, ImVec2(o.x + k * g.cell_w, o.y), IM_COL32(130, 135, 150, 255),
                std::to_string(k).c_str());
  ImGui::Dummy(ImVec2(1, ImGui::GetFontSize() * 0.8f));
  o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##cells", ImVec2(g.width(), std::max(1.0f, g.height())));
  const bool hov = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  const float sy = ImGui::GetScrollY(), wh = ImGui::GetWindowHeight();
  const int row0 = std::max(0, static_cast<int>(sy / g.cell_h) - 1);
  const int row1 = std::min(g.rows(), static_cast<int>((sy + wh) / g.cell_h) + 2);
  for (int w = row0 * 32; w < std::min(g.words, row1 * 32); ++w) {
    const Rect r = g.word_rect(w).offset(o.x, o.y);
    dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - 1, r.y1 - 1), (w / 32) % 2 ? IM_COL32(42, 45, 55, 255) : IM_COL32(47, 50, 61, 255));
  }
  std::vector<std::pair<int, int>> hover_threads;
  std::optional<int> hw;
  if (hov) {
    const ImVec2 m = ImGui::GetMousePos();
    hw = g.hit(m.x - o.x, m.y - o.y);
  }
  for (std::uint32_t i : mine) {
    const auto& e = s.events[i];
    if (e.byte_offset < 0 || e.bytes <= 0) continue;
    const bool in_focus = !s.focus.active() || s.focus.matches(e);
    const Rgba tc = thread_color(e.warp, e.lane, s.cfg.num_warps);
    for (std::int64_t w = e.byte_offset / 4; w <= (e.byte_offset + e.bytes - 1) / 4 && w < g.words; ++w) {
      if (hw && *hw == w) hover_threads.push_back({e.warp, e.lane});
      const Rect r = g.word_rect(static_cast<int>(w)).offset(o.x, o.y);
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - 1, r.y1 - 1), in_focus ? col(tc) : dim_col(tc, 0.7f));
    }
  }
  if (s.focus.kind == Focus::Kind::element && s.focus.tensor == b.tensor) {
    const Rect r = g.word_rect(static_cast<int>(s.focus.byte_begin / 4)).offset(o.x, o.y);
    dl->AddRect(ImVec2(r.x0 - 1, r.y0 - 1), ImVec2(r.x1, r.y1), IM_COL32(255, 255, 255, 255), 0, 0, 2);
  }
  if (hw) {
    ImGui::BeginTooltip();
    ImGui::Text("%s word %d: bytes [%d, %d), bank %d", tensor_name(b.tensor), *hw, *hw * 4, *hw * 4 + 4, *hw % 32);
    if (b.tensor == trace::Tensor::q_smem)
      ImGui::Text("holds Q dims %d..%d", *hw * 4 / s.cfg.elem_bytes, (*hw * 4 + 3) / s.cfg.elem_bytes);
    if (b.tensor == trace::Tensor::logits) ImGui::Text("logit of token %d of the partition", *hw);
    for (auto [w, l] : hover_threads) ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "touched now by warp %d lane %d", w, l);
    ImGui::TextDisabled("click: who touches it, and when");
    ImGui::EndTooltip();
    if (clicked) s.set_focus(Focus::element(b.tensor, static_cast<std::int64_t>(*hw) * 4, 4));
  }
  ImGui::EndChild();
}

}  // namespace

void draw_smem_panel(AppState& s) {
  const ConfigInfo& c = s.cfg;
  if (s.index.num_blocks() == 0) {
    ImGui::TextDisabled("no trace loaded");
    return;
  }
  ImGui::BeginChild("##smemscroll", ImVec2(0, 0), false);
  const float cell = std::clamp(std::floor((ImGui::GetContentRegionAvail().x - 24) / 32), 6.0f, 18.0f);

  // Q row of this (seq, head) in global memory: lit by the step's Q loads.
  {
    const BlockKey key = s.index.block(s.block);
    QueryGeometry q{s.spec.num_seqs(), s.spec.num_heads, c.head_size,
                    s.spec.num_heads * c.head_size + s.spec.extra_q_stride};
    const std::int64_t row0 = q.q_offset(key.seq, key.head, 0) * c.elem_bytes;
    ImGui::PushFont(s.fonts.bold);
    ImGui::TextUnformatted("Q (global)");
    ImGui::PopFont();
    ImGui::SameLine();
    ImGui::TextDisabled("q[%d][%d][0..%d], %s, byte offset %lld", key.seq, key.head, c.head_size - 1, dtype_name(c.dtype),
                        static_cast<long long>(row0));
    const float qc = std::clamp(std::floor((ImGui::GetContentRegionAvail().x - 8) / c.head_size), 2.0f, 12.0f);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##q", ImVec2(qc * c.head_size, 14));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int d = 0; d < c.head_size; ++d)
      dl->AddRectFilled(ImVec2(o.x + d * qc, o.y), ImVec2(o.x + (d + 1) * qc - 1, o.y + 13), IM_COL32(47, 50, 61, 255));
    std::vector<std::pair<int, int>> hov_threads;
    int hd = -1;
    if (ImGui::IsItemHovered()) hd = static_cast<int>((ImGui::GetMousePos().x - o.x) / qc);
    for (std::uint32_t i : s.current_events()) {
      const auto& e = s.events[i];
      if (e.tensor != trace::Tensor::q || e.byte_offset < 0) continue;
      const int d0 = static_cast<int>((e.byte_offset - row0) / c.elem_bytes);
      const int n = std::max(1, e.bytes / c.elem_bytes);
      const Rgba tc = thread_color(e.warp, e.lane, c.num_warps);
      const bool in_focus = !s.focus.active() || s.focus.matches(e);
      for (int d = std::max(0, d0); d < std::min(c.head_size, d0 + n); ++d) {
        if (d == hd) hov_threads.push_back({e.warp, e.lane});
        dl->AddRectFilled(ImVec2(o.x + d * qc, o.y), ImVec2(o.x + (d + 1) * qc - 1, o.y + 13), in_focus ? col(tc) : dim_col(tc, 0.7f));
      }
    }
    if (hd >= 0 && hd < c.head_size) {
      ImGui::BeginTooltip();
      ImGui::Text("q[%d][%d][%d]: byte offset %lld (16-byte chunk %d, K vec %d)", key.seq, key.head, hd,
                  static_cast<long long>(row0 + hd * c.elem_bytes), hd / c.x, hd / c.vec_size);
      for (auto [w, l] : hov_threads) ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "loaded now by warp %d lane %d", w, l);
      ImGui::EndTooltip();
    }
  }
  ImGui::Spacing();
  const int logits_len = std::max(0, s.token_end - s.token_begin);
  const Buffer bufs[] = {
      {trace::Tensor::q_smem, "q_vecs", "Q as thread-group-interleaved vecs", c.head_size * c.elem_bytes},
      {trace::Tensor::logits, "logits", "float per token, then probabilities", logits_len * 4},
      {trace::Tensor::red_scratch, "reduction scratch", "float per warp: max, then sum", 2 * c.num_warps * 4},
      {trace::Tensor::out_scratch, "out scratch", "float rows for the cross-warp reduction", (c.num_warps / 2) * c.head_size * 4},
  };
  for (const Buffer& b : bufs) {
    draw_bank_buffer(s, b, cell);
    ImGui::Spacing();
  }
  ImGui::EndChild();
}

}  // namespace pa::viewer
