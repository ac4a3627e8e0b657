// Stage 8's split planner (plan_optimized, kernels/stages/08_optimized.cu):
// how many CTAs share one sequence's context, chosen by replaying the grid on
// a model of the device (its SM count, DRAM peak and the kernel's occupancy)
// for each candidate split count. Plain host code, so that the trace host
// model plans the same grid as the launcher and the split sweep's file can be
// checked against it without a GPU (tests/kernels/test_split_plan.cpp).
// Kernels do not include it: the planner can change without rebuilding them.
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pa/index/hd.hpp"
#include "pa/index/optimized.hpp"

namespace pa {

// The planner's inputs: the problem, the kernel's step and occupancy, the device.
struct OptSplitInput {
  int num_seqs = 0, units = 0, head_size = 0, block_size = 0, elem_bytes = 2;
  int unit_heads = 1;  // query heads one CTA carries (its state: unit_heads x head_size floats)
  int blocks_per_step = 1, max_context_len = 0, sm_count = 0, ctas_per_sm = 1;
  double dram_gbps = 0;  // the device's DRAM peak (opt_dram_peak_gbps); must be > 0
  // Each sequence's context length (a host array of num_seqs), optional:
  // with it the replay gives every sequence its own bytes; without it every
  // sequence is planned at max_context_len. The attended range starts at
  // first_token (a cascade suffix), as max_context_len's does.
  const int* context_lens = nullptr;
  int first_token = 0;
  bool operator==(const OptSplitInput&) const = default;  // every field (context_lens: the pointer)
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

// Sequence i's attended blocks: all the planner reads of its length (the
// replay streams whole blocks), so two length arrays with the same blocks
// plan the same split.
inline int opt_attended_blocks(const OptSplitInput& in, int i) {
  const int len = in.context_lens ? in.context_lens[i] - in.first_token : in.max_context_len;
  return len > 0 ? ceil_div(len, in.block_size) : 0;
}
// Refuses a length outside 0 to max_context_len + first_token, by index and value.
inline void opt_check_context_lens(const OptSplitInput& in) {
  if (in.context_lens == nullptr) return;
  for (int i = 0; i < in.num_seqs; ++i)
    if (in.context_lens[i] < 0 || in.context_lens[i] - in.first_token > in.max_context_len)
      throw std::invalid_argument("opt_choose_split: context_lens[" + std::to_string(i) + "] " +
                                  std::to_string(in.context_lens[i]) + " (accepted: 0 to max_context_len " +
                                  std::to_string(in.max_context_len + in.first_token) + ")");
}

// The time model: stage 8's grid replayed onto the SMs. CTAs start in launch
// order (split fastest, then unit, then sequence); the first wave puts CTA k
// on SM k % SMs, every later CTA takes the slot that frees first. A CTA with
// tokens spends kT0 (prologue, warp merge, state stores) and streams its own
// bytes; a CTA past its sequence's end (a short sequence of a ragged batch)
// spends kEmpty. The rates, in bytes per microsecond:
//  - a CTA streams at most kCtaBw: its pipeline's bytes in flight over the
//    memory latency;
//  - an SM at most kSmBw, shared by the CTAs streaming on it, so an SM that
//    holds two CTAs gives each less than an SM that holds one;
//  - all SMs together at most kHbmFraction of the DRAM peak (what a copy
//    reaches on H100 and H200 alike): when they ask for more, every rate is
//    scaled down alike.
// Time is replayed in "progress time" G: a CTA's progress per unit of G
// depends on its own SM only, so each SM's next event is known without the
// others, and the DRAM scale stretches a stretch of G into real time by
// max(1, asked / delivered). A grid of more than kReplayWaves waves is not
// replayed but costed in closed form: its bytes at the DRAM rate or its
// CTAs' slot time, whichever is longer, plus the start and kTailCta of one
// CTA's stream for the ragged end (and never less than one CTA alone). With
// more than one split, the last CTA of each (sequence, unit) merges: kM0,
// and kM1 per L2 round trip, one per opt_merge_splits splits for each item
// a thread merges (four floats; unit_heads x head_size / 4 items over 128
// threads).
// Constants: the rates and kT0 fitted to a 48-shape split sweep on an H200,
// the rest (kEmpty, the merge's rounds, the tail) to the replays of the H100
// and H200 sweeps (kernels/NOTES.md, "The split planner replays the grid").
struct OptReplay {
  static constexpr double kCtaBw = 30e3, kSmBw = 35e3;  // bytes per us: 30, 35 GB/s
  static constexpr double kHbmFraction = 0.9;
  static constexpr double kT0 = 2.0, kEmpty = 0.5, kM0 = 2.0, kM1 = 0.5, kTailCta = 0.25;  // us
  static constexpr int kReplayWaves = 2;

