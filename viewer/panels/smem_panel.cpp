// Q in global memory and the shared-memory buffers (q_vecs, logits,
// reduction scratch, out scratch, the K/V tiles of the tensor-core kernels)
// drawn as 4-byte words in rows of 32 banks; then the global buffers the
// block touches (outputs, partition/attention states, split-KV workspace and
// counters) as 128-byte lines of 32-byte sectors.
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
  std::int64_t base = 0;  // byte offset of the first word drawn
  bool global = false;    // global memory: 128-byte lines, 32-byte sectors (no banks)
};

// A buffer as 4-byte words, 32 per row: in shared memory a row is the 32
// banks (bank = word % 32), in global memory a 128-byte line of 4 sectors.
void draw_bank_buffer(AppState& s, const Buffer& b, float cell) {
  if (b.bytes <= 0) return;
  const std::span<const std::uint32_t> cur = s.current_events();
  BankGridLayout g;
  g.words = (b.bytes + 3) / 4;
  g.cell_w = cell;
  g.cell_h = std::max(6.0f * s.fonts.scale, cell * 0.75f);
  g.header_h = 0;
  const int max_rows = 48;  // long buffers (logits of long contexts): the rest scrolls in a child
  char detail[256];
  if (b.global)
    std::snprintf(detail, sizeof detail, "%s, bytes %lld..%lld touched by this block, %d line%s of 128 B", b.what,
                  static_cast<long long>(b.base), static_cast<long long>(b.base + b.bytes - 1), g.rows(),
                  g.rows() == 1 ? "" : "s");
  else
    std::snprintf(detail, sizeof detail, "%s, %d B = %d words, %d bank row%s%s", b.what, b.bytes, g.words, g.rows(),
                  g.rows() == 1 ? "" : "s", b.base > 0 ? (", from byte " + std::to_string(b.base)).c_str() : "");
  title_with_detail(s, b.title, detail);
  // This step's requests on this buffer: bank conflicts (shared), sectors and L2 requests (global).
  std::vector<std::uint32_t> mine;
  for (std::uint32_t i : cur)
    if (s.events[i].tensor == b.tensor) mine.push_back(i);
  if (!mine.empty()) {
    int shown = 0;
    for (const Request& r : requests_of_step(s.events, mine)) {
      if (r.global())
        ImGui::TextColored(cost_colour(r.sectors > r.ideal_sectors || r.l2_requests > r.ideal_l2_requests),
                           "  warp %d %s: %d lane%s x %d B, %d sector%s (ideal %d), L2 requests %d (fewest %d)", r.warp,
                           access_verb(r.op), r.lanes, r.lanes == 1 ? "" : "s", r.access_bytes, r.sectors,
                           r.sectors == 1 ? "" : "s", r.ideal_sectors, r.l2_requests, r.ideal_l2_requests);
      else
        ImGui::TextColored(cost_colour(r.wavefronts, r.ideal_wavefronts),
                           "  warp %d %s: %d lanes x %d B, %d wavefront%s (ideal %d)%s", r.warp, access_verb(r.op), r.lanes,
                           r.access_bytes, r.wavefronts, r.wavefronts == 1 ? "" : "s", r.ideal_wavefronts,
                           r.wavefronts > r.ideal_wavefronts ? "  bank conflict" : "");
      if (++shown >= 4 && ImGui::GetContentRegionAvail().y < 200 * s.fonts.scale) break;
    }
  }
  const bool scrolls = g.rows() > max_rows;
  const float h = std::min(g.height(), max_rows * g.cell_h) + ImGui::GetFontSize() * 0.8f + 4;
  ImGui::BeginChild((std::string("##buf") + b.title).c_str(), ImVec2(g.width() + (scrolls ? 16 * s.fonts.scale : 2), h), false,
                    scrolls ? 0 : ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  ImVec2 o = ImGui::GetCursorScreenPos();
  // Bank numbers (shared) or sector numbers within the line (global) above the first row.
  for (int k = 0; k < 32; k += b.global ? 8 : 4) {
    const std::string lbl = b.global ? "sector " + std::to_string(k / 8) : std::to_string(k);
    dl->AddText(s.fonts.small, s.fonts.small->FontSize * 0.85f, ImVec2(o.x + k * g.cell_w, o.y), IM_COL32(130, 135, 150, 255),
                lbl.c_str());
  }
  ImGui::Dummy(ImVec2(1, ImGui::GetFontSize() * 0.8f));
  o = ImGui::GetCursorScreenPos();
  // Follow the replay: a step whose words are out of view scrolls to the
  // first of them. Retried each frame until the child knows its content
  // height: a child that has just appeared (the tab switched with the step)
  // would clamp the scroll to 0.
  const int step = s.replay.current();
  int& scrolled = s.buffer_scrolled_step[b.title];
  if (s.step_changed) scrolled = -1;
  if (scrolled != step && scrolls && !mine.empty()) {
    std::int64_t first = -1;
    for (std::uint32_t i : mine)
      if (s.events[i].byte_offset >= b.base && (first < 0 || s.events[i].byte_offset < first)) first = s.events[i].byte_offset;
    const float header = ImGui::GetFontSize() * 0.8f;
    const float y = first >= 0 ? header + static_cast<int>((first - b.base) / 4 / 32) * g.cell_h : 0.0f;
    const float sy0 = ImGui::GetScrollY(), view = max_rows * g.cell_h;
    if (first < 0 || (y >= sy0 && y + g.cell_h <= sy0 + view)) {
      scrolled = step;
    } else if (ImGui::GetScrollMaxY() > 0) {
      ImGui::SetScrollY(std::max(0.0f, y - 2 * g.cell_h));
      scrolled = step;
    }
  }
  if (b.tensor == trace::Tensor::kv_smem) {
    s.drawn.smem_valid = true;
    s.drawn.smem_base = b.base;
    s.drawn.smem_origin = o;
    s.drawn.smem_cell_w = g.cell_w;
    s.drawn.smem_cell_h = g.cell_h;
    s.drawn.smem_words = g.words;
    s.drawn.smem_scroll_y = ImGui::GetScrollY();
    s.drawn.smem_view_top = ImGui::GetWindowPos().y;
    s.drawn.smem_view_h = ImGui::GetWindowHeight();
  }
  ImGui::InvisibleButton("##cells", ImVec2(g.width(), std::max(1.0f, g.height())));
  const bool hov = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  const float sy = ImGui::GetScrollY(), wh = ImGui::GetWindowHeight();
  const int row0 = std::max(0, static_cast<int>(sy / g.cell_h) - 1);
  const int row1 = std::min(g.rows(), static_cast<int>((sy + wh) / g.cell_h) + 2);
  // Shared memory keeps a tint of what earlier steps stored (as the KV
  // panel keeps earlier loads): the first store of each word, per block.
  const std::vector<int>* stored = nullptr;
  if (!b.global) {
    AppState::StoreCache& sc = s.store_cache;
    if (sc.trace_generation != s.trace_generation || sc.block != s.block) {
      sc.first.clear();
      sc.trace_generation = s.trace_generation;
      sc.block = s.block;
    }
    auto it = sc.first.find(b.tensor);
    if (it == sc.first.end()) it = sc.first.emplace(b.tensor, first_store_steps(s.events, s.index, s.block, b.tensor)).first;
    stored = &it->second;
  }
  const std::int64_t word0 = b.base / 4;
  const ImU32 earlier = dim_col(tensor_color(b.tensor), palette::earlier_dim);
  for (int w = row0 * 32; w < std::min(g.words, row1 * 32); ++w) {
    const Rect r = g.word_rect(w).offset(o.x, o.y);
    const bool alt = b.global ? (w / 8) % 2 : (w / 32) % 2;  // global: alternate sectors
    const int first = stored && static_cast<std::size_t>(word0 + w) < stored->size() ? (*stored)[word0 + w] : -1;
    const ImU32 fill = first >= 0 && first < step ? earlier : alt ? col(palette::word_odd) : col(palette::word_even);
    dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - 1, r.y1 - 1), fill);
  }
  std::vector<std::pair<int, int>> hover_threads;
  std::vector<std::uint32_t> hover_events;
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
    const std::int64_t w0 = (e.byte_offset - b.base) / 4, w1 = (e.byte_offset - b.base + e.bytes - 1) / 4;
    for (std::int64_t w = std::max<std::int64_t>(0, w0); w <= w1 && w < g.words; ++w) {
      if (hw && *hw == w) {
        hover_threads.push_back({e.warp, e.lane});
        hover_events.push_back(i);
      }
      const Rect r = g.word_rect(static_cast<int>(w)).offset(o.x, o.y);
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - 1, r.y1 - 1), in_focus ? col(tc) : dim_col(tc, 0.7f));
      if (e.op == trace::Op::atomic)  // an atomic: a red frame around the word
        dl->AddRect(ImVec2(r.x0, r.y0), ImVec2(r.x1 - 1, r.y1 - 1), col(palette::atomic_frame), 0, 0, 2);
    }
  }
  if (s.focus.kind == Focus::Kind::element && s.focus.tensor == b.tensor) {
    const std::int64_t w = (s.focus.byte_begin - b.base) / 4;
    if (w >= 0 && w < g.words) {
      const Rect r = g.word_rect(static_cast<int>(w)).offset(o.x, o.y);
      dl->AddRect(ImVec2(r.x0 - 1, r.y0 - 1), ImVec2(r.x1, r.y1), IM_COL32(255, 255, 255, 255), 0, 0, 2);
    }
  }
  if (hw) {
    const std::int64_t byte = b.base + static_cast<std::int64_t>(*hw) * 4;
    ImGui::BeginTooltip();
    if (b.global)
      ImGui::Text("%s bytes [%lld, %lld): 32-byte sector %lld, 128-byte line %lld", tensor_name(b.tensor),
                  static_cast<long long>(byte), static_cast<long long>(byte + 4), static_cast<long long>(byte / 32),
                  static_cast<long long>(byte / 128));
    else
      ImGui::Text("%s word %lld: bytes [%lld, %lld), bank %lld", tensor_name(b.tensor), static_cast<long long>(byte / 4),
                  static_cast<long long>(byte), static_cast<long long>(byte + 4), static_cast<long long>((byte / 4) % 32));
    if (b.tensor == trace::Tensor::q_smem) {  // what the word's first store wrote there
      const std::size_t wi = static_cast<std::size_t>(byte / 4);
      const int k = stored && wi < stored->size() ? (*stored)[wi] : -1;
      if (const auto d = stored_dims(s.events, s.index, s.block, k, b.tensor, byte, s.cfg.elem_bytes))
        ImGui::Text("holds Q dims %d..%d (stored at step %d)", d->first, d->second, k);
      else
        ImGui::TextDisabled("this block's trace stores no Q dims here");
    }
    if (b.tensor == trace::Tensor::logits) ImGui::Text("logit of token %lld of the partition", static_cast<long long>(byte / 4));
    for (std::uint32_t i : hover_events) {
      const auto& e = s.events[i];
      if (b.tensor == trace::Tensor::kv_smem && e.token >= 0)
        ImGui::Text("%s tile: token %d, dims %d..%d (%s)", e.step == trace::Step::v_load || e.step == trace::Step::v_smem_load ? "V" : "K",
                    e.token, e.dim_begin, e.dim_begin + std::max<int>(1, e.dim_count) - 1, step_name(e.step));
      ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "%s now by warp %d lane %d", access_verb(e.op), e.warp, e.lane);
    }
    ImGui::TextDisabled("click: who touches it, and when");
    ImGui::EndTooltip();
    if (clicked) s.set_focus(Focus::element(b.tensor, byte, 4));
  }
  ImGui::EndChild();
}

}  // namespace

