// The KV cache's form on the device: --layout (pa/index/kv_layout.hpp:
// vLLM's split K/V, or the token-row page tensors nhd and hnd) and
// --page-table (vLLM's padded block tables or CSR). pa-lab run and trace put
// them in the problem (ProblemSpec::kv_layout, page_table); the runner
// uploads it in that form, the reference reads the same elements. Which stage
// reads which form is answered here for pa-lab (run's refusal, list's table),
// so that a bad combination is refused before a GPU is asked for.
#pragma once
#include <string>

#include "options.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/kernels/api.hpp"

namespace pa::cli {

struct CacheForm {
  KvLayout layout = KvLayout::vllm;
  PageTableForm table = PageTableForm::padded;
  bool is_default() const { return layout == KvLayout::vllm && table == PageTableForm::padded; }
};

// --layout NAME and --page-table NAME (UsageError naming the value and the
// accepted names).
CacheForm take_cache_form_flags(Flags& f);

// Which stage reads which form is kernels::stage_reads (pa/kernels/api.hpp),
// the rule the runner's check_run_options applies when a launch is planned,
// after pa-lab has asked for a GPU; pa-lab asks it first.
using kernels::stage_reads;

// UsageError when `stage` does not read `form`: names the flag, the value,
// the stages that read it and what this stage accepts.
void check_cache_form_for_stage(kernels::Stage stage, const CacheForm& form);

// The flags that set `form` apart from the defaults, e.g. "--layout nhd" or
// "--layout hnd --page-table csr" (empty for the defaults).
std::string cache_form_flags_text(const CacheForm& form);
// The same for a message: "option --layout nhd", "options --layout hnd --page-table csr".
std::string cache_form_option_text(const CacheForm& form);

// The flags' help (run's and trace's differ in what they accept).
std::string cache_form_flags_help();
// pa-lab list: each layout and table form, its shape and the stages that read it.
std::string cache_form_list_text();
// One line for the run report: the layout and table form that ran.
std::string describe_cache_form(const CacheForm& form);

}  // namespace pa::cli
