// pa-lab run --stage optimized --devices N[,M...]: context parallelism. The
// problem's pages are sharded over N GPUs, each decodes its own with stage 8,
// the attention states go through NCCL and are merged on every GPU
// (pa/kernels/context_parallel_nccl.hpp). Checked against the CPU reference,
// against the same shards run in turn on one GPU (bit for bit where the merge
// order is the same: the all_gather exchange), and between the ranks; timed
// beside stage 8 on one GPU over the whole problem. One "row:" line per
// configuration sums it up for scripts (scripts/context_parallel_table.py).
#include "cmd_run_devices.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "run_report.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/index/shard.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/context_parallel.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/reference/attention.hpp"

#if PA_HAVE_NCCL
#include "pa/kernels/context_parallel_nccl.hpp"
#include "pa/kernels/runner.hpp"
#endif

namespace pa::cli {

const char* help_run_devices() {
  return "stage optimized over several GPUs (context parallelism; needs a build with NCCL):\n"
         "  --devices N[,M]  shard each context over N GPUs (1..8, at most the GPUs present); a list runs each\n"
         "  --shard-policy P contiguous (default: one run of blocks per GPU) or round_robin (block b on GPU b % N)\n"
         "  --exchange E[,F] all_gather (default: every state to every GPU, folded in shard order) or sums\n"
         "                   (all-reduce max of the lse, then all-reduce sum of the weighted states)\n"
         "  --sequence-groups G[,H]  decode the batch in G groups of sequences, each group's exchange\n"
         "                   overlapping the next group's decode (default 1: no overlap; G <= --seqs)\n";
}

namespace {

std::vector<kernels::StateExchange> parse_exchanges(const std::string& list) {
  std::vector<kernels::StateExchange> out;
  std::size_t at = 0;
  while (at <= list.size()) {
    const std::size_t comma = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, comma - at);
    const auto e = kernels::state_exchange_from_name(name);
    if (!e) throw UsageError("option --exchange: '" + name + "' (accepted: " + kernels::kStateExchangeNamesText + ")");
    out.push_back(*e);
    at = comma + 1;
  }
  return out;
}

// The flags, checked before anything else (a GPU, NCCL) is asked for.
struct DevicesFlags {
  std::vector<int> devices;
  ShardPolicy policy = ShardPolicy::contiguous;
  std::vector<kernels::StateExchange> exchanges;
  std::vector<int> groups;
};
DevicesFlags take_devices_flags(Flags& f) {
  DevicesFlags d;
  d.devices = f.take_int_list("devices");
  for (int n : d.devices)
    if (n < 1 || n > kMaxShards)
      throw UsageError("option --devices: " + std::to_string(n) + " (accepted: 1.." + std::to_string(kMaxShards) +
                       ", at most the GPUs present)");
  const std::string policy = f.take_str("shard-policy", "contiguous");
  const auto p = shard_policy_from_name(policy);
  if (!p) throw UsageError("option --shard-policy: '" + policy + "' (accepted: " + kShardPolicyNamesText + ")");
  d.policy = *p;
  d.exchanges = parse_exchanges(f.take_str("exchange", "all_gather"));
  d.groups = f.has("sequence-groups") ? f.take_int_list("sequence-groups") : std::vector<int>{1};
  for (int g : d.groups)
    if (g < 1) throw UsageError("option --sequence-groups: " + std::to_string(g) + " (accepted: 1 .. --seqs)");
  return d;
}

}  // namespace

#if PA_HAVE_NCCL
using kernels::ContextParallel;
using kernels::ContextParallelOptions;
using kernels::StateExchange;

