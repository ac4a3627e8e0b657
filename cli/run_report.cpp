// pa-lab run's speed report: see run_report.hpp.
#include "run_report.hpp"

#include <cstdio>
#include <string>

#include "no_gpu.hpp"

namespace pa::cli {

bool gpu_ready_for(kernels::Stage stage) {
  std::string why;
  if (kernels::gpu_available(&why)) return true;
  std::fputs(
      no_gpu_message("run", PA_HAVE_CUDA, why, kernels::stage_info(stage).name, static_cast<int>(stage)).c_str(),
      stderr);
  return false;
}

void print_cache_form(const CacheForm& form) {
  if (!form.is_default()) std::printf("cache:   %s\n", describe_cache_form(form).c_str());
}

void print_speed(kernels::Stage stage, const ProblemSpec& spec, double median_ms, int iters, const char* what) {
  const double bytes = static_cast<double>(kernels::stage_bytes(stage, spec));
  const double gbs = bytes / (median_ms * 1e-3) / 1e9;
  const double copy = kernels::measure_copy_bandwidth_gbs();
  const std::string timed = what && *what ? std::string(what) + ", " : std::string();
  std::printf("time:    median %.4f ms over %d launches (%sCUDA events, after 3 warm-up; the same KV every launch: "
              "a small problem may sit in L2, pa-bench rotates it)\n",
              median_ms, iters, timed.c_str());
  std::printf("traffic: %.3f MB (Q, KV%s, output) -> %.1f GB/s = %.1f%% of the device copy bandwidth (%.1f GB/s, "
              "read + write, measured now)\n",
              bytes / 1e6, stage == kernels::Stage::cascade_merge ? " with the shared prefix once" : "", gbs,
              100.0 * gbs / copy, copy);
}

}  // namespace pa::cli
