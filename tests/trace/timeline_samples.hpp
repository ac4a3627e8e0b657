// Synthetic timelines for the timeline file, export and command-line tests.
// Made-up spans, shaped like a stage 6 run (partition blocks and the reduce
// on a few SMs) so that every field varies; they are test fixtures, never
// measurements (measured timelines come from a GPU and name it as source).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "pa/trace/timeline_file.hpp"

namespace pa::trace::testing {

inline Span sample_span(int i) {
  Span s{};
  // Four warps per block, seven blocks, on five SMs; every phase and role in turn.
  s.warp = static_cast<std::uint16_t>(i % 4);
  s.block = static_cast<std::uint32_t>(i / 4 % 7);
  s.sm = static_cast<std::uint16_t>((s.block * 3) % 5);
  s.stage = Stage::v2_partition;
  s.phase = static_cast<Phase>(i % static_cast<int>(Phase::count_));
  s.kernel = static_cast<KernelRole>(i / 28 % static_cast<int>(KernelRole::count_));
  s.iter = i % 6 - 1;
  s.t_begin_ns = 1'700'000'000'000'000'000ull + 1000ull * static_cast<std::uint64_t>(i) + 7;
  s.t_end_ns = s.t_begin_ns + 250 + 37ull * static_cast<std::uint64_t>(i % 9);
  s.clk_begin = 5'000'000'000ull + 1900ull * static_cast<std::uint64_t>(i);
  s.clk_end = s.clk_begin + 475 + 70ull * static_cast<std::uint64_t>(i % 9);
  return s;
}

inline TimelineData sample_timeline(int num_spans = 6) {
  TimelineData d;
  TimelineHeader& h = d.header;
  h.spec.dtype = DType::bf16;
  h.spec.head_size = 128;
  h.spec.block_size = 16;
  h.spec.num_heads = 4;
  h.spec.num_kv_heads = 2;
  h.spec.context_lens = {700, 33};
  h.spec.partition_size = 256;
  h.spec.seed = 9;
  h.stage = Stage::v2_partition;
  h.source = "test fixture (not a GPU)";
  h.revision = "v0-test";
  h.launch = "grid 4x2x3 + reduce 4x2";
  h.sm_count = 5;
  h.sm_clock_khz = 1'980'000;
  h.globaltimer_resolution_ns = 32;
  h.untimed_ns = 41'250;
  h.timed_ns = 43'875;
  for (int i = 0; i < num_spans; ++i) d.spans.push_back(sample_span(i));
  return d;
}

inline bool same_span(const Span& a, const Span& b) {
  return std::memcmp(&a, &b, sizeof(Span)) == 0;  // Span has no padding (48 = sum of the fields)
}

}  // namespace pa::trace::testing
