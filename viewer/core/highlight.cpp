#include "core/highlight.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/names.hpp"

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

int count_sectors(std::span<const std::pair<std::int64_t, int>> ranges) {
  std::unordered_set<std::int64_t> s;
  for (auto [off, n] : ranges) {
    if (off < 0 || n <= 0) continue;
    for (std::int64_t q = off / 32; q <= (off + n - 1) / 32; ++q) s.insert(q);
  }
  return static_cast<int>(s.size());
}

std::int64_t unique_bytes(std::span<const std::pair<std::int64_t, int>> ranges) {
  std::vector<std::pair<std::int64_t, std::int64_t>> iv;
  for (auto [off, n] : ranges)
    if (off >= 0 && n > 0) iv.push_back({off, off + n});
  std::sort(iv.begin(), iv.end());
  std::int64_t total = 0, cur_b = -1, cur_e = -1;
  for (auto [b, e] : iv) {
    if (b > cur_e) {
      total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  total += cur_e - cur_b;
  return total;
}

int count_wavefronts(std::span<const std::pair<std::int64_t, int>> ranges) {
  if (ranges.empty()) return 0;
  const int width = std::max(4, ranges.front().second);
  const std::size_t lanes_per_phase = std::max<std::size_t>(1, 128 / width);
  int total = 0;
  for (std::size_t p = 0; p < ranges.size(); p += lanes_per_phase) {
    std::map<int, std::set<std::int64_t>> words_in_bank;
    for (std::size_t i = p; i < std::min(ranges.size(), p + lanes_per_phase); ++i) {
      auto [off, n] = ranges[i];
      if (off < 0 || n <= 0) continue;
      for (std::int64_t w = off / 4; w <= (off + n - 1) / 4; ++w) words_in_bank[static_cast<int>(w % 32)].insert(w);
    }
    std::size_t most = 0;
    for (auto& [bank, words] : words_in_bank) most = std::max(most, words.size());
    total += static_cast<int>(most);
  }
  return total;
}

std::vector<Request> requests_of_step(const std::vector<trace::Event>& ev, std::span<const std::uint32_t> step_events) {
  // Group by (warp, occurrence of this thread within the step); step events
  // are ordered by (warp, lane, seq_in_thread).
  std::map<std::pair<int, int>, std::vector<std::uint32_t>> groups;
  int pw = -1, pl = -1, occ = 0;
  for (std::uint32_t i : step_events) {
    const auto& e = ev[i];
    const bool mem = e.op == trace::Op::global_load || e.op == trace::Op::global_store ||
                     e.op == trace::Op::shared_load || e.op == trace::Op::shared_store;
    if (!mem) continue;
    if (e.warp != pw || e.lane != pl) occ = 0;
    pw = e.warp;
    pl = e.lane;
    groups[{e.warp, occ++}].push_back(i);
  }
  std::vector<Request> out;
  for (auto& [key, idxs] : groups) {
    Request r;
    const auto& f = ev[idxs.front()];
    r.warp = key.first;
    r.op = f.op;
    r.tensor = f.tensor;
    r.access_bytes = f.bytes;
    std::vector<std::pair<std::int64_t, int>> ranges;
    int pl2 = -1;
    for (auto i : idxs) {
      ranges.push_back({ev[i].byte_offset, ev[i].bytes});
      if (ev[i].lane != pl2) ++r.lanes;
      pl2 = ev[i].lane;
    }
    r.bytes = unique_bytes(ranges);
    if (r.global()) {
      r.sectors = count_sectors(ranges);
      r.ideal_sectors = static_cast<int>((r.bytes + 31) / 32);
    } else {
      r.wavefronts = count_wavefronts(ranges);
      r.ideal_wavefronts = static_cast<int>(std::max<std::int64_t>(1, (r.bytes + 127) / 128));
    }
    out.push_back(r);
  }
  return out;
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
    default: return {0.7f, 0.7f, 0.75f, 1};
  }
}

std::uint32_t to_u32(Rgba c) {
  auto b = [](float v) { return static_cast<std::uint32_t>(std::clamp(v, 0.0f, 1.0f) * 255.0f + 0.5f); };
  return (b(c.a) << 24) | (b(c.b) << 16) | (b(c.g) << 8) | b(c.r);
}

}  // namespace pa::viewer
