// pa-lab list: the stages, the KV cache layouts and page-table forms with the
// stages that read each, and the configurations (supported by the design,
// built into this binary).
#include <cstdio>

#include "cache_form.hpp"
#include "commands.hpp"
#include "options.hpp"
#include "pa/kernels/api.hpp"

namespace pa::cli {

void help_list() {
  std::printf("usage: pa-lab list\n\nPrints the stages (name, number, the step each adds, what it writes), the KV\n"
              "cache layouts and page-table forms (pa-lab run --layout, --page-table) with the stages that read\n"
              "each, and the kernel configurations this build holds.\n");
}

int cmd_list(Args args) {
  Flags f(args);
  if (f.take_switch("help")) {
    help_list();
    return kExitOk;
  }
  f.finish("list");
  std::printf("stages (pa-lab run --stage NAME):\n");
  for (const auto& s : kernels::stages()) {
    std::printf("  %d %-14s %s\n      writes: %s\n", static_cast<int>(s.stage), s.name, s.adds, s.writes);
  }
  std::printf("\n%s", cache_form_list_text().c_str());
  std::printf("\n%s\n", kernels::supported_text().c_str());
  const auto built = kernels::built_configs();
  std::printf("\nbuilt configurations (%zu, stages 1-5 each):\n", built.size());
  for (const auto& k : built) std::printf("  %s\n", kernels::describe(k).c_str());
  std::string why;
  if (kernels::gpu_available(&why)) {
    const auto g = kernels::gpu_info();
    std::printf("\nGPU: %s (sm_%d%d, %d SMs, %lld bytes shared memory per block); v1 holds contexts up to "
                "%d tokens (fp16, head 128) here, longer ones need v2_partition\n",
                g.name.c_str(), g.cc_major, g.cc_minor, g.sm_count, static_cast<long long>(g.smem_optin_bytes),
                kernels::v1_max_context(DType::f16, 128, 128, g.smem_optin_bytes));
  } else {
    std::printf("\nGPU: none (%s)\n", why.c_str());
  }
  return kExitOk;
}

}  // namespace pa::cli
