// V2 partitions and the merge of attention states, as a picture: each
// partition's (max, sum, output) flows into the merged result with its
// weight s_p * exp(m_p - M) / S. Cascade: the shared prefix's state and the
// suffix's state merge the same way (lse form). Across GPUs (context
// parallelism): the sequence's pages as the shard plan (pa/index/shard.hpp)
// deals them to N GPUs, and each GPU's state flowing into the merged one.
// Across levels (multi-level cascade): which requests share which span at
// each level, and the shown request's level states merged in order.
// Values from the CPU reference (pa_reference) for the loaded problem; the
// selected thread block's partition is outlined.
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "app/state.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/index/shard.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/sharded.hpp"

namespace pa::viewer {
namespace {


ImU32 value_colour(double v, double scale) {
  const float t = static_cast<float>(std::clamp(v / std::max(scale, 1e-9), -1.0, 1.0));
  return t >= 0 ? IM_COL32(60 + static_cast<int>(190 * t), 70, 80, 255) : IM_COL32(60, 80, 80 + static_cast<int>(-170 * t), 255);
}

void strip(ImDrawList* dl, ImVec2 o, float w, float h, const double* v, int n, double scale) {
  const float cw = w / n;
  for (int d = 0; d < n; ++d)
    dl->AddRectFilled(ImVec2(o.x + d * cw, o.y), ImVec2(o.x + (d + 1) * cw, o.y + h), value_colour(v[d], scale));
}

// One colour per GPU of a shard picture (up to kMaxShards).
ImU32 gpu_colour(int g) {
  static const ImU32 c[kMaxShards] = {IM_COL32(86, 156, 214, 255), IM_COL32(220, 150, 70, 255),
                                      IM_COL32(110, 190, 110, 255), IM_COL32(200, 100, 160, 255),
                                      IM_COL32(210, 200, 90, 255),  IM_COL32(120, 200, 200, 255),
                                      IM_COL32(170, 130, 220, 255), IM_COL32(200, 110, 100, 255)};
  return c[g % kMaxShards];
}

// One state of a merge drawn as a box at tl (a colour tab, `label`, its
// output strip, or a note that it is the empty state) and its flow into the
// merged box at mt, as thick as its weight w; and the merged box itself.
void merge_input(AppState& s, ImDrawList* dl, ImVec2 tl, ImVec2 mt, float bw, float bh, const char* label,
                 const AttentionState& st, bool empty, double w, ImU32 colour, int H, double scale) {
  const float fs = ImGui::GetFontSize();
  dl->AddRectFilled(tl, ImVec2(tl.x + bw, tl.y + bh), IM_COL32(40, 46, 60, 255), 4);
  dl->AddRectFilled(tl, ImVec2(tl.x + fs * 0.5f, tl.y + bh), colour, 4, ImDrawFlags_RoundCornersLeft);
  dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(tl.x + fs * 0.8f, tl.y + 2), IM_COL32(225, 228, 238, 255),
              label);
  if (!empty && !st.out.empty())
    strip(dl, ImVec2(tl.x + fs * 0.8f, tl.y + fs * 1.3f), bw - fs * 1.1f, fs * 0.9f, st.out.data(), H, scale);
  else
    dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(tl.x + fs * 0.8f, tl.y + fs * 1.3f),
                IM_COL32(150, 155, 170, 255), "empty state (0, -inf): weight 0");
  if (w > 0) {
    const ImVec2 a(tl.x + bw, tl.y + bh * 0.5f), b(mt.x, mt.y + bh * 0.5f);
    dl->AddBezierCubic(a, ImVec2(a.x + fs * 3, a.y), ImVec2(b.x - fs * 3, b.y), b, colour,
                       1.0f + 10.0f * static_cast<float>(w));
  }
}
void merged_box(AppState& s, ImDrawList* dl, ImVec2 mt, float bw, float bh, const char* label,
                const AttentionState& merged, int H, double scale) {
  const float fs = ImGui::GetFontSize();
  dl->AddRectFilled(mt, ImVec2(mt.x + bw, mt.y + bh), IM_COL32(45, 62, 52, 255), 4);
  dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(mt.x + 5, mt.y + 2), IM_COL32(225, 238, 228, 255), label);
  if (!merged.out.empty()) strip(dl, ImVec2(mt.x + 5, mt.y + fs * 1.3f), bw - 10, fs * 0.9f, merged.out.data(), H, scale);
}

