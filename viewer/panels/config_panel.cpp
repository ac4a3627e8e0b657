// The problem: dtype, head size, block size, context lengths, heads and KV
// heads, partition size, cascade prefix, ALiBi, the KV cache's dtype and
// layout, seed.
// Any change regenerates the trace from the host model at once.
#include <cmath>
#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "app/state.hpp"
#include "core/names.hpp"
#include "pa/core/parse_number.hpp"
#include "pa/index/config.hpp"

namespace pa::viewer {
namespace {

// Why the host model cannot trace the Problem tab's stage over this problem
// with one field of its cache (`field`, ProblemSpec's name) set by `set`: the
// problem's own rule for that field (fp8 needs fp16 or bf16 queries; nhd and
// hnd a 16-bit cache: ProblemSpec::validate), else the stage's limits
// (kv_cache_refusal: stage 7 takes no fp8, stages 1-7 vLLM's layout only).
// Empty: it can.
template <class Set>
std::string cache_choice_refusal(const AppState& s, ProblemSpec sp, const char* field, Set set) {
  set(sp);
  try {
    sp.validate_shape();
  } catch (const ProblemError& e) {
    if (e.field == field) return e.what();
  }
  return kv_cache_refusal(sp, s.problem_stage);
}

// A combo over one field of the cache (its dtype, its layout): every value,
// the ones the stage cannot trace disabled with the reason as a tooltip.
template <class E, std::size_t N, class Refusal>
void cache_choice_combo(const char* label, E& value, const E (&all)[N], const char* (*name)(E), Refusal refusal,
                        bool& changed) {
  if (!ImGui::BeginCombo(label, name(value))) return;
  for (E e : all) {
    const std::string why = refusal(e);
    ImGui::BeginDisabled(!why.empty());
    if (ImGui::Selectable(name(e), e == value) && e != value) {
      value = e;
      changed = true;
    }
    ImGui::EndDisabled();
    if (!why.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", why.c_str());
  }
  ImGui::EndCombo();
}

// The KV cache's element type, what fp8 changes, and the scales the problem
// resolved. A choice the stage cannot trace is offered disabled, with the
// reason.
void draw_kv_cache_choice(AppState& s, ProblemSpec& sp, float w, bool& changed) {
  ImGui::SetNextItemWidth(w);
  cache_choice_combo("KV cache", sp.kv_dtype, kAllKvDTypes, kv_dtype_name, [&](KvDType k) {
    if (!is_fp8(k)) return std::string();
    return cache_choice_refusal(s, sp, "kv_dtype", [k](ProblemSpec& p) { p.kv_dtype = k; });
  }, changed);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("The element type K and V are stored in (vLLM's kv_cache_dtype). auto: the query's dtype.\n"
                      "fp8_e4m3 / fp8_e5m2: one byte per element, so a 16-byte vector holds 16 elements\n"
                      "and the K layout's x is 16 (8 for fp16). A K vec of a 2-thread group is 8 bytes = 8\n"
                      "elements; a V vec is 16 elements. One scale per tensor (K and V): each load is\n"
                      "dequantized right after it (step dequant: code to float, times the scale).\n"
                      "Needs fp16 or bf16 queries. Stage 7 (cascade_merge) refuses an fp8 cache;\n"
                      "stage 8 (optimized) takes it with block size 16 or 32.");
  // The stage cannot trace the problem's cache (a lesson opened under an fp8
  // problem): say why here too, beside the toolbar's error.
  if (is_fp8(sp.kv_dtype)) {
    if (const std::string why = kv_cache_refusal(sp, s.problem_stage); !why.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
      ImGui::TextWrapped("%s", why.c_str());
      ImGui::PopStyleColor();
    }
    // The scales: as given, or chosen from the data when the problem is built
    // (the reference's problem, computed in the background).
    const RefValues* ref = sp.describe() == s.spec.describe() ? reference_values(s) : nullptr;
    const bool sized = ref && ref->error.empty();
    auto scale_row = [&](const char* name, float given, float resolved) {
      ImGui::Indent();
      if (given > 0)
        ImGui::Text("%s %g", name, given);
      else if (sized)
        ImGui::Text("%s %g", name, resolved);
      else
        ImGui::Text("%s ...", name);
      ImGui::SameLine();
      ImGui::TextDisabled("%s", given > 0 ? "(given)"
                                : sized   ? "(from the data)"
                                : ref     ? "(not drawn here: the problem is too large)"
                                          : "(known once the problem is drawn)");
      ImGui::Unindent();
    };
    ImGui::TextDisabled("fp8 scales (element = code * scale):");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("--k-scale / --v-scale give them; else the largest |K| and |V| the sequences read\n"
                        "map onto the format's largest finite value.");
    scale_row("k_scale", sp.k_scale, ref ? ref->k_scale : 0.0f);
    scale_row("v_scale", sp.v_scale, ref ? ref->v_scale : 0.0f);
  }
}

// The cache's layout (pa/index/kv_layout.hpp): vLLM's split K/V, or a
// token-row page tensor (nhd, hnd). A choice the stage cannot trace is
// offered disabled with the reason (stages 1-7 read vLLM's layout only;
// token rows hold 16-bit elements only).
void draw_layout_choice(AppState& s, ProblemSpec& sp, float w, bool& changed) {
  ImGui::SetNextItemWidth(w);
  cache_choice_combo("KV layout", sp.kv_layout, kAllKvLayouts, kv_layout_name, [&](pa::KvLayout l) {
    if (l == pa::KvLayout::vllm) return std::string();
    return cache_choice_refusal(s, sp, "kv_layout", [l](ProblemSpec& p) { p.kv_layout = l; });
  }, changed);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("How the device holds the cache. vllm: K [block][kv head][dim/x][token][x] and\n"
                      "V [block][kv head][dim][token], two tensors. nhd: one tensor [page][K, V][token][kv head][dim];\n"
                      "hnd: [page][K, V][kv head][token][dim] (FlashInfer, SGLang): each token's dims contiguous.\n"
                      "Stage 8 (optimized) reads all three; the KV panel draws the chosen one.");
  ImGui::SetNextItemWidth(w);
  cache_choice_combo("page table", sp.page_table, kAllPageTableForms, page_table_name, [&](pa::PageTableForm f) {
    if (f == pa::PageTableForm::padded) return std::string();
    return cache_choice_refusal(s, sp, "page_table", [f](ProblemSpec& p) { p.page_table = f; });
  }, changed);
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("How a sequence's pages are found. padded: block_tables [seq][max blocks], the context length\n"
                      "beside it. csr: the pages of every sequence back to back (indices), kv_indptr[seq] where\n"
                      "a row starts, kv_last_page_len[seq] the tokens of its last page. Stage 8 reads both.");
  if (sp.kv_layout != pa::KvLayout::vllm || sp.page_table != pa::PageTableForm::padded) {
    if (const std::string why = kv_cache_refusal(sp, s.problem_stage); !why.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.45f, 0.4f, 1));
      ImGui::TextWrapped("%s", why.c_str());
      ImGui::PopStyleColor();
    }
  }
}

}  // namespace

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
      // "5, 17" as well as "5,17": spaces around an item are not part of it.
      const auto first = tok.find_first_not_of(' '), last = tok.find_last_not_of(' ');
      const auto v = first == std::string::npos ? std::nullopt : parse_number<int>(tok.substr(first, last - first + 1));
      if (v) lens.push_back(*v);
      else ok = false;
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
  draw_kv_cache_choice(s, sp, w, changed);
  draw_layout_choice(s, sp, w, changed);
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
    request_model(s, sp, s.problem_stage, 0);
  }
  ImGui::Separator();
  const ConfigInfo& c = s.cfg;
  ImGui::PushFont(s.fonts.bold);
  ImGui::TextUnformatted("Derived (KernelConfig)");
  ImGui::PopFont();
  if (ImGui::BeginTable("##derived", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit)) {
    auto text_row = [](const char* k, const char* v, const char* why) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(k);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", why);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(v);
    };
    auto row = [&](const char* k, int v, const char* why) { text_row(k, std::to_string(v).c_str(), why); };
    // Elements and bytes apart: with an fp8 cache a K element is 1 byte and a Q element 2.
    const std::string cache = is_fp8(c.kv_dtype) ? std::string(kv_dtype_name(c.kv_dtype))
                                                 : std::string(kv_dtype_name(c.kv_dtype)) + " (" + dtype_name(c.dtype) + ")";
    text_row("KV cache dtype", cache.c_str(),
             "the element type K and V are stored in (auto: the query's dtype)");
    text_row("page table", page_table_name(s.spec.page_table),
             s.spec.page_table == pa::PageTableForm::padded
                 ? "block_tables [seq][max blocks] and context_lens [seq]"
                 : "CSR: indices (every row back to back), kv_indptr [seqs + 1], kv_last_page_len [seqs]");
    text_row("KV layout", kv_layout_name(c.kv_layout),
             c.kv_layout == pa::KvLayout::vllm ? "K [block][kv head][dim/x][token][x], V [block][kv head][dim][token]"
             : c.kv_layout == pa::KvLayout::nhd ? "one tensor [page][K, V][token][kv head][dim]: a token's dims contiguous"
                                                 : "one tensor [page][K, V][kv head][token][dim]: a token's dims contiguous");
    row("KV element bytes", c.kv_elem_bytes, "bytes of one K or V cache element (Q: the query dtype's)");
    row("x (elements per 16 B)", c.x, "innermost dimension of the K cache layout: 16 B / KV element bytes");
    row("thread group size", c.thread_group_size, "threads per token in QK: 32 / block size");
    if (c.token_rows) {  // stage 5's token-row mapping (nhd, hnd)
      row("K vec size", c.vec_size,
          "elements one thread loads at once: a whole 16-byte chunk of its token's row (x), or x / 2 where the head "
          "does not split into the group's chunks");
    } else {
      row("K vec size", c.vec_size, "elements one thread loads at once: 16 B / (group size * KV element bytes)");
    }
    row("K vec bytes (cache)", c.vec_bytes, "one K vec load from the cache: K vec size * KV element bytes");
    row("Q vec bytes (shared)", c.q_vec_bytes,
        "the Q vec a K vec meets in shared memory: K vec size * query element bytes (more than the K vec's with fp8)");
    row("K vecs per thread", c.num_vecs_per_thread, "head size / (group size * vec size)");
    if (c.token_rows) {
      row("V vec size", c.v_vec_size, "head dims of one token per V load: x (16 bytes)");
      row("V vec bytes", c.v_vec_bytes, "one V vec load from the cache: 16 bytes of one token's row");
      row("V lanes per token", c.lv_lanes_per_token,
          "lanes covering a token's V row: its 16-byte chunks (head / x), rounded up to a power of two");
      row("V tokens per load", c.lv_tokens_per_iter, "tokens one warp-wide V load covers: 32 / lanes per token");
      row("V loads per block", c.lv_token_steps, "each lane's V loads per block: block size / tokens per load");
      row("accumulator rows per thread", c.num_rows_per_thread, "the head dims of the lane's chunk: x");
    } else {
      row("V vec size", c.v_vec_size, "elements per V load: 16 B / KV element bytes (at most block size)");
      row("V vec bytes", c.v_vec_bytes, "one V vec load from the cache: V vec size * KV element bytes");
      row("V rows per iteration", c.num_rows_per_iter, "32 / (block size / V vec size)");
      row("accumulator rows per thread", c.num_rows_per_thread, "head size / rows per iteration");
    }
    ImGui::EndTable();
  }
}

}  // namespace pa::viewer
