// Coalescing and bank-conflict analyses (model in trace/ANALYSIS.md).
#include "pa/trace/analysis.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace pa::trace {

bool is_memory_event(const Event& e) {
  return (e.op == Op::global_load || e.op == Op::async_copy || e.op == Op::global_store || e.op == Op::shared_load ||
          e.op == Op::shared_store) &&
         e.bytes > 0 && e.byte_offset >= 0;
}

double MemoryRequest::efficiency() const {
  const int actual = shared ? wavefronts : sectors;
  const int ideal = shared ? ideal_wavefronts : ideal_sectors;
  return actual > 0 ? static_cast<double>(ideal) / actual : 1.0;
}

namespace {
std::int64_t unique_bytes_of(std::span<const LaneAccess> a) {
  // Union of byte ranges: sort by start and merge.
  std::vector<std::pair<std::int64_t, std::int64_t>> r;
  r.reserve(a.size());
  for (const auto& x : a) r.emplace_back(x.byte_offset, x.byte_offset + x.bytes);
  std::sort(r.begin(), r.end());
  std::int64_t total = 0, cur_b = 0, cur_e = -1;
  for (auto [b, e] : r) {
    if (b > cur_e) {
      if (cur_e > cur_b) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_b) total += cur_e - cur_b;
  return total;
}
}  // namespace

int global_sectors(std::span<const LaneAccess> accesses) {
  std::set<std::int64_t> s;
  for (const auto& a : accesses) {
    if (a.bytes <= 0) continue;
    for (std::int64_t sec = a.byte_offset / kSectorBytes; sec <= (a.byte_offset + a.bytes - 1) / kSectorBytes; ++sec)
      s.insert(sec);
  }
  return static_cast<int>(s.size());
}

int global_l2_requests(std::span<const LaneAccess> accesses) {
  std::set<std::int64_t> lines;
  for (const auto& a : accesses) {
    if (a.bytes <= 0) continue;
    for (std::int64_t l = a.byte_offset / kLineBytes; l <= (a.byte_offset + a.bytes - 1) / kLineBytes; ++l) lines.insert(l);
  }
  return static_cast<int>(lines.size());
}

WavefrontCount shared_wavefronts(std::span<const LaneAccess> accesses) {
  int width = 0;
  for (const auto& a : accesses) width = std::max(width, a.bytes);
  if (width <= 0) return {};
  const int phases = width <= 4 ? 1 : width <= 8 ? 2 : 4;
  const int lanes_per_phase = 32 / phases;
  WavefrontCount w;
  for (int p = 0; p < phases; ++p) {
    std::vector<LaneAccess> in_phase;
    for (const auto& a : accesses) {
      if (a.lane / lanes_per_phase == p && a.bytes > 0) in_phase.push_back(a);
    }
    if (in_phase.empty()) continue;
    std::set<std::int64_t> banks_words[kSmemBanks];
    for (const auto& a : in_phase) {
      for (std::int64_t word = a.byte_offset / kSmemBankBytes;
           word <= (a.byte_offset + a.bytes - 1) / kSmemBankBytes; ++word) {
        banks_words[word % kSmemBanks].insert(word);
      }
    }
    int worst = 1;
    for (const auto& s : banks_words) worst = std::max(worst, static_cast<int>(s.size()));
    w.wavefronts += worst;
    const std::int64_t ub = unique_bytes_of(in_phase);
    w.ideal += std::max<int>(1, static_cast<int>((ub + kWavefrontBytes - 1) / kWavefrontBytes));
  }
  return w;
}

namespace {
// Where in shared memory the parts of one source sector land: one [begin, end)
// per lane's piece of it, or (-1, -1) where the destination is unknown.
using Pieces = std::vector<std::pair<std::int64_t, std::int64_t>>;

// One warp's cp.async cut into pieces, per 32-byte source sector (in order,
// so the sectors of one 128-byte line are neighbours).
std::map<std::int64_t, Pieces> copy_pieces_by_sector(std::span<const CopyAccess> copies) {
  std::map<std::int64_t, Pieces> pieces;
  for (const auto& c : copies) {
    if (c.bytes <= 0) continue;
    for (std::int64_t sec = c.global_offset / kSectorBytes; sec <= (c.global_offset + c.bytes - 1) / kSectorBytes;
         ++sec) {
      const std::int64_t b = std::max(c.global_offset, sec * kSectorBytes) - c.global_offset;
      const std::int64_t e = std::min(c.global_offset + c.bytes, (sec + 1) * kSectorBytes) - c.global_offset;
      if (c.shared_offset < 0)
        pieces[sec].emplace_back(-1, -1);
      else
        pieces[sec].emplace_back(c.shared_offset + b, c.shared_offset + e);
    }
  }
  return pieces;
}

// Whether every piece lands inside one aligned span of `span_bytes` of shared
// memory; a piece whose destination is unknown counts as landing whole.
bool lands_whole(const Pieces& ps, int span_bytes) {
  if (std::any_of(ps.begin(), ps.end(), [](const auto& p) { return p.first < 0; })) return true;
  const std::int64_t span = ps.front().first / span_bytes;
  return std::all_of(ps.begin(), ps.end(), [&](const auto& p) {
    return p.first / span_bytes == span && (p.second - 1) / span_bytes == span;
  });
}

// The sectors L2 delivers for one source sector: once when it lands whole,
// otherwise once per piece.
int sector_deliveries(const Pieces& ps) { return lands_whole(ps, kSectorBytes) ? 1 : static_cast<int>(ps.size()); }
}  // namespace

int async_copy_sectors(std::span<const CopyAccess> copies) {
  int sectors = 0;
  for (const auto& [sec, ps] : copy_pieces_by_sector(copies)) sectors += sector_deliveries(ps);
  return sectors;
}

int async_copy_l2_requests(std::span<const CopyAccess> copies) {
  constexpr int kSectorsPerLine = kLineBytes / kSectorBytes;
  const auto by_sector = copy_pieces_by_sector(copies);
  int requests = 0;
  for (auto it = by_sector.begin(); it != by_sector.end();) {
    // One line's sectors: one request when the line lands whole, otherwise one
    // per sector delivered (a sector's own request, or one per piece).
    const std::int64_t line = it->first / kSectorsPerLine;
    Pieces line_pieces;
    int deliveries = 0;
    for (; it != by_sector.end() && it->first / kSectorsPerLine == line; ++it) {
      line_pieces.insert(line_pieces.end(), it->second.begin(), it->second.end());
      deliveries += sector_deliveries(it->second);
    }
    requests += lands_whole(line_pieces, kLineBytes) ? 1 : deliveries;
  }
  return requests;
}

std::vector<MemoryRequest> memory_requests(std::span<const Event> events) {
  // Occurrence numbering needs each lane's events in program order.
  std::vector<std::uint32_t> order;
  order.reserve(events.size());
  for (std::uint32_t i = 0; i < events.size(); ++i) {
    if (is_memory_event(events[i])) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    const Event& x = events[a];
    const Event& y = events[b];
    return std::tie(x.seq, x.head, x.partition, x.warp, x.lane, x.epoch, x.seq_in_thread, a) <
           std::tie(y.seq, y.head, y.partition, y.warp, y.lane, y.epoch, y.seq_in_thread, b);
  });

