// Stage 8's split planner (plan_optimized, kernels/stages/08_optimized.cu):
// how many CTAs share one sequence's context, chosen from a time model of the
// device (its SM count, DRAM peak and the kernel's occupancy). Plain host
// code, so that the trace host model plans the same grid as the launcher and
// the split sweep's file can be checked against it without a GPU
// (tests/kernels/test_split_plan.cpp). Kernels do not include it: the planner
// can change without rebuilding them.
#pragma once
#include <algorithm>
#include <stdexcept>
#include <string>

#include "pa/index/hd.hpp"

namespace pa {

// The planner's inputs: the problem, the kernel's step and occupancy, the device.
struct OptSplitInput {
  int num_seqs = 0, units = 0, head_size = 0, block_size = 0, elem_bytes = 2;
  int blocks_per_step = 1, max_context_len = 0, sm_count = 0, ctas_per_sm = 1;
  double dram_gbps = 0;  // the device's DRAM peak (opt_dram_peak_gbps); must be > 0
};
// A device's DRAM peak in GB/s from its memory clock (kHz, cudaDevAttrMemoryClockRate)
// and bus width (bits): two transfers per clock (double data rate). H100 SXM:
// 2619 MHz x 5120 bits = 3352 GB/s; H200: 3201 MHz x 6144 bits = 4917 GB/s.
PA_HD constexpr double opt_dram_peak_gbps(int memory_clock_khz, int bus_width_bits) {
  return 2.0 * memory_clock_khz * 1e3 * (bus_width_bits / 8.0) / 1e9;
}
// The host model's device when it has none to ask: an H100 SXM (132 SMs).
inline constexpr int kOptModelSmCount = 132;
inline constexpr double kOptModelDramGbps = opt_dram_peak_gbps(2619000, 5120);
struct OptSplit {
  int splits = 1, split_blocks = 0;
};
inline constexpr int kOptMaxSplits = 256;  // bounds the merge's shared-memory weights

inline OptSplit opt_choose_split(const OptSplitInput& a, int force_splits) {
  const int bps = a.blocks_per_step;
  const int blocks = ceil_div(a.max_context_len, a.block_size);
  const int max_splits = std::min(kOptMaxSplits, ceil_div(blocks, bps));
  auto split_blocks_for = [&](int s) { return ceil_div(ceil_div(blocks, s), bps) * bps; };
  int best_s = 1;
  if (force_splits <= 0 && !(a.dram_gbps > 0))
    throw std::invalid_argument("opt_choose_split: dram_gbps " + std::to_string(a.dram_gbps) +
                                " (accepted: > 0, the device's DRAM peak)");
  if (force_splits > 0) {
    best_s = std::min(force_splits, max_splits);
  } else {
    // Time model (seconds). A grid of ctas CTAs runs in waves of `slots`
    // (SMs x resident CTAs per SM); a wave of n CTAs of cta_bytes each takes
    // the longest of
    //  - one CTA alone: a fixed start/epilogue cost kT0, then its bytes at
    //    kCtaBw (a CTA is latency-bound: its pipeline's bytes in flight over
    //    the memory latency);
    //  - the HBM: n x cta_bytes at 0.9 of the device's DRAM peak (what a copy
    //    reaches on H100 and H200 alike), a little less when fewer CTAs than
    //    slots are resident;
    //  - the busiest SM: its CTAs' bytes at kSmBw, so a wave that puts 2 CTAs
    //    on some SMs and 1 on others is paced by the former.
    // More splits cost a merge: the last CTA of each (sequence, unit) reads
    // every split's state, kM0 + kM1 per split, once per wave of merging
    // CTAs (base / slots of them). The split count minimizing the sum over
    // waves (the last one partial) wins, among grids that load the SMs evenly
    // (at most one CTA per SM, or the last layer of CTAs over the SMs at
    // least 95% full: an H100 sweep at (1,32,8,131072) gave 95% of copy with
    // 128 CTAs, 94% with 264, but 83% with 144 and 89% with 192). Constants
    // fitted to a 48-shape split sweep on an H200 (kernels/NOTES.md, "The
    // split planner from the device"); the device enters through its SM
    // count, occupancy and DRAM peak.
    constexpr double kCtaBw = 30e9, kSmBw = 35e9, kT0 = 2e-6, kM0 = 2e-6, kM1 = 0.5e-6;
    const double kHbm = 0.9 * a.dram_gbps * 1e9;
    const long long base = static_cast<long long>(a.num_seqs) * a.units;
    const long long slots = static_cast<long long>(a.sm_count) * a.ctas_per_sm;
    const double block_bytes = 2.0 * a.head_size * a.block_size * a.elem_bytes;
    const double merge_waves = static_cast<double>((base + slots - 1) / slots);
    double best = 1e300;
    for (int s = 1; s <= max_splits; ++s) {
      const int sb = split_blocks_for(s);
      const int s_eff = ceil_div(blocks, sb);
      if (s_eff != s) continue;  // same split as a smaller s
      const long long ctas = base * s_eff;
      const long long layers = (ctas + a.sm_count - 1) / a.sm_count;
      if (s_eff > 1 && ctas > a.sm_count && ctas < 0.95 * layers * a.sm_count) continue;  // uneven SM load
      auto wave = [&](long long n) {
        const double cta_bytes = sb * block_bytes;
        const double hbm = kHbm * std::min(1.0, 0.9 + 0.1 * static_cast<double>(n) / slots);
        const double per_sm = static_cast<double>((n + a.sm_count - 1) / a.sm_count);
        return std::max({kT0 + cta_bytes / kCtaBw, static_cast<double>(n) * cta_bytes / hbm,
                         per_sm * cta_bytes / kSmBw});
      };
      double t = static_cast<double>(ctas / slots) * wave(slots);
      if (ctas % slots) t += wave(ctas % slots);
      if (s_eff > 1) t += (kM0 + kM1 * s_eff) * merge_waves;
      if (t < best * 0.999) {
        best = t;
        best_s = s_eff;
      }
    }
  }
  OptSplit r;
  r.split_blocks = split_blocks_for(best_s);
  r.splits = ceil_div(blocks, r.split_blocks);
  return r;
}

// Resident CTAs per SM from shared memory alone, on an sm_90 SM (228 KB per
// SM, 1 KB reserved per CTA, at most 16 CTAs of 128 threads). The trace host
// model uses it when it has no GPU to ask; stage 8 is shared-memory bound
// (>= 96 KB per CTA, registers allow 2 CTAs of 128 threads at any count).
inline int opt_ctas_per_sm_by_smem(int smem_bytes) {
  constexpr int kSmemPerSm = 228 * 1024, kReserved = 1024;
  return std::max(1, std::min(16, kSmemPerSm / (smem_bytes + kReserved)));
}

}  // namespace pa