  const OptSplitInput& in;
  const double block_bytes, hbm;  // bytes of one block's K and V; the DRAM rate in bytes per us
  const int sm, cps;
  double kv_bytes = 0;  // the K and V the whole grid reads (the same for every split count)
  // One entry per slot (SM s, slot c at s * cps + c): the bytes left of its
  // CTA (-1: idle) and the fixed time left before it streams.
  std::vector<double> left, wait;
  std::vector<double> sm_g;    // each SM's progress time, brought up at its events
  std::vector<int> streaming;  // CTAs streaming on each SM
  std::vector<std::pair<double, int>> events;  // a heap of (next event's G, SM)

  explicit OptReplay(const OptSplitInput& a)
      : in(a), block_bytes(2.0 * a.head_size * a.block_size * a.elem_bytes), hbm(kHbmFraction * a.dram_gbps * 1e3),
        sm(a.sm_count), cps(std::max(1, a.ctas_per_sm)) {
    for (int i = 0; i < in.num_seqs; ++i) kv_bytes += static_cast<double>(seq_blocks(i)) * block_bytes * in.units;
  }

  int seq_blocks(int i) const { return opt_attended_blocks(in, i); }
  double merge_us(int splits) const {
    if (splits <= 1) return 0;
    const int items = ceil_div(in.unit_heads * in.head_size, 4 * 128);
    return kM0 + kM1 * ceil_div(splits, opt_merge_splits(in.elem_bytes)) * items;
  }
  // What an SM streams with n CTAs streaming on it, each getting an equal share.
  static double sm_rate(int n) { return n == 0 ? 0.0 : std::min(n * kCtaBw, kSmBw); }
  // A lower bound of time_us: the DRAM rate for all bytes, one CTA alone for
  // the longest, after the start.
  double bound_us(int split_blocks, int splits) const {
    return kT0 + std::max(split_blocks * block_bytes / kCtaBw, kv_bytes / hbm) + merge_us(splits);
  }