  // A cp.async's destination: the shared_store the same thread records right
  // after it (same step, iter and block), as the kernels and host models do.
  std::unordered_map<std::uint32_t, std::int64_t> copy_dst;  // async_copy event -> shared byte
  for (std::size_t n = 0; n + 1 < order.size(); ++n) {
    const Event& c = events[order[n]];
    const Event& d = events[order[n + 1]];
    if (c.op == Op::async_copy && d.op == Op::shared_store && d.seq == c.seq && d.head == c.head &&
        d.partition == c.partition && d.warp == c.warp && d.lane == c.lane && d.epoch == c.epoch && d.step == c.step &&
        d.iter == c.iter && d.logical_block == c.logical_block)
      copy_dst[order[n]] = d.byte_offset;
  }

  std::map<RequestKey, MemoryRequest> reqs;
  std::map<std::pair<RequestKey, int>, int> seen;  // (key without occurrence, lane) -> count
  for (std::uint32_t i : order) {
    const Event& e = events[i];
    RequestKey k;
    k.seq = e.seq;
    k.head = e.head;
    k.partition = e.partition;
    k.epoch = e.epoch;
    k.warp = e.warp;
    k.step = e.step;
    k.op = e.op;
    k.tensor = e.tensor;
    k.iter = e.iter;
    k.logical_block = e.logical_block;
    k.occurrence = seen[{k, e.lane}]++;
    MemoryRequest& r = reqs[k];
    r.key = k;
    r.events.push_back(i);
  }