// Context parallelism for (seq, head): which GPU holds which page, and the
// GPUs' states merged. `scale` is the output strips' colour scale.
void draw_shards(AppState& s, const RefValues& cache, int seq, int head, double scale) {
  ImGui::Separator();
  ImGui::TextWrapped("Across GPUs (context parallelism, lesson 7): the sequence's pages dealt to several GPUs. Each "
                     "GPU runs stage 8 over its own pages and writes the state (o, lse) of its tokens; NCCL brings "
                     "the states together and they merge like any two, GPU by GPU, each weighted e^(lse_g - lse).");
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("GPUs");
  for (int i = 0; i < 3; ++i) {
    ImGui::SameLine();
    char label[16];
    std::snprintf(label, sizeof label, "%d##gpus", RefValues::kShardCounts[i]);
    ImGui::RadioButton(label, &s.shard_count, i);
  }
  ImGui::SameLine(0, ImGui::GetFontSize() * 1.5f);
  ImGui::TextUnformatted("pages");
  ImGui::SameLine();
  ImGui::RadioButton("contiguous", &s.shard_policy, static_cast<int>(ShardPolicy::contiguous));
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("GPU g holds one run of consecutive blocks (the runs differ by at most one block)");
  ImGui::SameLine();
  ImGui::RadioButton("round robin", &s.shard_policy, static_cast<int>(ShardPolicy::round_robin));
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("block b on GPU b %% N: every GPU gets old and new tokens alike");
  if (!cache.shard_error.empty()) {
    ImGui::TextDisabled("%s", cache.shard_error.c_str());
    return;
  }
  const int n = RefValues::kShardCounts[s.shard_count];
  const auto policy = static_cast<ShardPolicy>(s.shard_policy);
  const ShardedRef& sr = cache.sharded[s.shard_policy][s.shard_count];
  const ShardPlan plan = make_shard_plan(policy, n, s.spec.block_size, s.spec.context_lens[seq]);
  const std::size_t row = static_cast<std::size_t>(seq) * s.spec.num_heads + head;
  if (sr.shards.size() != static_cast<std::size_t>(n) || row >= sr.merged.size()) return;

  s.drawn.shard_gpus = n;
  s.drawn.shard_policy = s.shard_policy;
  s.drawn.shard_blocks = plan.num_blocks();
  s.drawn.shard_weights.clear();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize(), W = ImGui::GetContentRegionAvail().x;
  // The page map: logical block b of the sequence, coloured by its GPU.
  const int nb = plan.num_blocks();
  const float cell = std::clamp(W / std::max(nb, 1), 2.0f, fs * 1.2f);
  const int per_row = std::max(1, static_cast<int>(W / cell));
  const int rows = (nb + per_row - 1) / per_row;
  ImGui::TextDisabled("sequence %d: %d tokens in %d blocks of %d", seq, plan.context_len, nb, plan.block_size);
  const ImVec2 m0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##pagemap", ImVec2(W, std::max(rows, 1) * cell));
  const bool map_hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (int b = 0; b < nb; ++b) {
    const ImVec2 tl(m0.x + (b % per_row) * cell, m0.y + (b / per_row) * cell);
    const ImVec2 br(tl.x + cell - (cell > 4 ? 1 : 0), tl.y + cell - (cell > 4 ? 1 : 0));
    dl->AddRectFilled(tl, br, gpu_colour(plan.shard_of(b)));
    if (map_hovered && mouse.x >= tl.x && mouse.x < tl.x + cell && mouse.y >= tl.y && mouse.y < tl.y + cell)
      ImGui::SetTooltip("logical block %d: tokens %d-%d\nGPU %d, its local block %d", b, b * plan.block_size,
                        b * plan.block_size + plan.block_tokens(b) - 1, plan.shard_of(b), plan.local_of(b));
  }
  // Each GPU's state, flowing into the merged state with its weight.
  const float bw = std::min(W * 0.42f, fs * 14), bh = fs * 2.6f, gap = 6;
  const ImVec2 c0 = ImGui::GetCursorScreenPos();
  const float total_h = n * (bh + gap);
  ImGui::Dummy(ImVec2(W, total_h));
  const AttentionState& merged = sr.merged[row];
  const ImVec2 mt(c0.x + W - bw, c0.y + total_h * 0.5f - bh * 0.5f);
  const int H = s.spec.head_size;
  for (int g = 0; g < n; ++g) {
    const AttentionState& st = sr.shards[g][row];
    const ImVec2 tl(c0.x, c0.y + g * (bh + gap));
    const bool empty = !std::isfinite(st.lse);
    const double w = empty ? 0.0 : std::exp(st.lse - merged.lse);
    s.drawn.shard_weights.push_back(w);
    char t[128];
    if (empty)
      std::snprintf(t, sizeof t, "GPU %d: none of its tokens", g);
    else
      std::snprintf(t, sizeof t, "GPU %d: %d tokens  lse %.3f  w %.2f", g, plan.shard_tokens(g), st.lse, w);
    merge_input(s, dl, tl, mt, bw, bh, t, st, empty, w, gpu_colour(g), H, scale);
  }
  char t[96];
  std::snprintf(t, sizeof t, "merged over %d GPUs  lse %.3f", n, merged.lse);
  merged_box(s, dl, mt, bw, bh, t, merged, H, scale);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("values from the CPU reference of the sharded computation (pa/reference/sharded.hpp); on GPUs: "
                     "pa-lab run --stage optimized --devices N");
  ImGui::PopStyleColor();
}

