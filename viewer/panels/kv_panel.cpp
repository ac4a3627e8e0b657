// The paged KV cache of the selected sequence: the block table (logical ->
// physical), then per logical block its physical K block in the
// [head_size/x][block_size][x] tiling and V block in [head_size][block_size].
// Elements the current step touches are lit in the touching thread's colour;
// elements loaded at earlier steps are tinted; tokens past the context are
// hatched. Only the visible blocks are drawn.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "app/state.hpp"
#include "core/address_map.hpp"
#include "core/names.hpp"

namespace pa::viewer {
namespace {

bool show_k(const AppState& s) {
  if (s.kv_show != 0) return s.kv_show == 1 || s.kv_show == 3;
  return s.reads_k || !s.reads_v;
}
bool show_v(const AppState& s) {
  if (s.kv_show != 0) return s.kv_show >= 2;
  return s.reads_v;
}

// One page of the cache in address order, 128-byte line by line (K half, V
// half): the shown kv head's lines tinted K / V, the other kv heads' lines
// grey, the lines the current step reads lit in the reading thread's colour.
// The page: the first one the step reads, else the first of the sequence.
constexpr Rgba kOtherHeadLine = palette::rgb8(78, 82, 96);  // another kv head's line: grey, lighter than the background

void draw_page_address_map(AppState& s, std::span<const std::uint32_t> cur) {
  const ConfigInfo& c = s.cfg;
  int page = s.slot_physical.empty() ? -1 : s.slot_physical[0];
  for (std::uint32_t i : cur) {
    const auto& e = s.events[i];
    if ((e.tensor == trace::Tensor::k_cache || e.tensor == trace::Tensor::v_cache) && e.physical_block >= 0 &&
        e.kv_head == s.kv_head) {
      page = e.physical_block;
      break;
    }
  }
  if (page < 0) return;
  const PageAddressMap m = page_address_map(c.cache(s.spec.num_kv_heads), page, c.kv_elem_bytes);
  const int n = static_cast<int>(m.k.size());
  if (n == 0) return;
  // Lit lines: the thread (warp, lane) that reads each first.
  std::vector<int> k_lit(n, -1), v_lit(n, -1);
  for (std::uint32_t i : cur) {
    const auto& e = s.events[i];
    const bool k = e.tensor == trace::Tensor::k_cache;
    if ((!k && e.tensor != trace::Tensor::v_cache) || e.byte_offset < 0 || e.bytes <= 0) continue;
    // Every line from the one holding the first byte to the one holding the last.
    const int first = k ? m.k_line(e.byte_offset) : m.v_line(e.byte_offset);
    const int last = k ? m.k_line(e.byte_offset + e.bytes - 1) : m.v_line(e.byte_offset + e.bytes - 1);
    if (first < 0 || last < 0) continue;  // another page's bytes
    for (int l = first; l <= last; ++l) {
      int& who = (k ? k_lit : v_lit)[l];
      if (who < 0) who = e.warp * kWarpSize + e.lane;
    }
  }
  const float k = s.fonts.scale;
  const int per_row = 32;  // 4 KB of the page a row
  const float cw = std::max(4.0f * k, std::min(14.0f * k, (ImGui::GetContentRegionAvail().x - 60 * k) / per_row));
  const float ch = 10 * k, gap = std::max(1.0f, std::round(k));
  {
    char what[256];
    std::snprintf(what, sizeof what,
                  "physical page %d in address order, one cell = 128 bytes (a line), %d B a row: kv head %d's lines "
                  "tinted, the other kv heads' grey, the lines the current step reads lit",
                  page, per_row * PageAddressMap::kLineBytes, s.kv_head);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", what);
    ImGui::PopStyleColor();
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const Rgba kcol = tensor_color(trace::Tensor::k_cache), vcol = tensor_color(trace::Tensor::v_cache);
  for (int half = 0; half < 2; ++half) {
    const bool isk = half == 0;
    const std::vector<PageLine>& lines = isk ? m.k : m.v;
    const std::vector<int>& lit = isk ? k_lit : v_lit;
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(isk ? "K" : "V");
    ImGui::SameLine(30 * k);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const int rows = (n + per_row - 1) / per_row;
    ImGui::InvisibleButton(isk ? "##amk" : "##amv", ImVec2(per_row * (cw + gap), rows * (ch + gap)));
    const bool hov = ImGui::IsItemHovered();
    for (int i = 0; i < n; ++i) {
      const float x0 = o.x + (i % per_row) * (cw + gap), y0 = o.y + (i / per_row) * (ch + gap);
      ImU32 fill = lines[i].kv_head == s.kv_head ? dim_col(isk ? kcol : vcol, 0.55f) : col(kOtherHeadLine);
      if (lit[i] >= 0) fill = col(thread_color(lit[i] / kWarpSize, lit[i] % kWarpSize, c.num_warps));
      dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x0 + cw, y0 + ch), fill);
    }
    if (hov) {
      const ImVec2 mp = ImGui::GetMousePos();
      const int cx = static_cast<int>((mp.x - o.x) / (cw + gap)), cy = static_cast<int>((mp.y - o.y) / (ch + gap));
      const int i = cy * per_row + cx;
      if (cx >= 0 && cx < per_row && i >= 0 && i < n) {
        const PageLine& pl = lines[i];
        const std::int64_t b0 = (isk ? m.k_base : m.v_base) + static_cast<std::int64_t>(i) * PageAddressMap::kLineBytes;
        ImGui::BeginTooltip();
        ImGui::Text("%s line %d of page %d: tensor bytes %lld-%lld", isk ? "K" : "V", i, page,
                    static_cast<long long>(b0), static_cast<long long>(b0 + PageAddressMap::kLineBytes - 1));
        ImGui::Text("kv head %d: token %d dim %d .. token %d dim %d", pl.kv_head, pl.t0, pl.d0, pl.t1, pl.d1);
        if (lit[i] >= 0) ImGui::Text("read now, first by warp %d lane %d", lit[i] / kWarpSize, lit[i] % kWarpSize);
        ImGui::EndTooltip();
      }
    }
  }
}

}  // namespace