int cmd_run_devices(Flags& f, ProblemSpec spec, int iters) {
  const DevicesFlags flags = take_devices_flags(f);
  const std::vector<int>& devices = flags.devices;
  const ShardPolicy policy = flags.policy;
  f.finish("run");
  validate_problem_flags(spec);
  if (!gpu_ready_for(kernels::Stage::optimized)) return kExitNoGpu;
  const int have = kernels::cuda_device_count();
  for (int n : devices)
    if (n > have)
      throw UsageError("option --devices: " + std::to_string(n) + " (accepted: 1.." +
                       std::to_string(std::min(kMaxShards, have)) + "; this machine has " + std::to_string(have) +
                       " GPU" + (have == 1 ? "" : "s") + ")");
  if (!optimized_supported(spec.dtype, spec.head_size, spec.block_size, spec.kv_dtype)) {
    std::fprintf(stderr, "pa-lab run: stage optimized does not support %s kv cache %s head %d block %d; supported: %s\n",
                 dtype_name(spec.dtype), kv_dtype_name(spec.kv_dtype), spec.head_size, spec.block_size,
                 optimized_supported_list().c_str());
    return kExitUsage;
  }
  for (int g : flags.groups)
    if (g > spec.num_seqs())
      throw UsageError("option --sequence-groups: " + std::to_string(g) + " (accepted: 1.." +
                       std::to_string(spec.num_seqs()) + ", at most --seqs)");
  const PagedProblem p = make_problem(spec);
  const kernels::GpuInfo gpu = kernels::gpu_info();
  std::printf("stage:   8 optimized, context parallel: shards over GPUs, states exchanged with NCCL %s\n",
              kernels::nccl_version_text().c_str());
  std::printf("gpus:    %d x %s (sm_%d%d, %d SMs); NCCL_NVLS_ENABLE=0\n", have, gpu.name.c_str(), gpu.cc_major,
              gpu.cc_minor, gpu.sm_count);
  std::printf("problem: %s\n", spec.describe().c_str());
  std::printf("policy:  %s\n", shard_policy_name(policy));

  const std::vector<double> ref = ref_output(p);
  const Tolerance tol = tolerance_for(spec.dtype);
  // Each GPU's copy bandwidth, measured now, and stage 8 on one GPU over the whole problem.
  std::vector<double> copy_gbs(*std::max_element(devices.begin(), devices.end()));
  for (int d = 0; d < static_cast<int>(copy_gbs.size()); ++d) {
    kernels::set_current_device(d);
    copy_gbs[d] = kernels::measure_copy_bandwidth_gbs();
  }
  kernels::set_current_device(0);
  float one_ms = 0;
  {
    kernels::StageRunner whole(p, kernels::Stage::optimized);
    if (iters > 0) one_ms = whole.time(iters).median_ms;
    std::printf("one GPU: stage 8 over the whole problem on GPU 0: %s%s\n", whole.plan().c_str(),
                iters > 0 ? (", median " + std::to_string(one_ms) + " ms").c_str() : "");
  }
  bool all_pass = true;
  int configs = 0;
  for (int n : devices) {
    for (int groups : flags.groups) {
      // GPU 0, the shards in turn, the same sequence groups.
      const kernels::ShardedRun one = kernels::run_sharded(p, policy, n, groups);
      for (StateExchange ex : flags.exchanges) {
        ++configs;
        std::printf("\n== %d GPU%s, exchange %s, %d sequence group%s\n", n, n == 1 ? "" : "s",
                    kernels::state_exchange_name(ex), groups, groups == 1 ? "" : "s");
        ContextParallelOptions o;
        o.devices = n;
        o.policy = policy;
        o.exchange = ex;
        o.sequence_groups = groups;
        ContextParallel cp(p, o);
        const kernels::ContextParallelResult r = cp.run();
        for (int s = 0; s < n; ++s) std::printf("  shard %d plan: %s\n", s, r.plans[s].c_str());
        const CompareResult c = compare(ref.data(), r.out.data(), r.out.size(), tol);
        const bool ranks = r.ranks_agree;
        const bool bitwise = kernels::same_bits(r.out, one.out) && kernels::same_bits(r.lse, one.lse);
        // all_gather folds in the one-GPU run's order: equal bit for bit. sums adds in NCCL's order.
        const bool one_ok = ex == StateExchange::all_gather ? bitwise : true;
        const bool pass = c.pass && ranks && one_ok;
        all_pass = all_pass && pass;
        std::printf("  check (vs CPU reference, float64): %s\n", c.summary().c_str());
        std::printf("  every rank's output equal bit for bit: %s\n", ranks ? "yes" : "NO");
        std::printf("  equal to the shards run in turn on one GPU, bit for bit: %s%s\n", bitwise ? "yes" : "no",
                    ex == StateExchange::all_gather ? " (required: same merge order)"
                                                    : " (not required: the all-reduce sums in its own order)");
        if (iters > 0) {
          const kernels::ContextParallelTiming t = cp.time(iters);
          std::printf(
              "  time:    median %.4f ms over %d iterations (all GPUs released together); one GPU %.4f ms: "
              "speedup %.2fx\n",
              t.total_ms, t.iters, one_ms, one_ms / t.total_ms);
          double worst_pct = 1e9, best_pct = 0;
          for (int d = 0; d < n; ++d) {
            const double gbs = static_cast<double>(t.kv_bytes[d]) / (t.decode_ms[d] * 1e-3) / 1e9;
            const double pct = 100.0 * gbs / copy_gbs[d];
            worst_pct = std::min(worst_pct, pct);
            best_pct = std::max(best_pct, pct);
            std::printf(
                "  GPU %d:   decode %.4f ms, KV %.1f MB -> %.1f GB/s = %.1f%% of its copy bandwidth (%.1f GB/s)\n", d,
                t.decode_ms[d], t.kv_bytes[d] / 1e6, gbs, pct, copy_gbs[d]);
          }
          std::printf(
              "  exchange: %.4f ms after the last decode (%.1f%% of the time), %.1f KB received per GPU; "
              "last merge %.4f ms\n",
              t.exchange_ms, 100.0 * t.exchange_ms / t.total_ms, t.exchange_bytes / 1e3, t.merge_ms);
          std::printf(
              "row: gpu=%s dtype=%s seqs=%d heads=%d kv_heads=%d context=%d policy=%s devices=%d exchange=%s "
              "groups=%d ms=%.4f one_ms=%.4f speedup=%.3f exchange_ms=%.4f merge_ms=%.4f pct_min=%.1f "
              "pct_max=%.1f exchange_kb=%.1f pass=%d\n",
              gpu.name.c_str(), dtype_name(spec.dtype), p.num_seqs(), spec.num_heads, spec.num_kv_heads,
              spec.max_context_len(), shard_policy_name(policy), n, kernels::state_exchange_name(ex), groups,
              t.total_ms, one_ms, one_ms / t.total_ms, t.exchange_ms, t.merge_ms, worst_pct, best_pct,
              t.exchange_bytes / 1e3, pass ? 1 : 0);
        }
        std::printf("  %s\n", pass ? "PASS" : "FAIL");
      }
    }
  }
  std::printf("\n%d configuration%s: %s\n", configs, configs == 1 ? "" : "s", all_pass ? "PASS" : "FAIL");
  return all_pass ? kExitOk : kExitFail;
}

#else  // built without NCCL

int cmd_run_devices(Flags& f, ProblemSpec, int) {
  (void)take_devices_flags(f);
  f.finish("run");
  std::fprintf(stderr,
               "pa-lab run --devices: this pa-lab was built without NCCL (CMake said why: \"pa: multi-GPU context "
               "parallelism skipped: ...\"); configure where nccl.h and libnccl are found (NCCL_ROOT) and rebuild\n");
  return kExitUsage;
}

#endif

}  // namespace pa::cli