// A colour per level group (groups of one level told apart; empty groups grey).
ImU32 group_colour(int g) {
  static const ImU32 c[6] = {IM_COL32(86, 156, 214, 255), IM_COL32(220, 150, 70, 255), IM_COL32(110, 190, 110, 255),
                             IM_COL32(200, 100, 160, 255), IM_COL32(210, 200, 90, 255), IM_COL32(120, 200, 200, 255)};
  return c[g % 6];
}

// The multi-level cascade over the problem's sequences as requests: who
// shares which span at each level (a row of cells per level, a cell per
// request, coloured by its group), and the shown request's state at every
// level flowing into the merged one with its weight e^(lse_l - lse).
void draw_levels(AppState& s, const RefValues& cache, int request, int head, double scale) {
  ImGui::Separator();
  ImGui::TextWrapped("Across levels (multi-level cascade, lesson 9): requests share spans at several levels, a "
                     "system prompt for all, a block per group, then each request's own tokens. The GPU attends "
                     "each group's span once for all its requests (the prefix kernel), the last level per request "
                     "(stage 8), and folds every request's level states in order.");
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("levels");
  ImGui::SameLine();
  if (s.levels_edit[0] == '\0') std::snprintf(s.levels_edit, sizeof s.levels_edit, "%s", cache.ml_text.c_str());
  ImGui::SetNextItemWidth(ImGui::GetFontSize() * 16);
  ImGui::InputText("##levels", s.levels_edit, sizeof s.levels_edit);
  if (ImGui::IsItemDeactivatedAfterEdit()) s.levels_text = s.levels_edit;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("G:T per level: groups of G consecutive requests (G divides the %d sequences), each group "
                      "sharing T tokens; Enter applies. pa-lab run --stage cascade_merge --levels takes the same.",
                      s.spec.num_seqs());
  if (!cache.ml_error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.55f, 0.45f, 1), "%s", cache.ml_error.c_str());
    return;
  }
  const MultiLevelCascade& c = cache.ml_cascade;
  const MultiLevelRef& ml = cache.ml;
  if (c.num_requests < 1 || ml.merged.empty()) return;
  request = std::clamp(request, 0, c.num_requests - 1);
  const int H = s.spec.head_size, heads = s.spec.num_heads;
  const std::size_t row = static_cast<std::size_t>(request) * heads + std::clamp(head, 0, heads - 1);
  s.drawn.level_request = request;
  s.drawn.level_weights.clear();

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize(), W = ImGui::GetContentRegionAvail().x;
  // Membership: level rows x request cells.
  const float label_w = fs * 5.5f;
  const float cell = std::clamp((W - label_w) / c.num_requests, 3.0f, fs * 1.6f);
  const ImVec2 g0 = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("##levelmap", ImVec2(W, c.num_levels() * (cell + 2)));
  const bool hovered = ImGui::IsItemHovered();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  for (int l = 0; l < c.num_levels(); ++l) {
    const float y = g0.y + l * (cell + 2);
    char t[32];
    std::snprintf(t, sizeof t, "level %d", l);
    dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(g0.x, y + (cell - s.fonts.small->FontSize) * 0.5f),
                IM_COL32(200, 204, 215, 255), t);
    for (int r = 0; r < c.num_requests; ++r) {
      const int g = c.levels[l].group_of[r], tokens = c.tokens(l, r);
      const ImVec2 tl(g0.x + label_w + r * cell, y), br(tl.x + cell - 1, y + cell);
      dl->AddRectFilled(tl, br, tokens > 0 ? group_colour(g) : IM_COL32(70, 74, 84, 255));
      if (r == request) dl->AddRect(ImVec2(tl.x - 1, tl.y - 1), ImVec2(br.x + 1, br.y + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2);
      if (hovered && mouse.x >= tl.x && mouse.x < tl.x + cell && mouse.y >= tl.y && mouse.y < tl.y + cell) {
        int members = 0;
        for (int q : c.levels[l].group_of) members += q == g ? 1 : 0;
        ImGui::SetTooltip("level %d, request %d: group %d, read by %d request%s\n%d tokens in %d pages%s", l, r, g,
                          members, members == 1 ? "" : "s", tokens, c.table(l).num_pages(g),
                          tokens > 0 && tokens % c.page_size != 0 ? " (the last one partly filled)" : "");
      }
    }
  }
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("a cell per request (column %d, outlined: the shown sequence), coloured by its group; grey: "
                     "no tokens there", request);
  ImGui::PopStyleColor();
  // The request's states, level by level, into the merged state.
  const float bw = std::min(W * 0.42f, fs * 15), bh = fs * 2.6f, gap = 6;
  const ImVec2 c0 = ImGui::GetCursorScreenPos();
  const float total_h = c.num_levels() * (bh + gap);
  ImGui::Dummy(ImVec2(W, total_h));
  const AttentionState& merged = ml.merged[row];
  const ImVec2 mt(c0.x + W - bw, c0.y + total_h * 0.5f - bh * 0.5f);
  for (int l = 0; l < c.num_levels(); ++l) {
    const AttentionState& st = ml.levels[l][row];
    const int g = c.levels[l].group_of[request], tokens = c.tokens(l, request);
    int members = 0;
    for (int q : c.levels[l].group_of) members += q == g ? 1 : 0;
    const ImVec2 tl(c0.x, c0.y + l * (bh + gap));
    const bool empty = st.empty();
    const double w = empty ? 0.0 : std::exp(st.lse - merged.lse);
    s.drawn.level_weights.push_back(w);
    char t[160];
    if (empty)
      std::snprintf(t, sizeof t, "level %d: group %d, no tokens", l, g);
    else
      std::snprintf(t, sizeof t, "level %d: %d tokens, %d reader%s  lse %.3f  w %.2f", l, tokens, members,
                    members == 1 ? "" : "s", st.lse, w);
    merge_input(s, dl, tl, mt, bw, bh, t, st, empty, w, empty ? IM_COL32(70, 74, 84, 255) : group_colour(g), H, scale);
  }
  char t[96];
  std::snprintf(t, sizeof t, "request %d: %d tokens  lse %.3f", request, c.context_len(request), merged.lse);
  merged_box(s, dl, mt, bw, bh, t, merged, H, scale);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
  ImGui::TextWrapped("values from the CPU reference (ref_multilevel_cascade: pages of their own, the problem's "
                     "heads and dtype, no ALiBi); on a GPU: pa-lab run --stage cascade_merge --seqs %d --levels %s",
                     c.num_requests, cache.ml_text.c_str());
  ImGui::PopStyleColor();
}

}  // namespace