  std::vector<MemoryRequest> out;
  out.reserve(reqs.size());
  std::vector<LaneAccess> acc;
  for (auto& [k, r] : reqs) {
    acc.clear();
    const Event& first = events[r.events.front()];
    r.shared = first.op == Op::shared_load || first.op == Op::shared_store;
    r.store = first.op == Op::global_store || first.op == Op::shared_store;
    for (std::uint32_t i : r.events) {
      const Event& e = events[i];
      acc.push_back({e.lane, e.byte_offset, e.bytes});
      r.bytes_requested += e.bytes;
      r.max_access_bytes = std::max(r.max_access_bytes, e.bytes);
    }
    r.lanes = static_cast<int>(r.events.size());
    r.unique_bytes = unique_bytes_of(acc);
    if (r.shared) {
      const WavefrontCount w = shared_wavefronts(acc);
      r.wavefronts = w.wavefronts;
      r.ideal_wavefronts = w.ideal;
    } else {
      if (first.op == Op::async_copy) {
        std::vector<CopyAccess> copies;
        for (std::uint32_t i : r.events) {
          const auto dst = copy_dst.find(i);
          copies.push_back({events[i].byte_offset, events[i].bytes, dst == copy_dst.end() ? -1 : dst->second});
        }
        r.sectors = async_copy_sectors(copies);
        r.l2_requests = async_copy_l2_requests(copies);
      } else {
        r.sectors = global_sectors(acc);
        r.l2_requests = global_l2_requests(acc);
      }
      r.ideal_sectors = static_cast<int>((r.unique_bytes + kSectorBytes - 1) / kSectorBytes);
      r.ideal_l2_requests = static_cast<int>((r.unique_bytes + kLineBytes - 1) / kLineBytes);
    }
    out.push_back(std::move(r));
  }
  return out;
}

const MemoryRequest* request_of(const std::vector<MemoryRequest>& requests, std::uint32_t event_index) {
  for (const auto& r : requests) {
    if (std::find(r.events.begin(), r.events.end(), event_index) != r.events.end()) return &r;
  }
  return nullptr;
}

std::vector<int> request_index_of_events(const std::vector<MemoryRequest>& requests, std::size_t num_events) {
  std::vector<int> idx(num_events, -1);
  for (std::size_t r = 0; r < requests.size(); ++r) {
    for (std::uint32_t i : requests[r].events) {
      if (i < num_events) idx[i] = static_cast<int>(r);
    }
  }
  return idx;
}