  // The grid's time in us with splits CTAs of split_blocks blocks per
  // (sequence, unit); above `limit` it may stop early and return infinity.
  double time_us(int split_blocks, int splits, double limit) {
    const long long ctas = static_cast<long long>(in.num_seqs) * in.units * splits;
    const long long slots = static_cast<long long>(sm) * cps;
    if (ctas > kReplayWaves * slots) return closed_form_us(split_blocks, splits);
    // The CTAs in launch order.
    int seq = 0, unit = 0, split = 0, blocks = seq_blocks(0);
    double unlaunched = kv_bytes;
    auto launch_next = [&](std::size_t slot) {
      if (seq >= in.num_seqs) {
        left[slot] = -1;
        return;
      }
      const double bytes = std::min(split_blocks, std::max(0, blocks - split * split_blocks)) * block_bytes;
      unlaunched -= bytes;
      left[slot] = bytes;
      wait[slot] = bytes > 0 ? kT0 : kEmpty;
      if (++split == splits) {
        split = 0;
        if (++unit == in.units) {
          unit = 0;
          if (++seq < in.num_seqs) blocks = seq_blocks(seq);
        }
      }
    };
    left.assign(static_cast<std::size_t>(slots), -1.0);
    wait.assign(static_cast<std::size_t>(slots), 0.0);
    sm_g.assign(sm, 0.0);
    streaming.assign(sm, 0);
    for (long long k = 0; k < slots; ++k) launch_next(static_cast<std::size_t>(k % sm * cps + k / sm));
    // Progress time from SM s's last event to its next.
    auto next_event = [&](int s) {
      const double rate = streaming[s] ? sm_rate(streaming[s]) / streaming[s] : 0;
      double g = INFINITY;
      for (int c = 0; c < cps; ++c) {
        const std::size_t k = static_cast<std::size_t>(s) * cps + c;
        if (left[k] >= 0) g = std::min(g, wait[k] > 0 ? wait[k] : left[k] / rate);
      }
      return g;
    };
    const auto later = [](const std::pair<double, int>& x, const std::pair<double, int>& y) { return x.first > y.first; };
    events.clear();
    for (int s = 0; s < sm; ++s)
      if (const double g = next_event(s); g < INFINITY) events.push_back({g, s});
    std::make_heap(events.begin(), events.end(), later);
    const double merge = merge_us(splits);
    double g_now = 0, t = 0, asked = 0;  // progress time, real time, bytes per us the SMs ask for
    while (!events.empty()) {
      std::pop_heap(events.begin(), events.end(), later);
      const auto [g, s] = events.back();
      events.pop_back();
      t += (g - g_now) * std::max(1.0, asked / hbm);
      g_now = g;
      if (t + unlaunched / hbm + merge > limit) return INFINITY;
      const int before = streaming[s];
      const double dg = g - sm_g[s], rate = before ? sm_rate(before) / before : 0;
      sm_g[s] = g;
      int now = 0;
      for (int c = 0; c < cps; ++c) {
        const std::size_t k = static_cast<std::size_t>(s) * cps + c;
        if (left[k] < 0) continue;
        bool done;
        if (wait[k] > 0) {
          wait[k] = wait[k] - dg > 1e-9 ? wait[k] - dg : 0;
          done = wait[k] == 0 && left[k] == 0;
        } else {
          left[k] -= dg * rate;
          done = left[k] < 1e-3;
        }
        if (done) launch_next(k);
        now += left[k] >= 0 && wait[k] == 0;
      }
      streaming[s] = now;
      asked += sm_rate(now) - sm_rate(before);
      if (const double e = next_event(s); e < INFINITY) {
        events.push_back({g + e, s});
        std::push_heap(events.begin(), events.end(), later);
      }
    }
    return t + merge;
  }

