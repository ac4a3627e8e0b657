#include "core/highlight.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/names.hpp"
#include "pa/trace/analysis.hpp"

namespace pa::viewer {

bool Focus::matches(const trace::Event& e) const {
  switch (kind) {
    case Kind::none: return true;
    case Kind::thread: return e.warp == warp && e.lane == lane;
    case Kind::warp: return e.warp == warp;
    case Kind::element: return touches(e, tensor, byte_begin, bytes);
  }
  return false;
}

std::string Focus::describe() const {
  switch (kind) {
    case Kind::none: return "nothing selected";
    case Kind::thread:
      return "thread warp " + std::to_string(warp) + " lane " + std::to_string(lane) + " (tid " +
             std::to_string(warp * 32 + lane) + ")";
    case Kind::warp: return "warp " + std::to_string(warp);
    case Kind::element:
      return std::string(tensor_name(tensor)) + " bytes [" + std::to_string(byte_begin) + ", " +
             std::to_string(byte_begin + bytes) + ")";
  }
  return {};
}

bool touches(const trace::Event& e, trace::Tensor t, std::int64_t byte_begin, int bytes) {
  return e.tensor == t && e.byte_offset >= 0 && e.bytes > 0 && overlaps(e.byte_offset, e.bytes, byte_begin, bytes);
}

std::vector<Touch> who_touches(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b,
                               trace::Tensor t, std::int64_t byte_begin, int bytes) {
  std::vector<Touch> out;
  for (std::uint32_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (!touches(e, t, byte_begin, bytes) || idx.block_of_event(i) != b) continue;
    out.push_back({idx.step_of_event(i), e.warp, e.lane, e.step, e.op});
  }
  std::sort(out.begin(), out.end(), [](const Touch& a, const Touch& c) {
    if (a.step != c.step) return a.step < c.step;
    if (a.warp != c.warp) return a.warp < c.warp;
    return a.lane < c.lane;
  });
  return out;
}

std::vector<int> steps_of_thread(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b, int warp,
                                 int lane) {
  std::vector<int> out;
  for (std::uint32_t i = 0; i < ev.size(); ++i) {
    const auto& e = ev[i];
    if (e.warp != warp || (lane >= 0 && e.lane != lane) || idx.block_of_event(i) != b) continue;
    out.push_back(idx.step_of_event(i));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<Request> requests_of_step(const std::vector<trace::Event>& ev, std::span<const std::uint32_t> step_events) {
  // The trace library's request model (trace/ANALYSIS.md), so that the viewer
  // shows the numbers the CLI and the tests report.
  std::vector<trace::Event> local;
  local.reserve(step_events.size());
  for (std::uint32_t i : step_events) local.push_back(ev[i]);
  std::vector<Request> out;
  for (const trace::MemoryRequest& m : trace::memory_requests(local)) {
    Request r;
    r.warp = m.key.warp;
    r.op = m.key.op;
    r.tensor = m.key.tensor;
    r.lanes = m.lanes;
    r.access_bytes = m.max_access_bytes;
    r.bytes = m.unique_bytes;
    r.sectors = m.sectors;
    r.ideal_sectors = m.ideal_sectors;
    r.l2_requests = m.l2_requests;
    r.ideal_l2_requests = m.ideal_l2_requests;
    r.wavefronts = m.wavefronts;
    r.ideal_wavefronts = m.ideal_wavefronts;
    for (std::uint32_t k : m.events) r.events.push_back(step_events[k]);
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const Request& a, const Request& c) { return a.warp < c.warp; });
  return out;
}

bool StateFlow::any() const {
  return states_read || states_written || output_written || counter_atomics ||
         std::any_of(part_read.begin(), part_read.end(), [](char c) { return c != 0; }) ||
         std::any_of(part_written.begin(), part_written.end(), [](char c) { return c != 0; });
}

int partition_of(const PartitionGeometry& g, trace::Tensor t, std::int64_t byte, int seq, int head) {
  if (byte < 0 || g.max_partitions <= 0 || g.head_size <= 0) return -1;
  const std::int64_t idx = byte / 4;  // float buffers
  std::int64_t stat = -1;
  if (t == trace::Tensor::part_max || t == trace::Tensor::part_sum) stat = idx;
  else if (t == trace::Tensor::part_out) stat = idx / g.head_size;
  else return -1;
  const std::int64_t row = g.stat_offset(seq, head, 0);
  if (stat < row || stat >= row + g.max_partitions) return -1;
  return static_cast<int>(stat - row);
}

StateFlow state_flow(const std::vector<trace::Event>& ev, std::span<const std::uint32_t> step_events,
                     const PartitionGeometry& g, int seq, int head) {
  StateFlow f;
  f.part_read.assign(std::max(0, g.max_partitions), 0);
  f.part_written.assign(std::max(0, g.max_partitions), 0);
  for (std::uint32_t i : step_events) {
    const trace::Event& e = ev[i];
    const bool load = e.op == trace::Op::global_load;
    const bool store = e.op == trace::Op::global_store;
    switch (e.tensor) {
      case trace::Tensor::part_max: case trace::Tensor::part_sum: case trace::Tensor::part_out: {
        const int p = partition_of(g, e.tensor, e.byte_offset, seq, head);
        if (p >= 0 && load) f.part_read[p] = 1;
        if (p >= 0 && store) f.part_written[p] = 1;
        break;
      }
      case trace::Tensor::state_out: case trace::Tensor::state_lse: case trace::Tensor::workspace:
        f.states_read += load;
        f.states_written += store;
        break;
      case trace::Tensor::prefix_out: case trace::Tensor::prefix_lse:
        f.states_read += load;
        f.prefix_read += load;
        f.states_written += store;
        break;
      case trace::Tensor::suffix_out: case trace::Tensor::suffix_lse:
        f.states_read += load;
        f.suffix_read += load;
        f.states_written += store;
        break;
      case trace::Tensor::output:
        f.output_written |= store;
        break;
      case trace::Tensor::counter:
        f.counter_atomics += e.op == trace::Op::atomic;
        break;
      default:
        break;
    }
  }
  return f;
}

std::vector<int> first_store_steps(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b, trace::Tensor t) {
  std::vector<int> first;
  for (int k = 0; k < idx.num_steps(b); ++k)
    for (std::uint32_t i : idx.events_of(b, k)) {
      const trace::Event& e = ev[i];
      if (e.tensor != t || e.op != trace::Op::shared_store || e.byte_offset < 0 || e.bytes <= 0) continue;
      const std::size_t w0 = static_cast<std::size_t>(e.byte_offset / 4);
      const std::size_t w1 = static_cast<std::size_t>((e.byte_offset + e.bytes - 1) / 4);
      if (first.size() <= w1) first.resize(w1 + 1, -1);
      for (std::size_t w = w0; w <= w1; ++w)
        if (first[w] < 0) first[w] = k;  // steps are visited in replay order
    }
  return first;
}

std::optional<std::pair<int, int>> stored_dims(const std::vector<trace::Event>& ev, const TraceIndex& idx, int b, int k,
                                               trace::Tensor t, std::int64_t byte, int elem_bytes) {
  std::optional<std::pair<int, int>> r;
  if (elem_bytes <= 0 || k < 0 || k >= idx.num_steps(b)) return r;
  for (std::uint32_t i : idx.events_of(b, k)) {
    const trace::Event& e = ev[i];
    if (e.tensor != t || e.op != trace::Op::shared_store || e.byte_offset < 0 || e.dim_count <= 0 ||
        static_cast<std::int64_t>(e.dim_count) * elem_bytes != e.bytes)
      continue;
    const std::int64_t lo = std::max<std::int64_t>(byte, e.byte_offset);
    const std::int64_t hi = std::min<std::int64_t>(byte + 4, e.byte_offset + e.bytes);
    if (lo >= hi) continue;
    const int d0 = e.dim_begin + static_cast<int>((lo - e.byte_offset) / elem_bytes);
    const int d1 = e.dim_begin + static_cast<int>((hi - 1 - e.byte_offset) / elem_bytes);
    r = r ? std::pair<int, int>{std::min(r->first, d0), std::max(r->second, d1)} : std::pair<int, int>{d0, d1};
  }
  return r;
}

namespace {
Rgba hsv(float h, float s, float v) {
  h = h - std::floor(h);
  const float i = std::floor(h * 6.0f), f = h * 6.0f - i;
  const float p = v * (1 - s), q = v * (1 - f * s), t = v * (1 - (1 - f) * s);
  switch (static_cast<int>(i) % 6) {
    case 0: return {v, t, p, 1};
    case 1: return {q, v, p, 1};
    case 2: return {p, v, t, 1};
    case 3: return {p, q, v, 1};
    case 4: return {t, p, v, 1};
    default: return {v, p, q, 1};
  }
}
}  // namespace

Rgba thread_color(int warp, int lane, int num_warps) {
  const float hue = 0.83f * static_cast<float>(lane) / 32.0f;  // red .. magenta, no wrap-around
  const float v = num_warps > 1 ? 1.0f - 0.28f * static_cast<float>(warp % num_warps) / (num_warps - 1) : 1.0f;
  return hsv(hue, 0.62f, v);
}

Rgba tensor_color(trace::Tensor t) {
  switch (t) {
    case trace::Tensor::q: case trace::Tensor::q_smem: return {0.35f, 0.75f, 0.95f, 1};
    case trace::Tensor::k_cache: return {0.95f, 0.65f, 0.25f, 1};
    case trace::Tensor::v_cache: return {0.55f, 0.85f, 0.45f, 1};
    case trace::Tensor::logits: return {0.9f, 0.5f, 0.8f, 1};
    // K/V tiles staged in shared memory: between K's orange and V's green.
    case trace::Tensor::kv_smem: return {0.80f, 0.80f, 0.30f, 1};
    case trace::Tensor::red_scratch: case trace::Tensor::out_scratch: return {0.60f, 0.62f, 0.85f, 1};
    case trace::Tensor::output: case trace::Tensor::stage_out: return {0.45f, 0.90f, 0.80f, 1};
    case trace::Tensor::part_out: case trace::Tensor::part_max: case trace::Tensor::part_sum: return {0.95f, 0.55f, 0.45f, 1};
    case trace::Tensor::state_out: case trace::Tensor::state_lse: return {0.75f, 0.55f, 0.95f, 1};
    case trace::Tensor::prefix_out: case trace::Tensor::prefix_lse: return {0.55f, 0.65f, 1.00f, 1};
    case trace::Tensor::suffix_out: case trace::Tensor::suffix_lse: return {0.95f, 0.50f, 0.75f, 1};
    // Split-KV workspace (unnormalized O, max, sum) and its arrival counters.
    case trace::Tensor::workspace: return {0.85f, 0.60f, 0.35f, 1};
    case trace::Tensor::counter: return {0.95f, 0.35f, 0.35f, 1};
    case trace::Tensor::alibi_slopes: return {0.95f, 0.85f, 0.45f, 1};
    // A CSR table's row bounds and last-page lengths: beside the block table's.
    case trace::Tensor::kv_indptr: case trace::Tensor::kv_last_page_len: return {0.70f, 0.80f, 0.95f, 1};
    default: return {0.7f, 0.7f, 0.75f, 1};
  }
}

Rgba phase_color(trace::Phase p) {
  using P = trace::Phase;
  using palette::rgb8;
  switch (p) {
    // The v1 kernel's steps and stage 6's (the cascade's suffix kernel runs them too).
    case P::q_to_smem: case P::opt_q_frag: return rgb8(150, 200, 250);
    case P::qk: case P::opt_qk_mma: return rgb8(240, 150, 60);
    case P::softmax: case P::opt_online_softmax: return rgb8(235, 215, 85);
    case P::lv: case P::opt_pv_mma: return rgb8(110, 200, 110);
    case P::warp_reduce: case P::opt_warp_merge: return rgb8(70, 190, 190);
    case P::partition_store: case P::opt_merge_load_stats: return rgb8(170, 130, 230);
    case P::partition_reduce: case P::opt_merge_weights: return rgb8(220, 110, 200);
    // The cascade's prefix kernel: deeper shades of the same hues, since its
    // timeline also holds the suffix kernel's qk, softmax and lv.
    case P::prefix_load: return rgb8(35, 80, 150);
    case P::prefix_qk: return rgb8(195, 100, 45);
    case P::prefix_softmax: return rgb8(185, 165, 40);
    case P::prefix_pv: return rgb8(50, 145, 80);
    case P::prefix_store: return rgb8(125, 90, 185);
    case P::merge: case P::opt_split_arrive: return rgb8(240, 120, 160);
    // Stage 8's own.
    case P::opt_prologue: return rgb8(140, 145, 160);
    case P::opt_pipeline_issue: return rgb8(70, 120, 225);
    case P::opt_pipeline_wait: return rgb8(225, 65, 60);
    case P::opt_merge_sum_store: case P::opt_merge_states: return rgb8(190, 150, 110);
    case P::count_: break;
  }
  return rgb8(128, 128, 128);
}

const char* access_verb(trace::Op o) {
  switch (o) {
    case trace::Op::global_load: case trace::Op::shared_load: return "ld";
    case trace::Op::global_store: case trace::Op::shared_store: return "st";
    case trace::Op::async_copy: return "cp.async";  // global -> shared, no registers
    case trace::Op::atomic: return "atom";          // read-modify-write
    case trace::Op::mma: return "mma";
    case trace::Op::shuffle: return "shfl";
    case trace::Op::barrier: return "bar";
    case trace::Op::compute: return "op";
  }
  return "?";
}

bool is_shared_tensor(trace::Tensor t) {
  switch (t) {
    case trace::Tensor::q_smem: case trace::Tensor::logits: case trace::Tensor::red_scratch:
    case trace::Tensor::out_scratch: case trace::Tensor::kv_smem:
      return true;
    default:
      return false;
  }
}

bool is_global_buffer(trace::Tensor t) {
  switch (t) {
    case trace::Tensor::output: case trace::Tensor::part_out: case trace::Tensor::part_max:
    case trace::Tensor::part_sum: case trace::Tensor::state_out: case trace::Tensor::state_lse:
    case trace::Tensor::stage_out: case trace::Tensor::workspace: case trace::Tensor::counter:
    case trace::Tensor::context_lens: case trace::Tensor::prefix_out: case trace::Tensor::prefix_lse:
    case trace::Tensor::suffix_out: case trace::Tensor::suffix_lse: case trace::Tensor::alibi_slopes:
    case trace::Tensor::kv_indptr: case trace::Tensor::kv_last_page_len:
      return true;
    default:
      return false;
  }
}

std::uint32_t to_u32(Rgba c) {
  auto b = [](float v) { return static_cast<std::uint32_t>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f); };
  return (b(c.a) << 24) | (b(c.b) << 16) | (b(c.g) << 8) | b(c.r);
}

}  // namespace pa::viewer