void draw_smem_panel(AppState& s) {
  const ConfigInfo& c = s.cfg;
  s.drawn.smem_valid = false;
  if (s.index.num_blocks() == 0) {
    ImGui::TextDisabled("no trace loaded");
    return;
  }
  // The colour key (the help overlay, '?', has every panel's).
  {
    const bool tiles_shown = s.extent(trace::Tensor::kv_smem) != nullptr;
    Legend key(s);
    key.lanes("touched now: the thread's colour");
    key.swatch(dimmed(tensor_color(tiles_shown ? trace::Tensor::kv_smem : trace::Tensor::q_smem), palette::earlier_dim),
               "stored earlier (dimmed, each buffer's colour)");
    key.framed(palette::word_even, palette::atomic_frame, "atomic");
    key.words(palette::over_ideal, "bank conflict", "more passes than ideal");
  }
  ImGui::BeginChild("##smemscroll", ImVec2(0, 0), false);
  const float k = s.fonts.scale;  // HiDPI
  const float cell = std::clamp(std::floor((ImGui::GetContentRegionAvail().x - 24 * k) / 32), 6.0f * k, 18.0f * k);

  // Q row of this (seq, head) in global memory: lit by the step's Q loads.
  {
    const BlockKey key = s.index.block(s.block);
    QueryGeometry q{s.spec.num_seqs(), s.spec.num_heads, c.head_size,
                    s.spec.num_heads * c.head_size + s.spec.extra_q_stride};
    const std::int64_t row0 = q.q_offset(key.seq, key.head, 0) * c.elem_bytes;
    char detail[160];
    std::snprintf(detail, sizeof detail, "q[%d][%d][0..%d], %s, byte offset %lld", key.seq, key.head, c.head_size - 1,
                  dtype_name(c.dtype), static_cast<long long>(row0));
    title_with_detail(s, "Q (global)", detail);
    const float qc = std::clamp(std::floor((ImGui::GetContentRegionAvail().x - 8 * k) / c.head_size), 2.0f * k, 12.0f * k);
    const float qh = std::round(13 * k);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    ImGui::InvisibleButton("##q", ImVec2(qc * c.head_size, qh + 1));
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int d = 0; d < c.head_size; ++d)
      dl->AddRectFilled(ImVec2(o.x + d * qc, o.y), ImVec2(o.x + (d + 1) * qc - 1, o.y + qh), IM_COL32(47, 50, 61, 255));
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
        dl->AddRectFilled(ImVec2(o.x + d * qc, o.y), ImVec2(o.x + (d + 1) * qc - 1, o.y + qh), in_focus ? col(tc) : dim_col(tc, 0.7f));
      }
    }
    if (hd >= 0 && hd < c.head_size) {
      ImGui::BeginTooltip();
      ImGui::Text("q[%d][%d][%d]: byte offset %lld (16-byte chunk %d, Q vec %d of %d B)", key.seq, key.head, hd,
                  static_cast<long long>(row0 + hd * c.elem_bytes), hd * c.elem_bytes / 16, hd / c.vec_size,
                  c.q_vec_bytes);
      // An fp8 cache: the same elements per vec, half the bytes in K.
      if (c.q_vec_bytes != c.vec_bytes)
        ImGui::TextDisabled("the K vec it meets holds the same %d elements in %d B of %s", c.vec_size, c.vec_bytes,
                            kv_dtype_name(c.kv_dtype));
      for (auto [w, l] : hov_threads) ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "loaded now by warp %d lane %d", w, l);
      ImGui::EndTooltip();
    }
  }
  ImGui::Spacing();
  const int logits_len = std::max(0, s.token_end - s.token_begin);
  // The v1 kernels' buffers at the sizes KernelConfig gives, grown to what the
  // trace touches (the tensor-core kernels lay theirs out differently).
  auto traced = [&](trace::Tensor t, int bytes) {
    const BlockCaches::Extent* x = s.extent(t);
    return x ? std::max<std::int64_t>(bytes, x->end) : bytes;
  };
  const bool tiles = s.extent(trace::Tensor::kv_smem) != nullptr;  // a tensor-core kernel's trace
  Buffer bufs[] = {
      {trace::Tensor::kv_smem, "K/V tiles (kv_smem)",
       is_fp8(s.spec.kv_dtype) ? "cp.async pipeline buffers of fp8 codes, read by 4-byte loads (then cvt)"
                               : "cp.async pipeline buffers, read by ldmatrix",
       0},
      {trace::Tensor::q_smem, "q_vecs", "Q as thread-group-interleaved vecs", c.head_size * c.elem_bytes},
      {trace::Tensor::logits, "logits", "float per token, then probabilities", logits_len * 4},
      {trace::Tensor::red_scratch, "reduction scratch", "float per warp: max, then sum", 2 * c.num_warps * 4},
      {trace::Tensor::out_scratch, "out scratch", "float rows for the cross-warp reduction", (c.num_warps / 2) * c.head_size * 4},
  };
  for (Buffer& b : bufs) {
    // A buffer the trace never touches is left out when the trace uses shared
    // memory in other buffers (stage 8 has no q_vecs or logits).
    const BlockCaches::Extent* x = s.extent(b.tensor);
    if (!x && (b.tensor == trace::Tensor::kv_smem || tiles)) continue;
    if (tiles && x) {
      // The tensor-core kernel's offsets are into one dynamic shared-memory
      // allocation: draw from the first 128-byte row the buffer uses (banks
      // stay right: a row is 128 bytes).
      b.base = x->begin / 128 * 128;
      b.bytes = static_cast<int>(std::min<std::int64_t>(x->end - b.base, 1 << 20));
    } else {
      b.bytes = static_cast<int>(std::min<std::int64_t>(traced(b.tensor, b.bytes), 1 << 20));
    }
    draw_bank_buffer(s, b, cell);
    ImGui::Spacing();
  }

  // Global buffers the block writes or reads besides Q and the KV cache:
  // outputs, V2 partition states, cascade states, the split-KV workspace and
  // its counters. Drawn from the first 128-byte line the block touches.
  bool title = false;
  for (const BlockCaches::Extent& x : s.extents) {
    if (!is_global_buffer(x.tensor)) continue;
    if (!title) {
      ImGui::Separator();
      title_with_detail(s, "Global buffers", "(rows are 128-byte lines, alternating shades are 32-byte sectors)");
      title = true;
    }
    Buffer b{x.tensor, tensor_name(x.tensor), "", 0, x.begin / 128 * 128, true};
    switch (x.tensor) {
      case trace::Tensor::workspace: b.what = "split-KV states: unnormalized O, max, sum"; break;
      case trace::Tensor::counter: b.what = "split arrivals (atomic; the last CTA merges)"; break;
      case trace::Tensor::part_out: b.what = "V2: partition outputs"; break;
      case trace::Tensor::part_max: b.what = "V2: partition max"; break;
      case trace::Tensor::part_sum: b.what = "V2: partition exp-sum"; break;
      case trace::Tensor::state_out: b.what = "attention state: output"; break;
      case trace::Tensor::state_lse: b.what = "attention state: log-sum-exp"; break;
      case trace::Tensor::prefix_out: b.what = "cascade: the shared prefix's state, output"; break;
      case trace::Tensor::prefix_lse: b.what = "cascade: the shared prefix's state, log-sum-exp"; break;
      case trace::Tensor::suffix_out: b.what = "cascade: the suffix's state, output"; break;
      case trace::Tensor::suffix_lse: b.what = "cascade: the suffix's state, log-sum-exp"; break;
      case trace::Tensor::alibi_slopes: b.what = "ALiBi: one slope per query head (float)"; break;
      case trace::Tensor::kv_indptr: b.what = "CSR page table: where each sequence's row of pages starts (int)"; break;
      case trace::Tensor::kv_last_page_len: b.what = "CSR page table: tokens in each sequence's last page (int)"; break;
      default: b.what = "global"; break;
    }
    b.bytes = static_cast<int>(std::min<std::int64_t>(x.end - b.base, 1 << 20));
    draw_bank_buffer(s, b, cell);
    ImGui::Spacing();
  }
  ImGui::EndChild();
}

}  // namespace pa::viewer