std::vector<ThreadCounts> per_thread_counts(std::span<const Event> events) {
  std::map<std::tuple<int, int, int, int, int>, ThreadCounts> m;
  for (const Event& e : events) {
    ThreadCounts& c = m[{e.seq, e.head, e.partition, e.warp, e.lane}];
    c.seq = e.seq;
    c.head = e.head;
    c.partition = e.partition;
    c.warp = e.warp;
    c.lane = e.lane;
    switch (e.op) {
      case Op::global_load: ++c.global_loads; c.global_load_bytes += e.bytes; break;
      case Op::global_store: ++c.global_stores; c.global_store_bytes += e.bytes; break;
      case Op::shared_load: ++c.shared_loads; c.shared_load_bytes += e.bytes; break;
      case Op::shared_store: ++c.shared_stores; c.shared_store_bytes += e.bytes; break;
      case Op::shuffle: ++c.shuffles; break;
      case Op::barrier: ++c.barriers; break;
      case Op::compute: case Op::mma: ++c.computes; break;
      // cp.async reads global memory (its shared side is not a register access);
      // an atomic is counted where it lands, as a global store.
      case Op::async_copy: ++c.global_loads; c.global_load_bytes += e.bytes; break;
      case Op::atomic: ++c.global_stores; c.global_store_bytes += e.bytes; break;
    }
  }
  std::vector<ThreadCounts> out;
  out.reserve(m.size());
  for (auto& [k, c] : m) out.push_back(c);
  return out;
}

std::vector<StepTraffic> traffic_by_step(std::span<const Event> events, const std::vector<MemoryRequest>& requests) {
  std::map<std::tuple<Stage, Step, Op, Tensor>, StepTraffic> m;
  auto slot = [&](const Event& e) -> StepTraffic& {
    StepTraffic& t = m[{e.stage, e.step, e.op, e.tensor}];
    t.stage = e.stage;
    t.step = e.step;
    t.op = e.op;
    t.tensor = e.tensor;
    return t;
  };
  for (const Event& e : events) {
    StepTraffic& t = slot(e);
    ++t.events;
    t.bytes += e.bytes;
  }
  for (const MemoryRequest& r : requests) {
    StepTraffic& t = slot(events[r.events.front()]);
    ++t.requests;
    t.unique_bytes += r.unique_bytes;
    t.sectors += r.sectors;
    t.ideal_sectors += r.ideal_sectors;
    t.l2_requests += r.l2_requests;
    t.ideal_l2_requests += r.ideal_l2_requests;
    t.wavefronts += r.wavefronts;
    t.ideal_wavefronts += r.ideal_wavefronts;
  }
  std::vector<StepTraffic> out;
  for (auto& [k, t] : m) out.push_back(t);
  return out;
}

TrafficTotals traffic_totals(std::span<const Event> events, const std::vector<MemoryRequest>& requests) {
  TrafficTotals t;
  for (const Event& e : events) {
    switch (e.op) {
      case Op::global_load: case Op::async_copy: t.global_load_bytes += e.bytes; break;
      case Op::global_store: case Op::atomic: t.global_store_bytes += e.bytes; break;
      case Op::shared_load: t.shared_load_bytes += e.bytes; break;
      case Op::shared_store: t.shared_store_bytes += e.bytes; break;
      default: break;
    }
  }
  for (const MemoryRequest& r : requests) {
    if (r.shared) {
      ++t.shared_requests;
      t.shared_wavefronts += r.wavefronts;
      t.shared_ideal_wavefronts += r.ideal_wavefronts;
      (r.store ? t.shared_store_requests : t.shared_load_requests) += 1;
      (r.store ? t.shared_store_wavefronts : t.shared_load_wavefronts) += r.wavefronts;
    } else {
      ++t.global_requests;
      t.global_sectors += r.sectors;
      t.global_ideal_sectors += r.ideal_sectors;
      t.global_l2_requests += r.l2_requests;
      t.global_ideal_l2_requests += r.ideal_l2_requests;
      (r.store ? t.global_store_requests : t.global_load_requests) += 1;
      (r.store ? t.global_store_sectors : t.global_load_sectors) += r.sectors;
      (r.store ? t.global_store_l2_requests : t.global_load_l2_requests) += r.l2_requests;
    }
  }
  return t;
}

}  // namespace pa::trace