void draw_kv_panel(AppState& s) {
  const ConfigInfo& c = s.cfg;
  const int nslots = static_cast<int>(s.slot_physical.size());
  if (nslots == 0) {
    ImGui::TextDisabled("no trace loaded");
    s.drawn.kv_valid = false;
    return;
  }
  const BlockKey key = s.index.num_blocks() > 0 ? s.index.block(s.block) : BlockKey{};
  const int ctx = key.seq < s.spec.num_seqs() ? s.spec.context_lens[key.seq] : 0;

  // ---- controls
  ImGui::TextDisabled("seq %d, head %d -> kv head %d, %d tokens, %d blocks of %d", key.seq, key.head, s.kv_head, ctx,
                      nslots, c.block_size);
  ImGui::SameLine();
  const char* modes[] = {"auto", "K", "V", "K+V"};
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 4.5f);
  ImGui::Combo("show", &s.kv_show, modes, 4);
  // The layout says which cells are one run of addresses: what a 16-byte
  // copy's neighbours read next to it.
  {
    const int row_bytes = c.head_size * c.kv_elem_bytes;
    char lay[400];
    if (c.kv_layout == pa::KvLayout::nhd)
      std::snprintf(lay, sizeof lay,
                    "nhd page tensor [page][K, V][token][kv head][dim]: each row is one token's %d contiguous bytes; "
                    "the next token's row starts %d bytes further (the other %d kv heads' rows lie between)",
                    row_bytes, row_bytes * s.spec.num_kv_heads, s.spec.num_kv_heads - 1);
    else if (c.kv_layout == pa::KvLayout::hnd)
      std::snprintf(lay, sizeof lay,
                    "hnd page tensor [page][K, V][kv head][token][dim]: each row is one token's %d contiguous bytes, "
                    "the rows follow one another: this kv head's K (and V) of a page is one run of %d bytes",
                    row_bytes, row_bytes * c.block_size);
    else
      std::snprintf(lay, sizeof lay,
                    "vLLM layout: K [block][kv head][dim/x][token][x]: each chunk column (x = %d dims of every token) "
                    "is one run of addresses, top to bottom; V [block][kv head][dim][token]: each row (one dim, every "
                    "token) is one run",
                    c.x);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", lay);
    ImGui::PopStyleColor();
  }
  // An fp8 cache changes one number, the element's bytes, and with it how
  // many elements each load lights up.
  if (is_fp8(c.kv_dtype)) {
    char fp8[320];
    if (s.stage == trace::Stage::optimized)
      std::snprintf(fp8, sizeof fp8,
                    "%s cache: %d byte per element, x = %d per 16-byte chunk; each 16-byte cp.async copies %d elements "
                    "into the K/V tiles, dequantized (code * scale) after the fragment loads",
                    kv_dtype_name(c.kv_dtype), c.kv_elem_bytes, c.x, c.x);
    else
      std::snprintf(fp8, sizeof fp8,
                    "%s cache: %d byte per element, x = %d per 16-byte chunk; a K vec load = %d B = %d elements, a V "
                    "vec load = %d B = %d elements, each dequantized (code * scale) after the load",
                    kv_dtype_name(c.kv_dtype), c.kv_elem_bytes, c.x, c.vec_bytes, c.vec_size, c.v_vec_bytes,
                    c.v_vec_size);
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("%s", fp8);
    ImGui::PopStyleColor();
  }

  // ---- the colour key (the help overlay, '?', has every panel's)
  {
    Legend key(s);
    key.lanes("touched now: the thread's colour");
    if (show_k(s)) key.swatch(dimmed(tensor_color(trace::Tensor::k_cache), palette::earlier_dim), "K loaded earlier");
    if (show_v(s)) key.swatch(dimmed(tensor_color(trace::Tensor::v_cache), palette::earlier_dim), "V loaded earlier");
    key.swatch(palette::untouched, "not loaded yet");
    key.swatch(palette::past_context, "past the context");
    key.swatch(palette::table_read, "table entry read now");
  }

  // ---- block table
  if (std::all_of(s.slot_from_problem.begin(), s.slot_from_problem.end(), [](char c) { return c != 0; }))
    ImGui::TextDisabled("(this trace does not read the block table: the mapping shown is the problem's)");
  const std::span<const std::uint32_t> cur = s.current_events();
  std::vector<char> table_lit(nslots, 0);
  for (std::uint32_t i : cur) {
    const auto& e = s.events[i];
    if (e.tensor == trace::Tensor::block_table && e.logical_block >= 0 && e.logical_block < nslots) table_lit[e.logical_block] = 1;
  }
  {
    StripLayout st;
    st.n = nslots;
    st.cell_w = ImGui::CalcTextSize("000").x + 8;
    st.cell_h = ImGui::GetFontSize() + 4;
    st.per_row = std::max(1, static_cast<int>((ImGui::GetContentRegionAvail().x - ImGui::GetFontSize() * 6) / (st.cell_w + st.gap)));
    st.per_row = std::min(st.per_row, std::max(1, nslots));
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("block table");
    ImGui::SameLine(ImGui::GetFontSize() * 6);
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const int rows_shown = std::min(st.rows(), 3);
    const float h = rows_shown * (st.cell_h + st.gap);
    ImGui::InvisibleButton("##bt", ImVec2(std::max(1.0f, st.width()), std::max(1.0f, h)));
    const bool hov = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const int shown = std::min(nslots, rows_shown * st.per_row);
    for (int l = 0; l < shown; ++l) {
      const Rect r = st.cell_rect(l).offset(o.x, o.y);
      const ImU32 fill = table_lit[l] ? col(palette::table_read)
                         : l < static_cast<int>(s.slot_from_problem.size()) && s.slot_from_problem[l] ? col(palette::table_from_problem)
                                                                                                       : col(palette::table_entry);
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1, r.y1), fill, 3);
      char buf[16];
      std::snprintf(buf, sizeof buf, "%d", s.slot_physical[l]);
      const ImVec2 ts = ImGui::CalcTextSize(buf);
      dl->AddText(ImVec2(r.x0 + (r.w() - ts.x) * 0.5f, r.y0 + 2), IM_COL32(230, 232, 240, 255), buf);
    }
    if (hov) {
      const ImVec2 m = ImGui::GetMousePos();
      if (auto l = st.hit(m.x - o.x, m.y - o.y); l && *l < shown)
        ImGui::SetTooltip("block_tables[%d][%d] = %d\nlogical block %d (tokens %d-%d) lives in physical block %d", key.seq,
                          *l, s.slot_physical[*l], *l, *l * c.block_size, std::min(ctx, (*l + 1) * c.block_size) - 1,
                          s.slot_physical[*l]);
    }
    if (nslots > shown) ImGui::TextDisabled("... %d more entries", nslots - shown);

    // The other sequences' tables: physical blocks shared with this sequence
    // (a cascade prefix) are marked.
    const int nseq = static_cast<int>(s.tables.size());
    for (int q = 0; q < nseq && q < 4; ++q) {
      if (q == key.seq) continue;
      const auto& row = s.tables[q];
      ImGui::AlignTextToFramePadding();
      ImGui::TextDisabled("seq %d", q);
      ImGui::SameLine(ImGui::GetFontSize() * 6);
      const ImVec2 o2 = ImGui::GetCursorScreenPos();
      const int n2 = std::min(static_cast<int>(row.size()), st.per_row);
      ImGui::Dummy(ImVec2(std::max(1.0f, n2 * (st.cell_w + st.gap)), st.cell_h));
      for (int l = 0; l < n2; ++l) {
        const bool shared = std::find(s.slot_physical.begin(), s.slot_physical.end(), row[l]) != s.slot_physical.end();
        const Rect r = st.cell_rect(l).offset(o2.x, o2.y);
        dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1, r.y1), shared ? col(palette::table_shared) : col(palette::table_from_problem), 3);
        char buf[16];
        std::snprintf(buf, sizeof buf, "%d", row[l]);
        const ImVec2 ts = ImGui::CalcTextSize(buf);
        dl->AddText(ImVec2(r.x0 + (r.w() - ts.x) * 0.5f, r.y0 + 2), IM_COL32(200, 204, 215, 255), buf);
      }
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("block table of sequence %d (%zu blocks); orange: physical blocks it shares with sequence %d",
                          q, row.size(), key.seq);
    }
  }

  // ---- one page in address order: open from the start for the token-row
  // layouts, where it shows what the tiles cannot (nhd's interleaved kv
  // heads); for vLLM's a click away, so the tiles keep the panel's top.
  if (ImGui::CollapsingHeader("page in memory, address order",
                              kv_layout_token_rows(c.kv_layout) ? ImGuiTreeNodeFlags_DefaultOpen : 0))
    draw_page_address_map(s, cur);

  // ---- the blocks
  KvPanelLayout l;
  l.head_size = c.head_size;
  l.block_size = c.block_size;
  l.x = c.x;
  // V bands (vLLM's V tile): a whole number of LV iterations' rows, about
  // block_size tall, so the V tile is about as wide as the K tile for every
  // configuration. Token rows draw V like K and use no bands.
  l.band_rows = c.num_rows_per_iter > 0
                    ? std::max(c.num_rows_per_iter, c.block_size / c.num_rows_per_iter * c.num_rows_per_iter)
                    : c.block_size;
  l.slots = nslots;
  l.token_rows = kv_layout_token_rows(c.kv_layout);
  l.show_k = show_k(s);
  l.show_v = show_v(s);
  l.label_w = 0;
  l.title_h = ImGui::GetFontSize() + 4;
  const float k = s.fonts.scale;  // HiDPI: cell limits and gaps grow with the fonts
  l.chunk_gap = std::round((c.head_size / c.x > 16 ? 1 : 3) * k);  // many narrow chunks (fp32, head 256): thin gaps
  l.cell_w = KvPanelLayout::fit_cell(ImGui::GetContentRegionAvail().x - 16 * k, l, 2 * k, 12 * k);
  l.cell_h = std::max(5.0f * k, std::min(l.cell_w, 10.0f * k));
  l.part_gap = ImGui::GetFontSize() * 0.6f;
  l.slot_gap = 10 * k;

  ImGui::BeginChild("##kvscroll", ImVec2(0, 0), false, ImGuiWindowFlags_HorizontalScrollbar);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  s.drawn.kv_valid = true;
  s.drawn.kv_origin = o;
  s.drawn.kv = l;
  s.drawn.slot_physical = s.slot_physical;
  s.drawn.kv_head = s.kv_head;
  ImGui::InvisibleButton("##kvcells", ImVec2(std::max(1.0f, l.width()), std::max(1.0f, l.height())));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float sy = ImGui::GetScrollY();
  // Named variables, not a structured binding: the lambdas below use them.
  const std::pair<int, int> visible = l.visible_slots(sy, sy + ImGui::GetWindowHeight());
  const int first = visible.first, last = visible.second;
  const int H = c.head_size, B = c.block_size;
  const int step = s.replay.current();
  const Rgba kcol = tensor_color(trace::Tensor::k_cache), vcol = tensor_color(trace::Tensor::v_cache);
  const ImU32 base = col(palette::untouched), past = col(palette::past_context);

  for (int slot = first; slot < last; ++slot) {
    const Rect sr = l.slot_rect(slot).offset(o.x, o.y);
    const int tok0 = slot * B;
    const int valid = std::clamp(ctx - tok0, 0, B);
    char title[160];
    std::snprintf(title, sizeof title, "logical %d  \xE2\x86\x92  physical %d     tokens %d-%d%s", slot,
                  s.slot_physical[slot], tok0, tok0 + valid - 1, valid < B ? "  (partly filled)" : "");
    dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(sr.x0, sr.y0 + 1), IM_COL32(175, 182, 200, 255), title);
    for (int part = 0; part < 2; ++part) {
      const bool isk = part == 0;
      if ((isk && !l.show_k) || (!isk && !l.show_v)) continue;
      const std::vector<int>& fs = isk ? s.k_first_step : s.v_first_step;
      const Rgba pc = isk ? kcol : vcol;
      const ImU32 earlier = dim_col(pc, palette::earlier_dim);
      for (int d = 0; d < H; ++d) {
        for (int t = 0; t < B; ++t) {
          const Rect r = (isk ? l.k_cell(slot, d, t) : l.v_cell(slot, d, t)).offset(o.x, o.y);
          ImU32 fill = t >= valid ? past : base;
          const std::size_t ci = (static_cast<std::size_t>(slot) * H + d) * B + t;
          if (ci < fs.size() && fs[ci] >= 0 && fs[ci] < step) fill = earlier;
          dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - (l.cell_w > 3 ? 1 : 0), r.y1 - 1), fill);
        }
      }
      // Chunk / band captions.
      const Rect tile = (isk ? l.k_tile(slot) : l.v_tile(slot)).offset(o.x, o.y);
      dl->AddText(s.fonts.small, s.fonts.small->FontSize * 0.9f, ImVec2(tile.x1 + 4, tile.y0),
                  IM_COL32(150, 155, 170, 255), isk ? "K" : "V");
    }
  }

  // Lit elements of the current step.
  const KvLayoutGeometry g = c.cache(s.spec.num_kv_heads);
  struct Hov { bool any = false; int warp = 0, lane = 0; };
  std::optional<KvCell> hcell;
  if (hovered) {
    const ImVec2 m = ImGui::GetMousePos();
    hcell = l.hit(m.x - o.x, m.y - o.y);
  }
  std::vector<std::pair<int, int>> hover_threads;
  // Follow the replay: when the step changes and what it touches is out of
  // view, scroll to the first touched block.
  if (s.step_changed) {
    int first_lit = -1;
    for (std::uint32_t i : cur) {
      const auto& e = s.events[i];
      if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) continue;
      auto it = s.slot_of_physical.find(e.physical_block);
      if (it != s.slot_of_physical.end() && (first_lit < 0 || it->second < first_lit)) first_lit = it->second;
    }
    if (first_lit >= 0 && (first_lit < first || first_lit >= last - 1))
      ImGui::SetScrollY(first_lit * l.slot_height());
  }
  for (std::uint32_t i : cur) {
    const auto& e = s.events[i];
    if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) continue;
    const bool isk = e.tensor == trace::Tensor::k_cache;
    if ((isk && !l.show_k) || (!isk && !l.show_v)) continue;
    const bool in_focus = !s.focus.active() || s.focus.matches(e);
    const Rgba tc = thread_color(e.warp, e.lane, c.num_warps);
    const ImU32 fill = in_focus ? col(tc) : dim_col(tc, 0.7f);
    for_each_kv_element(e, g, c.kv_elem_bytes, [&](const CacheGeometry::Coords& k) {
      auto it = s.slot_of_physical.find(k.physical_block);
      if (it == s.slot_of_physical.end() || k.kv_head != s.kv_head) return;
      const int slot = it->second;
      if (hcell && hcell->slot == slot && hcell->d == k.d && hcell->t == k.t && (hcell->part == KvPart::k) == isk)
        hover_threads.push_back({e.warp, e.lane});
      if (slot < first || slot >= last || k.d >= H || k.t >= B) return;
      const Rect r = (isk ? l.k_cell(slot, k.d, k.t) : l.v_cell(slot, k.d, k.t)).offset(o.x, o.y);
      dl->AddRectFilled(ImVec2(r.x0, r.y0), ImVec2(r.x1 - (l.cell_w > 3 ? 1 : 0), r.y1 - 1), fill);
    });
  }
  // The selected element.
  if (s.focus.kind == Focus::Kind::element &&
      (s.focus.tensor == trace::Tensor::k_cache || s.focus.tensor == trace::Tensor::v_cache)) {
    const bool isk = s.focus.tensor == trace::Tensor::k_cache;
    const std::int64_t elem = s.focus.byte_begin / c.kv_elem_bytes;
    const auto k = isk ? g.k_coords(elem) : g.v_coords(elem);
    auto it = s.slot_of_physical.find(k.physical_block);
    if (it != s.slot_of_physical.end() && ((isk && l.show_k) || (!isk && l.show_v))) {
      const Rect r = (isk ? l.k_cell(it->second, k.d, k.t) : l.v_cell(it->second, k.d, k.t)).offset(o.x, o.y);
      dl->AddRect(ImVec2(r.x0 - 2, r.y0 - 2), ImVec2(r.x1 + 1, r.y1 + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2);
    }
  }

  if (hcell) {
    const int phys = s.slot_physical[hcell->slot];
    const bool isk = hcell->part == KvPart::k;
    const std::int64_t off = isk ? g.k_offset(phys, s.kv_head, hcell->d, hcell->t) : g.v_offset(phys, s.kv_head, hcell->d, hcell->t);
    ImGui::BeginTooltip();
    ImGui::PushFont(s.fonts.bold);
    ImGui::Text("%s  token %d (t = %d in its block), dim %d", isk ? "K" : "V", hcell->slot * B + hcell->t, hcell->t, hcell->d);
    ImGui::PopFont();
    // The element's index in the layout's own tensor (pa/index/kv_layout.hpp).
    if (c.kv_layout == pa::KvLayout::nhd)
      ImGui::Text("kv_cache[%d][%d][%d][%d][%d]   ([page][K=0 V=1][t][kv head][d]: nhd)", phys, isk ? 0 : 1,
                  hcell->t, s.kv_head, hcell->d);
    else if (c.kv_layout == pa::KvLayout::hnd)
      ImGui::Text("kv_cache[%d][%d][%d][%d][%d]   ([page][K=0 V=1][kv head][t][d]: hnd)", phys, isk ? 0 : 1,
                  s.kv_head, hcell->t, hcell->d);
    else if (isk)
      ImGui::Text("k_cache[%d][%d][%d][%d][%d]   ([block][kv head][d/x][t][d%%x], x = %d)", phys, s.kv_head,
                  hcell->d / c.x, hcell->t, hcell->d % c.x, c.x);
    else
      ImGui::Text("v_cache[%d][%d][%d][%d]   ([block][kv head][d][t])", phys, s.kv_head, hcell->d, hcell->t);
    const std::int64_t byte = off * c.kv_elem_bytes;
    ImGui::Text("element offset %lld, byte offset %lld", static_cast<long long>(off), static_cast<long long>(byte));
    ImGui::Text("32-byte sector %lld, 128-byte line %lld", static_cast<long long>(byte / 32),
                static_cast<long long>(byte / 128));
    if (is_fp8(c.kv_dtype))
      ImGui::Text("a 1-byte %s code: read back as float(code) * %s", kv_dtype_name(c.kv_dtype),
                  isk ? "k_scale" : "v_scale");
    if (hcell->slot * B + hcell->t >= ctx)
      ImGui::TextDisabled("past the context: masked, never reaches the output (a load of its block may still read it)");
    for (auto [w, ln] : hover_threads) ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "touched now by warp %d lane %d", w, ln);
    ImGui::TextDisabled("click: who touches it, and when");
    ImGui::EndTooltip();
    if (clicked) {
      const Focus f = Focus::element(isk ? trace::Tensor::k_cache : trace::Tensor::v_cache, byte, c.kv_elem_bytes);
      s.set_focus(s.focus.kind == Focus::Kind::element && s.focus.byte_begin == f.byte_begin && s.focus.tensor == f.tensor ? Focus{} : f);
    }
  }
  ImGui::EndChild();
}

}  // namespace pa::viewer
