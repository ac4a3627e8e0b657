// pa-lab's --layout and --page-table: see cache_form.hpp.
#include "cache_form.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace pa::cli {

namespace {

// "a", "a and b", "a, b and c".
std::string join_and(const std::vector<std::string>& items) {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) s += i + 1 == items.size() ? " and " : ", ";
    s += items[i];
  }
  return s;
}

// The names as a command line takes them, e.g. "vllm|nhd|hnd".
template <class E, std::size_t N>
std::string names_bar(const E (&all)[N], const char* (*name)(E)) {
  std::string s;
  for (E e : all) {
    if (!s.empty()) s += '|';
    s += name(e);
  }
  return s;
}

template <class E, std::size_t N>
std::string accepted_for(kernels::Stage stage, const E (&all)[N], const char* (*name)(E)) {
  std::vector<std::string> v;
  for (E e : all)
    if (stage_reads(stage, e)) v.emplace_back(name(e));
  return join_and(v);
}

// The stages that read a form: "stage 8 (optimized)" for one, "stages 1-8"
// for several (runs of consecutive numbers).
template <class E>
std::string readers_text(E e) {
  std::vector<int> nums;
  const char* only = nullptr;
  for (const auto& s : kernels::stages())
    if (stage_reads(s.stage, e)) {
      nums.push_back(static_cast<int>(s.stage));
      only = s.name;
    }
  if (nums.empty()) return "no stage";
  if (nums.size() == 1) return std::string("stage ") + std::to_string(nums[0]) + " (" + only + ")";
  std::vector<std::string> runs;
  for (std::size_t i = 0; i < nums.size();) {
    std::size_t j = i;
    while (j + 1 < nums.size() && nums[j + 1] == nums[j] + 1) ++j;
    std::string run = std::to_string(nums[i]);
    if (j > i) run += '-' + std::to_string(nums[j]);
    runs.push_back(run);
    i = j + 1;
  }
  return std::string("stages ") + join_and(runs);
}

// Stage names (as --stage takes them) of the stages that read both parts of `form`.
std::vector<std::string> stages_reading(const CacheForm& form) {
  std::vector<std::string> v;
  for (const auto& s : kernels::stages())
    if (stage_reads(s.stage, form.layout) && stage_reads(s.stage, form.table)) v.emplace_back(s.name);
  return v;
}

const char* layout_shape(KvLayout l) {
  switch (l) {
    case KvLayout::vllm:
      return "K [pages, kv_heads, head/x, page, x] and V [pages, kv_heads, head, page], two tensors";
    case KvLayout::nhd:
      return "one tensor [pages, 2, page, kv_heads, head] (K, then V, in each page)";
    case KvLayout::hnd:
      return "one tensor [pages, 2, kv_heads, page, head] (K, then V, in each page)";
  }
  return "";
}

const char* table_shape(PageTableForm t) {
  switch (t) {
    case PageTableForm::padded:
      return "vLLM's block_tables [seqs, max_blocks_per_seq], every row padded to the longest";
    case PageTableForm::csr:
      return "indptr [seqs + 1], indices, last_page_len [seqs] (FlashInfer's, SGLang's)";
  }
  return "";
}

// The refusal of one part of the form: the flag, the value, what this stage
// accepts and, where one exists, a command line that runs it.
[[noreturn]] void refuse(kernels::Stage stage, const CacheForm& form, const std::string& flag, const std::string& value,
                         const std::string& what, const std::string& accepted, const std::string& readers) {
  std::string m = "option " + flag + " " + value + ": stage " + kernels::stage_name(stage) + " cannot read " + what +
                  " (accepted for this stage: " + accepted + "); " + value + " is read by " + readers;
  const std::vector<std::string> runs = stages_reading(form);
  if (!runs.empty()) m += ": pa-lab run --stage " + runs.back() + " " + cache_form_flags_text(form);
  throw UsageError(m);
}

}  // namespace

std::string cache_form_flags_text(const CacheForm& form) {
  std::string s;
  if (form.layout != KvLayout::vllm) s += std::string("--layout ") + kv_layout_name(form.layout);
  if (form.table != PageTableForm::padded) {
    if (!s.empty()) s += ' ';
    s += std::string("--page-table ") + page_table_name(form.table);
  }
  return s;
}

std::string cache_form_option_text(const CacheForm& form) {
  const bool both = form.layout != KvLayout::vllm && form.table != PageTableForm::padded;
  return (both ? "options " : "option ") + cache_form_flags_text(form);
}

