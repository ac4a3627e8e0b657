// The problem: dtype, head size, block size, context lengths, heads and KV
// heads, partition size, cascade prefix, seed. Any change regenerates the
// trace from the host model at once.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "app/state.hpp"
#include "core/names.hpp"
#include "pa/index/config.hpp"

namespace pa::viewer {

void draw_config_panel(AppState& s) {
  ProblemSpec sp = edited_spec(s);
  bool changed = false;
  const float w = ImGui::GetFontSize() * 8;
  ImGui::TextWrapped("The host model re-creates every event of the kernel on this CPU from the same index headers "
                     "the kernel uses. Change anything: the trace is rebuilt at once.");
  if (!s.trace_path.empty())
    ImGui::TextColored(ImVec4(1, 0.8f, 0.4f, 1), "Showing the trace file %s; a change here switches to the host model.",
                       s.trace_path.c_str());
  ImGui::Spacing();

  int dt = static_cast<int>(sp.dtype);
  const char* dts[] = {dtype_name(DType::f32), dtype_name(DType::f16), dtype_name(DType::bf16)};
  ImGui::SetNextItemWidth(w);
  if (ImGui::Combo("dtype", &dt, dts, 3)) { sp.dtype = static_cast<DType>(dt); changed = true; }

  // Choices from the supported-configuration registry (pa/index/config.hpp).
  auto int_combo = [&](const char* label, int& v, const auto& opts) {
    ImGui::SetNextItemWidth(w);
    if (ImGui::BeginCombo(label, std::to_string(v).c_str())) {
      for (int o : opts)
        if (ImGui::Selectable(std::to_string(o).c_str(), o == v)) { v = o; changed = true; }
      ImGui::EndCombo();
    }
  };
  int_combo("head size", sp.head_size, kSupportedHeadSizes);
  int_combo("block size", sp.block_size, kSupportedBlockSizes);
  ImGui::SetNextItemWidth(w);
  ImGui::BeginDisabled();
  ImGui::InputInt("threads", &sp.num_threads, 0);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextDisabled("(128 supported)");

  static char ctx_buf[256] = {};
  static std::string ctx_shown;
  std::ostringstream cs;
  for (std::size_t i = 0; i < sp.context_lens.size(); ++i) cs << (i ? ", " : "") << sp.context_lens[i];
  if (cs.str() != ctx_shown && !ImGui::IsAnyItemActive()) {
    ctx_shown = cs.str();
    std::snprintf(ctx_buf, sizeof ctx_buf, "%s", ctx_shown.c_str());
  }
  ImGui::SetNextItemWidth(w * 1.5f);
  if (ImGui::InputText("context lengths", ctx_buf, sizeof ctx_buf, ImGuiInputTextFlags_EnterReturnsTrue) ||
      ImGui::IsItemDeactivatedAfterEdit()) {
    std::vector<int> lens;
    std::string tok;
    std::istringstream in(ctx_buf);
    bool ok = true;
    while (std::getline(in, tok, ',')) {
      try {
        const int v = std::stoi(tok);
        lens.push_back(v);
      } catch (...) {
        ok = false;
      }
    }
    if (ok && !lens.empty() && lens != sp.context_lens) { sp.context_lens = lens; changed = true; }
    else if (!ok) s.load_error = std::string("context lengths: '") + ctx_buf + "' is not a comma-separated list of integers";
  }
  ImGui::SetNextItemWidth(w);
  if (ImGui::InputInt("query heads", &sp.num_heads)) changed = true;
  ImGui::SetNextItemWidth(w);
  if (ImGui::InputInt("KV heads", &sp.num_kv_heads)) changed = true;
  ImGui::SetNextItemWidth(w);
  if (ImGui::InputInt("partition size", &sp.partition_size, sp.block_size)) changed = true;
  ImGui::SetNextItemWidth(w);
  if (ImGui::InputInt("shared prefix", &sp.shared_prefix_len, sp.block_size)) changed = true;
  if (ImGui::Checkbox("ALiBi", &sp.alibi)) changed = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Attention with linear biases: each query head has a slope, and every logit gets\n"
                      "slope * (token - context_len + 1) added (0 for the last token). The trace adds each\n"
                      "thread's slope load (step alibi_bias); the logits it shows include the bias.");
  int seed = static_cast<int>(sp.seed);
  ImGui::SetNextItemWidth(w);
  if (ImGui::InputInt("seed", &seed)) { sp.seed = static_cast<std::uint64_t>(std::max(0, seed)); changed = true; }

