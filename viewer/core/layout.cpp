#include "core/layout.hpp"

#include <algorithm>
#include <cmath>

namespace pa::viewer {

Rect ThreadGridLayout::cell_rect(int warp, int lane) const {
  const float x = label_w + lane * cell;
  const float y = header_h + warp * (cell + row_gap);
  return {x, y, x + cell, y + cell};
}

Rect ThreadGridLayout::group_rect(int warp, int group) const {
  const Rect a = cell_rect(warp, group * group_size);
  const Rect b = cell_rect(warp, std::min(lanes, (group + 1) * group_size) - 1);
  return {a.x0, a.y0, b.x1, b.y1};
}

Rect ThreadGridLayout::warp_label_rect(int warp) const {
  const float y = header_h + warp * (cell + row_gap);
  return {0, y, label_w, y + cell};
}

std::optional<std::pair<int, int>> ThreadGridLayout::hit(float x, float y) const {
  if (y < header_h || x < 0) return std::nullopt;
  const int warp = static_cast<int>((y - header_h) / (cell + row_gap));
  if (warp < 0 || warp >= warps) return std::nullopt;
  if (y - header_h - warp * (cell + row_gap) >= cell) return std::nullopt;  // in the row gap
  if (x < label_w) return std::make_pair(warp, -1);
  const int lane = static_cast<int>((x - label_w) / cell);
  if (lane < 0 || lane >= lanes) return std::nullopt;
  return std::make_pair(warp, lane);
}

float ThreadGridLayout::fit_cell(float w, float label_w, int lanes, float min_cell, float max_cell) {
  if (lanes <= 0) return min_cell;
  return std::clamp(std::floor((w - label_w) / lanes), min_cell, max_cell);
}

// ---- KvPanelLayout -----------------------------------------------------------------

float KvPanelLayout::slot_height() const {
  float h = title_h;
  if (show_k) h += k_height();
  if (show_k && show_v) h += part_gap;
  if (show_v) h += v_height();
  return h + slot_gap;
}

float KvPanelLayout::width() const {
  float w = 0;
  if (show_k) w = std::max(w, k_width());
  if (show_v) w = std::max(w, v_width());
  return label_w + w;
}

Rect KvPanelLayout::slot_rect(int slot) const {
  const float y = slot * slot_height();
  return {0, y, width(), y + slot_height() - slot_gap};
}

Rect KvPanelLayout::k_tile(int slot) const {
  if (!show_k) return {};
  const float y = slot * slot_height() + title_h;
  return {label_w, y, label_w + k_width(), y + k_height()};
}

Rect KvPanelLayout::v_tile(int slot) const {
  if (!show_v) return {};
  float y = slot * slot_height() + title_h;
  if (show_k) y += k_height() + part_gap;
  return {label_w, y, label_w + v_width(), y + v_height()};
}

Rect KvPanelLayout::k_chunk_rect(int slot, int chunk) const {
  const Rect t = k_tile(slot);
  const float x = t.x0 + chunk * (x_elems_w()) ;
  return {x, t.y0, x + this->x * cell_w, t.y1};
}

Rect KvPanelLayout::v_band_rect(int slot, int band) const {
  const Rect t = v_tile(slot);
  if (token_rows) {
    const float x0 = t.x0 + band * x_elems_w();
    return {x0, t.y0, x0 + this->x * cell_w, t.y1};
  }
  const float x = t.x0 + band * (block_size * cell_w + chunk_gap);
  const int rows = std::min(band_rows, head_size - band * band_rows);
  return {x, t.y0, x + block_size * cell_w, t.y0 + rows * cell_h};
}

Rect KvPanelLayout::k_cell(int slot, int d, int t) const {
  const Rect tile = k_tile(slot);
  const float x0 = tile.x0 + (d / x) * x_elems_w() + (d % x) * cell_w;
  const float y0 = tile.y0 + t * cell_h;
  return {x0, y0, x0 + cell_w, y0 + cell_h};
}

Rect KvPanelLayout::v_cell(int slot, int d, int t) const {
  const Rect tile = v_tile(slot);
  if (token_rows) {
    const float x0 = tile.x0 + (d / x) * x_elems_w() + (d % x) * cell_w;
    const float y0 = tile.y0 + t * cell_h;
    return {x0, y0, x0 + cell_w, y0 + cell_h};
  }
  const float x0 = tile.x0 + (d / band_rows) * (block_size * cell_w + chunk_gap) + t * cell_w;
  const float y0 = tile.y0 + (d % band_rows) * cell_h;
  return {x0, y0, x0 + cell_w, y0 + cell_h};
}

std::optional<KvCell> KvPanelLayout::hit(float px, float py) const {
  if (slots <= 0 || py < 0) return std::nullopt;
  const int slot = static_cast<int>(py / slot_height());
  if (slot >= slots) return std::nullopt;
  if (show_k) {
    const Rect t = k_tile(slot);
    if (t.contains(px, py)) {
      const float rx = px - t.x0;
      const int chunk = static_cast<int>(rx / x_elems_w());
      const float in = rx - chunk * x_elems_w();
      if (chunk >= k_chunks() || in >= x * cell_w) return std::nullopt;  // in a gap
      const int d = chunk * x + static_cast<int>(in / cell_w);
      const int tok = static_cast<int>((py - t.y0) / cell_h);
      if (tok >= block_size) return std::nullopt;
      return KvCell{slot, KvPart::k, d, tok};
    }
  }
  if (show_v) {
    const Rect t = v_tile(slot);
    if (t.contains(px, py) && token_rows) {
      const float rx = px - t.x0;
      const int chunk = static_cast<int>(rx / x_elems_w());
      const float in = rx - chunk * x_elems_w();
      if (chunk >= k_chunks() || in >= x * cell_w) return std::nullopt;  // in a gap
      const int tok = static_cast<int>((py - t.y0) / cell_h);
      if (tok >= block_size) return std::nullopt;
      return KvCell{slot, KvPart::v, chunk * x + static_cast<int>(in / cell_w), tok};
    }
    if (t.contains(px, py)) {
      const float bw = block_size * cell_w + chunk_gap;
      const float rx = px - t.x0;
      const int band = static_cast<int>(rx / bw);
      const float in = rx - band * bw;
      if (band >= v_bands() || in >= block_size * cell_w) return std::nullopt;
      const int d = band * band_rows + static_cast<int>((py - t.y0) / cell_h);
      const int tok = static_cast<int>(in / cell_w);
      if (d >= head_size || tok >= block_size) return std::nullopt;
      return KvCell{slot, KvPart::v, d, tok};
    }
  }
  return std::nullopt;
}

std::pair<int, int> KvPanelLayout::visible_slots(float y0, float y1) const {
  const float h = slot_height();
  if (slots <= 0 || h <= 0) return {0, 0};
  const int first = std::clamp(static_cast<int>(std::floor(y0 / h)), 0, slots);
  const int last = std::clamp(static_cast<int>(std::ceil(y1 / h)), 0, slots);
  return {first, std::max(first, last)};
}

float KvPanelLayout::fit_cell(float w, const KvPanelLayout& l, float min_w, float max_w) {
  // width = label_w + cols*cell + gaps*chunk_gap, for the wider of K and V.
  const int k_cols = l.head_size, v_cols = l.token_rows ? l.head_size : l.v_bands() * l.block_size;
  const float k_gaps = (l.k_chunks() - 1) * l.chunk_gap,
              v_gaps = (l.token_rows ? l.k_chunks() - 1 : l.v_bands() - 1) * l.chunk_gap;
  float best = max_w;
  if (l.show_k) best = std::min(best, (w - l.label_w - k_gaps) / k_cols);
  if (l.show_v) best = std::min(best, (w - l.label_w - v_gaps) / v_cols);
  return std::clamp(std::floor(best), min_w, max_w);
}

// ---- BankGridLayout ----------------------------------------------------------

Rect BankGridLayout::word_rect(int word) const {
  const float x = (word % kBanks) * cell_w;
  const float y = header_h + (word / kBanks) * cell_h;
  return {x, y, x + cell_w, y + cell_h};
}

std::optional<int> BankGridLayout::hit(float x, float y) const {
  if (x < 0 || y < header_h || x >= width()) return std::nullopt;
  const int col = static_cast<int>(x / cell_w);
  const int row = static_cast<int>((y - header_h) / cell_h);
  const int word = row * kBanks + col;
  if (word >= words) return std::nullopt;
  return word;
}

// ---- StripLayout -------------------------------------------------------------

Rect StripLayout::cell_rect(int i) const {
  const float x = (i % per_row) * (cell_w + gap);
  const float y = (i / per_row) * (cell_h + gap);
  return {x, y, x + cell_w, y + cell_h};
}

std::optional<int> StripLayout::hit(float x, float y) const {
  if (x < 0 || y < 0 || per_row <= 0) return std::nullopt;
  const int c = static_cast<int>(x / (cell_w + gap));
  const int r = static_cast<int>(y / (cell_h + gap));
  if (c >= per_row || x - c * (cell_w + gap) >= cell_w || y - r * (cell_h + gap) >= cell_h) return std::nullopt;
  const int i = r * per_row + c;
  if (i >= n) return std::nullopt;
  return i;
}

}  // namespace pa::viewer