void draw_partitions_panel(AppState& s) {
  // Works without a trace too (a stage without a host model): the
  // reference computes the states of (seq 0, head 0).
  const BlockKey key = s.index.num_blocks() > 0 ? s.index.block(s.block) : BlockKey{};
  if (s.spec.num_seqs() == 0) return;
  const RefValues* ref = reference_values(s);
  if (!ref) {
    ImGui::TextDisabled("computing the CPU reference for this problem (%.0f%%)...", s.ref_task.progress() * 100.0f);
    return;
  }
  const RefValues& cache = *ref;
  if (!cache.error.empty()) {
    ImGui::TextColored(ImVec4(1, 0.55f, 0.45f, 1), "%s", cache.error.c_str());
    return;
  }
  const V2Ref& v2 = cache.v2;
  const int seq = key.seq, head = key.head, H = s.spec.head_size;
  // What the current replay step does to the states (stage 6's partition
  // stores and reduce, stage 7's merge, stage 8's split workspace): lit below.
  const StateFlow flow = state_flow(s.events, s.current_events(), v2.geom, seq, head);
  // The traced block's own (max, sum) as its events recorded them, up to this step.
  float trace_m = NAN, trace_s = NAN;
  for (const AppState::Stat& st : s.stats) {
    if (st.step > s.replay.current()) continue;
    if (st.tensor == trace::Tensor::part_max) trace_m = st.value;
    if (st.tensor == trace::Tensor::part_sum) trace_s = st.value;
  }
  if (flow.any()) {
    std::string what;
    int nr = 0, nw = 0;
    for (char c : flow.part_read) nr += c;
    for (char c : flow.part_written) nw += c;
    if (nw) what += "writes the state (max, sum, out) of " + std::to_string(nw) + " partition" + (nw > 1 ? "s" : "") + "; ";
    if (nr) what += "reads the states of " + std::to_string(nr) + " partition" + (nr > 1 ? "s" : "") + "; ";
    if (flow.states_read) what += "reads attention states (" + std::to_string(flow.states_read) + " accesses); ";
    if (flow.states_written) what += "writes attention states (" + std::to_string(flow.states_written) + " accesses); ";
    if (flow.counter_atomics) what += "counts its arrival (atomic); ";
    if (flow.output_written) what += "writes the merged output; ";
    ImGui::TextColored(ImVec4(1, 0.85f, 0.4f, 1), "This step %s", what.c_str());
  }
  const int ctx = s.spec.context_lens[seq];
  const int P = num_partitions(ctx, v2.partition_size);
  ImGui::TextWrapped("V2 splits the context into partitions of %d tokens; each thread block computes its partition's "
                     "max m, exp-sum s and normalized output o. The reduce kernel merges them: M = max m, "
                     "S = sum s*exp(m-M), out = sum o * s*exp(m-M)/S.",
                     v2.partition_size);
  double M = -INFINITY;
  for (int p = 0; p < P; ++p) M = std::max(M, v2.part_max[v2.geom.stat_offset(seq, head, p)]);
  double S = 0;
  for (int p = 0; p < P; ++p) {
    const auto o = v2.geom.stat_offset(seq, head, p);
    S += v2.part_sum[o] * std::exp(v2.part_max[o] - M);
  }
  double scale = 1e-6;
  for (int d = 0; d < H; ++d) scale = std::max(scale, std::abs(v2.out[(static_cast<std::int64_t>(seq) * s.spec.num_heads + head) * H + d]));

  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float fs = ImGui::GetFontSize();
  const float W = ImGui::GetContentRegionAvail().x;
  const int shown = std::min(P, 8);
  const float box_w = std::min(W * 0.42f, fs * 14), box_h = fs * 3.4f;
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float total_h = shown * (box_h + 6) + fs;
  ImGui::Dummy(ImVec2(W, total_h));
  const ImVec2 merged_tl(o.x + W - box_w, o.y + total_h * 0.5f - box_h * 0.8f);
  for (int p = 0; p < shown; ++p) {
    const auto so = v2.geom.stat_offset(seq, head, p);
    const double m = v2.part_max[so], sm = v2.part_sum[so];
    const double w = S > 0 ? sm * std::exp(m - M) / S : 0;
    const auto pr = partition_range(ctx, s.spec.block_size, v2.partition_size, p);
    const ImVec2 tl(o.x, o.y + p * (box_h + 6));
    const bool mine = s.stage == trace::Stage::v2_partition && key.partition == p;
    const bool written = p < static_cast<int>(flow.part_written.size()) && flow.part_written[p];
    const bool read = p < static_cast<int>(flow.part_read.size()) && flow.part_read[p];
    dl->AddRectFilled(tl, ImVec2(tl.x + box_w, tl.y + box_h), written ? IM_COL32(90, 70, 40, 255) : IM_COL32(40, 46, 60, 255), 4);
    if (mine) dl->AddRect(tl, ImVec2(tl.x + box_w, tl.y + box_h), IM_COL32(255, 200, 90, 255), 4, 0, 2);
    if (written || read)
      dl->AddRect(ImVec2(tl.x - 2, tl.y - 2), ImVec2(tl.x + box_w + 2, tl.y + box_h + 2), IM_COL32(255, 255, 255, 255), 4, 0, 2);
    char buf[160];
    std::snprintf(buf, sizeof buf, "partition %d: tokens %d-%d", p, pr.token_begin, pr.token_end - 1);
    dl->AddText(ImVec2(tl.x + 5, tl.y + 2), IM_COL32(225, 228, 238, 255), buf);
    if (mine && std::isfinite(trace_m) && std::isfinite(trace_s))
      std::snprintf(buf, sizeof buf, "m %.3f  s %.3f  w %.2f (traced)", trace_m, trace_s, w);
    else
      std::snprintf(buf, sizeof buf, "m %.3f  s %.3f  w %.2f", m, sm, w);
    dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(tl.x + 5, tl.y + fs * 1.2f), IM_COL32(190, 195, 210, 255), buf);
    strip(dl, ImVec2(tl.x + 5, tl.y + fs * 2.3f), box_w - 10, fs * 0.8f, &v2.part_out[v2.geom.out_offset(seq, head, p, 0)], H, scale);
    // The flow: thickness = weight.
    const ImVec2 a(tl.x + box_w, tl.y + box_h * 0.5f), b(merged_tl.x, merged_tl.y + box_h * 0.8f);
    // A flow the current step reads (the reduce kernel's loads) is drawn bright.
    dl->AddBezierCubic(a, ImVec2(a.x + fs * 3, a.y), ImVec2(b.x - fs * 3, b.y), b,
                       read ? IM_COL32(255, 250, 220, 255) : IM_COL32(240, 170, 70, 200),
                       (1.0f + 10.0f * static_cast<float>(w)) * (read ? 1.5f : 1.0f));
  }
  dl->AddRectFilled(merged_tl, ImVec2(merged_tl.x + box_w, merged_tl.y + box_h * 1.6f), IM_COL32(45, 62, 52, 255), 4);
  if (flow.output_written && s.stage == trace::Stage::v2_partition)
    dl->AddRect(ImVec2(merged_tl.x - 2, merged_tl.y - 2), ImVec2(merged_tl.x + box_w + 2, merged_tl.y + box_h * 1.6f + 2),
                IM_COL32(255, 255, 255, 255), 4, 0, 2);
  char buf[160];
  dl->AddText(ImVec2(merged_tl.x + 5, merged_tl.y + 2), IM_COL32(225, 238, 228, 255), "merged (reduce kernel)");
  std::snprintf(buf, sizeof buf, "M %.3f  S %.3f", M, S);
  dl->AddText(s.fonts.small, s.fonts.small->FontSize, ImVec2(merged_tl.x + 5, merged_tl.y + fs * 1.2f), IM_COL32(200, 215, 205, 255), buf);
  strip(dl, ImVec2(merged_tl.x + 5, merged_tl.y + fs * 2.4f), box_w - 10, fs * 1.2f,
        &v2.out[(static_cast<std::int64_t>(seq) * s.spec.num_heads + head) * H], H, scale);
  if (P > shown) ImGui::TextDisabled("(%d more partitions not drawn)", P - shown);
  ImGui::TextDisabled("strips: output over the %d head dims (red +, blue -)", H);

  if (cache.have_cascade) {
    ImGui::Separator();
    const std::size_t i = static_cast<std::size_t>(seq) * s.spec.num_heads + head;
    const auto& pre = cache.cascade.prefix[i];
    const auto& suf = cache.cascade.suffix[i];
    const auto& mer = cache.cascade.merged[i];
    ImGui::TextWrapped("Cascade: the shared prefix (%d tokens, same physical blocks for every sequence) and this "
                       "sequence's suffix are two attention states (o, lse); merged: lse = log(e^lse1 + e^lse2), "
                       "o = o1 * e^(lse1-lse) + o2 * e^(lse2-lse).",
                       s.spec.shared_prefix_len);
    const ImVec2 c0 = ImGui::GetCursorScreenPos();
    const float bw = std::min(W * 0.42f, fs * 14), bh = fs * 2.6f;
    ImGui::Dummy(ImVec2(W, bh * 2 + 12));
    auto state_box = [&](ImVec2 tl, const char* name, const AttentionState& st, ImU32 bg) {
      dl->AddRectFilled(tl, ImVec2(tl.x + bw, tl.y + bh), bg, 4);
      char t[96];
      std::snprintf(t, sizeof t, "%s  lse %.3f", name, st.lse);
      dl->AddText(ImVec2(tl.x + 5, tl.y + 2), IM_COL32(225, 228, 238, 255), t);
      if (!st.out.empty()) strip(dl, ImVec2(tl.x + 5, tl.y + fs * 1.3f), bw - 10, fs * 0.9f, st.out.data(), H, scale);
    };
    state_box(c0, "prefix", pre, IM_COL32(40, 46, 60, 255));
    state_box(ImVec2(c0.x, c0.y + bh + 12), "suffix", suf, IM_COL32(40, 46, 60, 255));
    const ImVec2 mt(c0.x + W - bw, c0.y + bh * 0.5f + 6);
    state_box(mt, "merged", mer, IM_COL32(45, 62, 52, 255));
    // Stage 7's merge kernel: a step that reads the states lights both flows,
    // one that writes the merged state or output outlines the result.
    const bool merging = s.stage == trace::Stage::cascade_merge || s.stage == trace::Stage::optimized;
    const bool reading = merging && flow.states_read > 0;
    const bool split_known = flow.prefix_read + flow.suffix_read > 0;
    if (merging && (flow.states_written > 0 || flow.output_written))
      dl->AddRect(ImVec2(mt.x - 2, mt.y - 2), ImVec2(mt.x + bw + 2, mt.y + bh + 2), IM_COL32(255, 255, 255, 255), 4, 0, 2);
    for (int r = 0; r < 2; ++r) {
      const double w = std::exp((r == 0 ? pre.lse : suf.lse) - mer.lse);
      const ImVec2 a(c0.x + bw, c0.y + r * (bh + 12) + bh * 0.5f), b(mt.x, mt.y + bh * 0.5f);
      const bool lit = reading && (!split_known || (r == 0 ? flow.prefix_read : flow.suffix_read) > 0);
      dl->AddBezierCubic(a, ImVec2(a.x + fs * 3, a.y), ImVec2(b.x - fs * 3, b.y), b,
                         lit ? IM_COL32(255, 250, 220, 255) : IM_COL32(240, 170, 70, 200),
                         (1.0f + 10.0f * static_cast<float>(std::isfinite(w) ? w : 0)) * (lit ? 1.5f : 1.0f));
    }
  } else {
    ImGui::TextDisabled("cascade: set a shared prefix (Problem tab) to see the prefix/suffix merge");
  }
  draw_shards(s, cache, seq, head, scale);
  draw_levels(s, cache, seq, head, scale);
}

}  // namespace pa::viewer