  // Many waves: the bytes at the DRAM rate, or each slot's CTAs one after
  // another at a slot's rate, whichever is longer; then the start and the
  // ragged end.
  double closed_form_us(int split_blocks, int splits) const {
    const double slot_rate = std::min(kCtaBw, kSmBw / cps);
    double slot_us = 0;
    for (int i = 0; i < in.num_seqs; ++i) {
      const int blocks = seq_blocks(i);
      const int with_tokens = std::min(splits, ceil_div(blocks, split_blocks));
      slot_us += in.units * (with_tokens * kT0 + static_cast<double>(blocks) * block_bytes / slot_rate +
                             (splits - with_tokens) * kEmpty);
    }
    const double cta_us = split_blocks * block_bytes / kCtaBw;
    return kT0 + std::max(std::max(kv_bytes / hbm, slot_us / (static_cast<double>(sm) * cps)) + kTailCta * cta_us, cta_us) +
           merge_us(splits);
  }
};

inline OptSplit opt_choose_split(const OptSplitInput& a, int force_splits) {
  const int bps = a.blocks_per_step;
  const int blocks = ceil_div(a.max_context_len, a.block_size);
  const int max_splits = std::min(kOptMaxSplits, ceil_div(blocks, bps));
  auto split_blocks_for = [&](int s) { return ceil_div(ceil_div(blocks, s), bps) * bps; };
  int best_s = 1;
  if (force_splits <= 0 && !(a.dram_gbps > 0))
    throw std::invalid_argument("opt_choose_split: dram_gbps " + std::to_string(a.dram_gbps) +
                                " (accepted: > 0, the device's DRAM peak)");
  opt_check_context_lens(a);
  if (force_splits > 0) {
    best_s = std::min(force_splits, max_splits);
  } else {
    // Candidates: about four split counts per octave (the split sweep's
    // grid), each its own split. The replay runs in the order of a cheap
    // lower bound and stops where the bound passes 2% over the best time;
    // of the candidates within 2% of the best, the fewest splits win (less
    // workspace, merge and L2 traffic for a time the model cannot tell apart).
    struct Candidate {
      int splits, split_blocks;
      double bound, us;
    };
    Candidate c[64];
    int n = 0;
    OptReplay model(a);
    for (int k = 0;; ++k) {
      const int s = static_cast<int>(std::lround(std::exp2(k / 4.0)));
      if (s > max_splits) break;
      const int sb = split_blocks_for(s), s_eff = ceil_div(blocks, sb);
      if (n > 0 && c[n - 1].splits == s_eff) continue;
      c[n++] = {s_eff, sb, model.bound_us(sb, s_eff), INFINITY};
    }
    int order[64];
    for (int i = 0; i < n; ++i) order[i] = i;
    std::sort(order, order + n, [&](int x, int y) { return c[x].bound < c[y].bound; });
    double best = INFINITY;
    for (int i = 0; i < n && c[order[i]].bound <= 1.02 * best; ++i) {
      Candidate& k = c[order[i]];
      k.us = model.time_us(k.split_blocks, k.splits, 1.02 * best);
      best = std::min(best, k.us);
    }
    for (int i = 0; i < n; ++i)
      if (c[i].us <= 1.02 * best) {
        best_s = c[i].splits;
        break;
      }
  }
  OptSplit r;
  r.split_blocks = split_blocks_for(best_s);
  r.splits = ceil_div(blocks, r.split_blocks);
  return r;
}

// The last split planned, kept with everything it was planned from (every
// field of the input and each sequence's attended blocks, opt_attended_blocks:
// all the planner reads of a length). A replay costs tens of microseconds;
// a model's layers launch the same shape with the same lengths one after
// another, and a decode step adds one token to each sequence, which changes
// its blocks once in block_size steps: those calls find their split here.
// Any other difference plans again. Lengths are checked on every call, kept
// plan or not. One per host thread (plan_optimized keeps a thread_local one).
class OptSplitCache {
 public:
  OptSplit choose(const OptSplitInput& in, int force_splits) {
    opt_check_context_lens(in);
    if (holds(in, force_splits)) return split_;
    const OptSplit s = opt_choose_split(in, force_splits);  // throws on bad input: nothing kept
    valid_ = true;
    in_ = in;
    in_.context_lens = nullptr;  // blocks_ holds what is compared
    has_lens_ = in.context_lens != nullptr;
    blocks_.clear();
    if (has_lens_)
      for (int i = 0; i < in.num_seqs; ++i) blocks_.push_back(opt_attended_blocks(in, i));
    force_splits_ = force_splits;
    split_ = s;
    ++plans_;
    return s;
  }
  long long plans() const { return plans_; }  // how many times choose planned (missed)

 private:
  bool holds(const OptSplitInput& in, int force_splits) const {
    OptSplitInput fields = in;  // every field but the lengths, which blocks_ stands for
    fields.context_lens = nullptr;
    if (!valid_ || force_splits_ != force_splits || has_lens_ != (in.context_lens != nullptr) || !(fields == in_))
      return false;
    for (int i = 0; has_lens_ && i < in.num_seqs; ++i)
      if (blocks_[i] != opt_attended_blocks(in, i)) return false;
    return true;
  }
  bool valid_ = false, has_lens_ = false;
  OptSplitInput in_;
  std::vector<int> blocks_;
  int force_splits_ = 0;
  OptSplit split_;
  long long plans_ = 0;
};

// Resident CTAs per SM from shared memory alone, on an sm_90 SM (228 KB per
// SM, 1 KB reserved per CTA, at most 16 CTAs of 128 threads). The trace host
// model uses it when it has no GPU to ask; stage 8 is shared-memory bound
// (>= 96 KB per CTA, registers allow 2 CTAs of 128 threads at any count).
inline int opt_ctas_per_sm_by_smem(int smem_bytes) {
  constexpr int kSmemPerSm = 228 * 1024, kReserved = 1024;
  return std::max(1, std::min(16, kSmemPerSm / (smem_bytes + kReserved)));
}

}  // namespace pa
