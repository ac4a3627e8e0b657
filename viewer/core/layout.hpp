// Cell layouts of the panels, in panel-local pixels (origin = the panel's
// top-left drawing position), with hit testing. Plain code: the panels draw
// these rectangles, the tests and the screenshot checks compute the same ones.
#pragma once
#include <optional>
#include <utility>

namespace pa::viewer {

struct Rect {
  float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  float w() const { return x1 - x0; }
  float h() const { return y1 - y0; }
  bool contains(float x, float y) const { return x >= x0 && x < x1 && y >= y0 && y < y1; }
  Rect offset(float dx, float dy) const { return {x0 + dx, y0 + dy, x1 + dx, y1 + dy}; }
};

// The thread block: one row per warp, one column per lane; thread groups are
// outlined. A label column on the left, a lane-number header on top.
struct ThreadGridLayout {
  int warps = 4, lanes = 32, group_size = 2;
  float cell = 16, label_w = 56, header_h = 16, row_gap = 3;

  float width() const { return label_w + lanes * cell; }
  float height() const { return header_h + warps * (cell + row_gap); }
  Rect cell_rect(int warp, int lane) const;
  Rect group_rect(int warp, int group) const;  // lanes [group*gs, (group+1)*gs)
  Rect warp_label_rect(int warp) const;
  // (warp, lane) under the point; a click on the warp label gives lane -1.
  std::optional<std::pair<int, int>> hit(float x, float y) const;
  // Largest cell size (clamped to [min_cell, max_cell]) that fits width w.
  static float fit_cell(float w, float label_w, int lanes, float min_cell = 6, float max_cell = 26);
};

// The paged KV cache, one "slot" per logical block of the sequence, in logical
// order, each labelled with its physical block:
//   K tile [head_size/x][block_size][x]: head_size/x chunks side by side, each
//     block_size rows (tokens) x x columns (consecutive elements in memory);
//   V tile [head_size][block_size]: drawn in bands of band_rows rows (a whole
//     number of the rows one LV iteration covers) placed side by side, each band_rows rows (head
//     dims) x block_size columns (tokens, consecutive in memory).
// A token-row cache (nhd, hnd: token_rows) keeps each token's head_size
// elements contiguous in K and in V alike: both tiles are drawn as K's
// picture, one row per token, its 16-byte chunks side by side, so a row is
// one run of addresses (a vLLM K chunk column is one run top to bottom).
enum class KvPart { k, v };
struct KvCell {
  int slot = 0;
  KvPart part = KvPart::k;
  int d = 0, t = 0;  // head dimension, token within the block
  friend bool operator==(const KvCell&, const KvCell&) = default;
};

struct KvPanelLayout {
  int head_size = 128, block_size = 16, x = 8, band_rows = 16, slots = 1;
  bool show_k = true, show_v = true;
  bool token_rows = false;  // V drawn as token rows like K (nhd, hnd)
  float cell_w = 4, cell_h = 5, chunk_gap = 3, label_w = 70, part_gap = 8, slot_gap = 12, title_h = 16;

  int k_chunks() const { return head_size / x; }
  float x_elems_w() const { return x * cell_w + chunk_gap; }  // one K chunk plus its gap
  int v_bands() const { return (head_size + band_rows - 1) / band_rows; }
  float k_width() const { return k_chunks() * x * cell_w + (k_chunks() - 1) * chunk_gap; }
  float v_width() const {
    return token_rows ? k_width() : v_bands() * block_size * cell_w + (v_bands() - 1) * chunk_gap;
  }
  float k_height() const { return block_size * cell_h; }
  float v_height() const { return token_rows ? k_height() : band_rows * cell_h; }
  float slot_height() const;
  float width() const;
  float height() const { return slots * slot_height(); }
  Rect slot_rect(int slot) const;
  Rect k_tile(int slot) const;  // empty rect if K hidden
  Rect v_tile(int slot) const;
  Rect k_chunk_rect(int slot, int chunk) const;
  Rect v_band_rect(int slot, int band) const;  // token rows: V's chunk column `band`
  Rect k_cell(int slot, int d, int t) const;
  Rect v_cell(int slot, int d, int t) const;
  std::optional<KvCell> hit(float px, float py) const;
  // Slots intersecting [y0, y1) (panel-local): [first, last).
  std::pair<int, int> visible_slots(float y0, float y1) const;
  // Largest cell width in [min_w, max_w] that fits the tiles into width w.
  static float fit_cell(float w, const KvPanelLayout& l, float min_w = 2, float max_w = 12);
};

// A shared-memory buffer drawn as 4-byte words in rows of 32 banks
// (bank = word % 32, buffers assumed 128-byte aligned).
struct BankGridLayout {
  int words = 0;
  float cell_w = 14, cell_h = 14, header_h = 14;
  static constexpr int kBanks = 32;
  int rows() const { return (words + kBanks - 1) / kBanks; }
  float width() const { return kBanks * cell_w; }
  float height() const { return header_h + rows() * cell_h; }
  Rect word_rect(int word) const;
  std::optional<int> hit(float x, float y) const;
};

// A row of n cells wrapped at per_row (block table, tokens, pool).
struct StripLayout {
  int n = 0, per_row = 16;
  float cell_w = 30, cell_h = 20, gap = 2;
  int rows() const { return per_row > 0 ? (n + per_row - 1) / per_row : 0; }
  float width() const { return per_row * (cell_w + gap); }
  float height() const { return rows() * (cell_h + gap); }
  Rect cell_rect(int i) const;
  std::optional<int> hit(float x, float y) const;
};

}  // namespace pa::viewer
