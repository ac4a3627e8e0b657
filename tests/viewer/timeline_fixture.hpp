// A made-up timeline for the viewer's timeline tests and for its frame
// benchmark (pa_viewer_timeline_fixture writes one to a file). It is a TEST
// FIXTURE, never a measurement: its source says so, and the Timeline panel
// shows the source first. Shaped like a stage 8 launch so that the panel's
// every feature has something to show: blocks of `warps` warps placed on the
// SMs in waves, two resident per SM at a time; each warp runs the prologue,
// the Q fragments, `iters` pipeline iterations (issue, wait, QK mma, online
// softmax, PV mma) and the warp merge; every third block also runs the split
// merge. Durations vary by a hash of (block, warp, step), so the same shape
// always gives the same spans.
#pragma once
#include <cstdint>
#include <string>

#include "pa/trace/timeline_file.hpp"

namespace pa::viewer::test {

struct FixtureShape {
  int sms = 8;
  int blocks = 12;
  int warps = 4;
  int iters = 6;
  std::uint64_t dropped = 0;  // the header's dropped_spans
  bool overhead = true;       // fill in untimed_ns / timed_ns
};

inline constexpr const char* kFixtureSource = "TEST FIXTURE (made up by the viewer tests, not measured)";
inline constexpr std::uint32_t kFixtureClockKhz = 1'980'000;

// 0 .. 255 from (a, b, c): the fixture's jitter.
inline std::uint64_t fixture_jitter(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xBF58476D1CE4E5B9ull ^ c * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 29;
  return x & 0xff;
}

inline trace::TimelineData fixture_timeline(const FixtureShape& f) {
  using P = trace::Phase;
  trace::TimelineData d;
  trace::TimelineHeader& h = d.header;
  h.spec.num_heads = 8;
  h.spec.num_kv_heads = 2;
  h.spec.context_lens = {4096};
  h.stage = trace::Stage::optimized;
  h.source = kFixtureSource;
  h.revision = "fixture";
  h.launch = "fixture: " + std::to_string(f.blocks) + " blocks x " + std::to_string(32 * f.warps) + " threads";
  h.sm_count = static_cast<std::uint32_t>(f.sms);
  h.sm_clock_khz = kFixtureClockKhz;
  h.globaltimer_resolution_ns = 32;
  h.dropped_spans = f.dropped;
  const std::uint64_t base = 1'000'000'000'000ull;  // %globaltimer is a large number
  std::uint64_t block_ns = 0;                         // one block's length, for the waves
  for (int b = 0; b < f.blocks; ++b) {
    const int sm = b % f.sms;
    const int wave = b / (2 * f.sms);
    const std::uint64_t start = base + static_cast<std::uint64_t>(wave) * (block_ns + 200) + fixture_jitter(b, 0, 0) * 2;
    std::uint64_t block_end = start;
    for (int w = 0; w < f.warps; ++w) {
      std::uint64_t t = start + fixture_jitter(b, w, 1);
      int step = 0;
      auto span = [&](P phase, int iter, std::uint64_t ns) {
        ns += fixture_jitter(b, w, 100 + step++) % (ns / 2 + 1);
        trace::Span s{};
        s.t_begin_ns = t;
        s.t_end_ns = t + ns;
        s.clk_begin = (t - base) * kFixtureClockKhz / 1'000'000 + 1'000'000'000ull * static_cast<std::uint64_t>(sm);
        s.clk_end = s.clk_begin + ns * kFixtureClockKhz / 1'000'000;
        s.block = static_cast<std::uint32_t>(b);
        s.sm = static_cast<std::uint16_t>(sm);
        s.warp = static_cast<std::uint16_t>(w);
        s.stage = h.stage;
        s.phase = phase;
        s.kernel = trace::KernelRole::main;
        s.iter = iter;
        d.spans.push_back(s);
        t += ns;
      };
      span(P::opt_prologue, -1, 300);
      span(P::opt_q_frag, -1, 120);
      for (int j = 0; j < f.iters; ++j) {
        span(P::opt_pipeline_issue, j, 40);
        span(P::opt_pipeline_wait, j, 100 + fixture_jitter(b, w, j) * 2);
        span(P::opt_qk_mma, j, 150);
        span(P::opt_online_softmax, j, 90);
        span(P::opt_pv_mma, j, 160);
      }
      span(P::opt_warp_merge, -1, 250);
      if (b % 3 == 0) {
        span(P::opt_split_arrive, -1, 60);
        span(P::opt_merge_states, -1, 300);
      }
      block_end = std::max(block_end, t);
    }
    block_ns = std::max(block_ns, block_end - start);
  }
  if (f.overhead) {
    std::uint64_t last = base;
    for (const trace::Span& s : d.spans) last = std::max(last, s.t_end_ns);
    h.timed_ns = last - base;
    h.untimed_ns = h.timed_ns * 94 / 100;
  }
  return d;
}

}  // namespace pa::viewer::test