CacheForm take_cache_form_flags(Flags& f) {
  CacheForm c;
  if (const auto v = f.take("layout")) {
    const auto l = kv_layout_from_name(*v);
    if (!l)
      throw UsageError("option --layout: unknown KV cache layout '" + *v + "' (accepted: " + kKvLayoutNamesText + ")");
    c.layout = *l;
  }
  if (const auto v = f.take("page-table")) {
    const auto t = page_table_from_name(*v);
    if (!t)
      throw UsageError("option --page-table: unknown page-table form '" + *v + "' (accepted: " + kPageTableNamesText +
                       ")");
    c.table = *t;
  }
  return c;
}

void check_cache_form_for_stage(kernels::Stage stage, const CacheForm& form) {
  if (!stage_reads(stage, form.layout)) {
    const std::string name = kv_layout_name(form.layout);
    refuse(stage, form, "--layout", name, "a KV cache in layout " + name,
           accepted_for(stage, kAllKvLayouts, kv_layout_name), readers_text(form.layout));
  }
  if (!stage_reads(stage, form.table)) {
    const std::string name = page_table_name(form.table);
    refuse(stage, form, "--page-table", name, "a " + name + " page table",
           accepted_for(stage, kAllPageTableForms, page_table_name), readers_text(form.table));
  }
}

std::string cache_form_flags_help() {
  // The problem flags' columns (options.cpp): the flag, then its text at column 29.
  auto flag = [](const std::string& f) { return "  " + f + std::string(f.size() < 27 ? 27 - f.size() : 1, ' '); };
  const std::string indent(29, ' ');
  auto readers = [](const auto& all, auto name) {
    std::string s;
    for (auto e : all) {
      if (!s.empty()) s += "; ";
      s += std::string(name(e)) + ": " + readers_text(e);
    }
    return s;
  };
  std::string s = "cache form (the problem is uploaded in it; the CPU reference reads the same elements):\n";
  s += flag("--layout " + names_bar(kAllKvLayouts, kv_layout_name)) + "the KV cache's layout on the device (default " +
       kv_layout_name(KvLayout::vllm) + "), read by\n";
  s += indent + "  " + readers(kAllKvLayouts, kv_layout_name) + "\n";
  s += indent + "nhd and hnd: one tensor of pages holding K and V, fp16 or bf16 caches\n";
  s += indent + "(no fp8); pa-lab list shows each layout's shape\n";
  s += flag("--page-table " + names_bar(kAllPageTableForms, page_table_name)) +
       "the page table's form (default " + page_table_name(PageTableForm::padded) + "), read by\n";
  s += indent + "  " + readers(kAllPageTableForms, page_table_name) + "\n";
  s += indent + "padded: vLLM's block_tables; csr: indptr, indices, last_page_len\n";
  return s;
}

std::string cache_form_list_text() {
  std::string s = std::string("KV cache layouts (pa-lab run --layout NAME; default ") + kv_layout_name(KvLayout::vllm) +
                  "):\n";
  auto column = [](std::string text, std::size_t width) {
    text.resize(std::max(text.size() + 1, width), ' ');
    return text;
  };
  auto row = [&](const char* name, const std::string& readers, const char* shape) {
    s += "  " + column(name, 8) + column(readers, 21) + shape + "\n";
  };
  for (KvLayout l : kAllKvLayouts) row(kv_layout_name(l), readers_text(l), layout_shape(l));
  s += std::string("page tables (pa-lab run --page-table NAME; default ") + page_table_name(PageTableForm::padded) +
       "):\n";
  for (PageTableForm t : kAllPageTableForms) row(page_table_name(t), readers_text(t), table_shape(t));
  s += "traces (pa-lab trace) cover every layout and page table a stage reads\n";
  s += "multi-level cascade (pa-lab run --stage cascade_merge --levels G:T,...): fp16, bf16; layout vllm; shared "
       "levels on the prefix kernel, the last on stage 8 over CSR rows\n";
  return s;
}

std::string describe_cache_form(const CacheForm& form) {
  return std::string("layout ") + kv_layout_name(form.layout) + " (" + layout_shape(form.layout) + "), page table " +
         page_table_name(form.table) + " (" + table_shape(form.table) +
         "); uploaded from the problem's vLLM padded form, which the reference reads";
}

}  // namespace pa::cli