  ImGui::Spacing();
  // The same fields, in the same order, as --block SEQ,HEAD,BLOCK.
  ImGui::TextUnformatted("thread block to trace and show (--block SEQ,HEAD,BLOCK):");
  int row[2] = {s.sel_seq, s.sel_head};
  ImGui::SetNextItemWidth(w * 1.2f);
  if (ImGui::InputInt2("seq, head", row)) {
    s.sel_seq = std::max(0, row[0]);
    s.sel_head = std::max(0, row[1]);
    changed = true;
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("blockIdx.y = sequence, blockIdx.x = query head. With GQA, heads %d..%d share KV head 0.", 0,
                      sp.num_kv_heads > 0 ? sp.num_heads / sp.num_kv_heads - 1 : 0);
  // BLOCK: a kind (the kernels of stages 6-8) and, for partitions and prefix
  // chunks, a number.
  static const char* kinds[] = {"partition / split", "reduce", "prefix_reduce", "merge", "prefix chunk"};
  int kind = s.sel_label >= 0 ? 0 : s.sel_label == kReduceBlock ? 1 : s.sel_label == kPrefixReduceBlock ? 2
             : s.sel_label == kMergeBlock ? 3 : 4;
  int number = kind == 0 ? s.sel_label : kind == 4 ? s.sel_label - kPrefixBlockBase : 0;
  ImGui::SetNextItemWidth(w * 1.2f);
  bool block_changed = ImGui::Combo("block", &kind, kinds, 5);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("partition: blockIdx.z of the V2 partition kernel (stage 6, the cascade's suffix); split: "
                      "stage 8's split-KV CTA. reduce, prefix_reduce, merge, prefix chunk: the other kernels of "
                      "stages 6 and 7, traced with their row (prefix chunk C with partition C).");
  if (kind == 0 || kind == 4) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(w * 0.8f);
    block_changed |= ImGui::InputInt("##blocknumber", &number);
  }
  if (block_changed) {
    number = std::max(0, number);
    const int labels[] = {number, kReduceBlock, kPrefixReduceBlock, kMergeBlock, kPrefixBlockBase + number};
    s.sel_label = labels[kind];
    s.block_requested = true;
    changed = true;
  }
  int gran = s.granularity == Granularity::step ? 1 : 0;
  ImGui::TextUnformatted("one replay step =");
  ImGui::RadioButton("one warp instruction", &gran, 0);
  ImGui::SameLine();
  ImGui::RadioButton("a whole step/iteration", &gran, 1);
  const Granularity g = gran ? Granularity::step : Granularity::instruction;
  if (g != s.granularity) {
    s.granularity = g;
    s.replay.jump(0);
    if (s.loader.running() && s.loading.kind != LoadRequest::Kind::reindex) {
      LoadRequest r = s.loading;  // the load under way, at the new granularity
      r.granularity = g;
      start_load(s, std::move(r));
    } else {
      rebuild_index(s);
    }
  }

  if (changed) {
    s.replay.jump(0);
    request_model(s, sp, s.stage, 0);
  }
  ImGui::Separator();
  const ConfigInfo& c = s.cfg;
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted("Derived (KernelConfig)");
  ImGui::PopFont();
  if (ImGui::BeginTable("##derived", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    auto row = [](const char* k, int v, const char* why) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", why);
      ImGui::TableNextColumn();
      ImGui::Text("%d", v);
    };
    row("x (elements per 16 B)", c.x, "innermost dimension of the K cache layout");
    row("thread group size", c.thread_group_size, "threads per token in QK: 32 / block size");
    row("K vec size", c.vec_size, "elements one thread loads at once: 16 B / (group size * elem bytes)");
    row("K vecs per thread", c.num_vecs_per_thread, "head size / (group size * vec size)");
    row("V vec size", c.v_vec_size, "elements per V load: 16 B / elem bytes (at most block size)");
    row("V rows per iteration", c.num_rows_per_iter, "32 / (block size / V vec size)");
    row("accumulator rows per thread", c.num_rows_per_thread, "head size / rows per iteration");
    ImGui::EndTable();
  }
}

}  // namespace pa::viewer
