// Small, valid traces for the file-format tests and the fuzz drivers.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "pa/trace/trace_file.hpp"

namespace pa::trace::testing {

inline Event sample_event(int i) {
  Event e{};
  e.stage = Stage::qk;
  e.step = (i % 3 == 0) ? Step::k_load : (i % 3 == 1) ? Step::qk_dot : Step::barrier;
  e.op = (i % 3 == 0) ? Op::global_load : (i % 3 == 1) ? Op::compute : Op::barrier;
  e.tensor = (i % 3 == 0) ? Tensor::k_cache : Tensor::none;
  e.warp = static_cast<std::uint16_t>(i % 4);
  e.lane = static_cast<std::uint16_t>((i * 7) % 32);
  e.seq = i % 2;
  e.head = i % 4;
  e.partition = 0;
  e.kv_head = i % 2;
  e.iter = i % 5 - 1;
  e.epoch = i / 3;
  e.seq_in_thread = i;
  e.token = (i * 3) % 20;
  e.logical_block = e.token / 16;
  e.physical_block = (i * 5) % 7;
  e.dim_begin = (i % 3 == 0) ? (i * 4) % 128 : -1;
  e.dim_count = (i % 3 == 0) ? 4 : 0;
  e.src_lane = -1;  // no shuffles among the samples
  e.lane_iter = static_cast<std::int8_t>((i % 3 == 0) ? i % 2 : -1);
  e.byte_offset = (i % 3 == 0) ? 1024 * i + 8 : -1;
  e.bytes = (i % 3 == 0) ? 8 : 0;
  e.value = (i % 3 == 1) ? 0.25f * i : std::nanf("");
  return e;
}

inline TraceData sample_trace(int num_events = 3) {
  TraceData d;
  d.header.spec.dtype = DType::f16;
  d.header.spec.head_size = 128;
  d.header.spec.block_size = 16;
  d.header.spec.num_heads = 4;
  d.header.spec.num_kv_heads = 2;
  d.header.spec.context_lens = {20, 7};
  d.header.spec.partition_size = 512;
  d.header.spec.seed = 42;
  d.header.stage = Stage::qk;
  d.header.source = kHostModelSource;
  d.header.revision = "v0-test";
  for (int i = 0; i < num_events; ++i) d.events.push_back(sample_event(i));
  return d;
}

// The writer's checksum (FNV-1a 64 over every byte before it), recomputed
// after a mutation so that mutated files also reach the field checks.
inline void fix_checksum(std::vector<std::uint8_t>& b) {
  if (b.size() < 8) return;
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < b.size() - 8; ++i) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  for (int i = 0; i < 8; ++i) b[b.size() - 8 + i] = static_cast<std::uint8_t>(h >> (8 * i));
}

inline bool same_event(const Event& a, const Event& b) {
  return std::memcmp(&a, &b, sizeof(Event)) == 0;  // Event has no padding (72 = sum of the fields)
}

}  // namespace pa::trace::testing
