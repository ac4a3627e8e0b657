#include "pa/trace/replay.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace pa::trace {
namespace {

// What one instruction of a thread is: its key and which occurrence of that
// key in the thread it is.
struct InstrKey {
  std::int32_t epoch, iter, occ;
  std::int8_t lane_iter;
  std::uint8_t step, op, tensor;
  bool operator==(const InstrKey&) const = default;
};
struct InstrKeyHash {
  std::size_t operator()(const InstrKey& k) const {
    std::uint64_t h = static_cast<std::uint32_t>(k.epoch);
    h = h * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint32_t>(k.iter);
    h = h * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint32_t>(k.occ);
    h = h * 0x9E3779B97F4A7C15ull ^ (static_cast<std::uint32_t>(static_cast<std::uint8_t>(k.lane_iter)) << 24 |
                                     static_cast<std::uint32_t>(k.step) << 16 | k.op << 8 | k.tensor);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

InstrKey key_of(const Event& e, int occ) {
  return {e.epoch, e.iter, occ, e.lane_iter, static_cast<std::uint8_t>(e.step), static_cast<std::uint8_t>(e.op),
          static_cast<std::uint8_t>(e.tensor)};
}

std::string describe_step(const ReplayStep& s) {
  return std::string(to_string(s.step)) + " " + to_string(s.op) + " " + to_string(s.tensor) + " (epoch " +
         std::to_string(s.epoch) + ", iter " + std::to_string(s.iter) + ", lane iter " + std::to_string(s.lane_iter) +
         ", occurrence " + std::to_string(s.occurrence) + ")";
}

bool program_order(const Event& x, const Event& y) {
  if (x.warp != y.warp) return x.warp < y.warp;
  if (x.lane != y.lane) return x.lane < y.lane;
  return x.seq_in_thread < y.seq_in_thread;
}

}  // namespace

BlockReplay build_block_replay(const std::vector<Event>& ev, std::vector<std::uint32_t> idx, Granularity g,
                               const std::function<void(std::size_t)>& progress) {
  // Each thread's events in program order, threads one after another.
  auto by_thread = [&](std::uint32_t a, std::uint32_t c) { return program_order(ev[a], ev[c]); };
  if (!std::is_sorted(idx.begin(), idx.end(), by_thread)) std::stable_sort(idx.begin(), idx.end(), by_thread);

  // Instructions: one group per (key, occurrence).
  struct Group {
    ReplayStep info;
    std::vector<std::uint32_t> events;
  };
  std::vector<Group> groups;
  std::unordered_map<InstrKey, int, InstrKeyHash> group_of;
  std::unordered_map<InstrKey, int, InstrKeyHash> occ_count;  // this thread's, reset per thread
  std::vector<int> group_of_pos(idx.size());
  int cur_warp = -1, cur_lane = -1;
  for (std::size_t pos = 0; pos < idx.size(); ++pos) {
    if (progress && ((pos + 1) & 0xffff) == 0) progress(pos + 1);
    const Event& e = ev[idx[pos]];
    if (e.warp != cur_warp || e.lane != cur_lane) {
      occ_count.clear();
      cur_warp = e.warp;
      cur_lane = e.lane;
    }
    const int occ = occ_count[key_of(e, 0)]++;
    auto [it, inserted] = group_of.try_emplace(key_of(e, occ), static_cast<int>(groups.size()));
    if (inserted) {
      Group gr;
      gr.info.step = e.step;
      gr.info.op = e.op;
      gr.info.tensor = e.tensor;
      gr.info.epoch = e.epoch;
      gr.info.iter = e.iter;
      gr.info.lane_iter = e.lane_iter;
      gr.info.occurrence = occ;
      gr.info.min_seq_in_thread = e.seq_in_thread;
      groups.push_back(std::move(gr));
    }
    Group& gr = groups[it->second];
    gr.info.min_seq_in_thread = std::min(gr.info.min_seq_in_thread, e.seq_in_thread);
    gr.events.push_back(idx[pos]);
    group_of_pos[pos] = it->second;
  }

  // Edges: consecutive instructions of each thread.
  const int ng = static_cast<int>(groups.size());
  std::vector<std::vector<int>> succ(ng);
  std::vector<int> indeg(ng, 0);
  {
    std::unordered_map<std::uint64_t, char> seen;
    for (std::size_t pos = 1; pos < idx.size(); ++pos) {
      const Event& a = ev[idx[pos - 1]];
      const Event& b = ev[idx[pos]];
      if (a.warp != b.warp || a.lane != b.lane) continue;
      const int u = group_of_pos[pos - 1], v = group_of_pos[pos];
      if (u == v) continue;  // cannot happen: a thread's occurrences differ
      const std::uint64_t k = static_cast<std::uint64_t>(u) << 32 | static_cast<std::uint32_t>(v);
      if (seen.emplace(k, 1).second) {
        succ[u].push_back(v);
        ++indeg[v];
      }
    }
  }

  auto before = [&](int a, int c) {
    const auto& x = groups[a].info;
    const auto& y = groups[c].info;
    return std::tie(x.epoch, x.min_seq_in_thread, x.step, x.iter, x.occurrence) <
           std::tie(y.epoch, y.min_seq_in_thread, y.step, y.iter, y.occurrence);
  };
  std::vector<int> ord;
  ord.reserve(ng);
  {
    auto cmp = [&](int a, int c) { return before(c, a); };  // min-heap on `before`
    std::vector<int> heap;
    std::vector<int> deg = indeg;
    for (int gi = 0; gi < ng; ++gi)
      if (deg[gi] == 0) heap.push_back(gi);
    std::make_heap(heap.begin(), heap.end(), cmp);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), cmp);
      const int gi = heap.back();
      heap.pop_back();
      ord.push_back(gi);
      for (int nx : succ[gi])
        if (--deg[nx] == 0) {
          heap.push_back(nx);
          std::push_heap(heap.begin(), heap.end(), cmp);
        }
    }
    if (static_cast<int>(ord.size()) != ng) {
      // Every instruction left has a predecessor left: walk back to a cycle.
      std::vector<std::vector<int>> pred(ng);
      for (int u = 0; u < ng; ++u)
        if (deg[u] > 0)
          for (int v : succ[u])
            if (deg[v] > 0) pred[v].push_back(u);
      int v = -1;
      for (int gi = 0; gi < ng && v < 0; ++gi)
        if (deg[gi] > 0) v = gi;
      std::vector<int> seen_at(ng, -1);
      std::vector<int> path;
      while (v >= 0 && seen_at[v] < 0 && !pred[v].empty()) {
        seen_at[v] = static_cast<int>(path.size());
        path.push_back(v);
        v = pred[v].front();
      }
      std::string msg = "replay order: " + std::to_string(ng - static_cast<int>(ord.size())) + " of " +
                        std::to_string(ng) + " instructions cannot be ordered: threads run them in opposite orders";
      if (v >= 0 && seen_at[v] >= 0) {
        msg += "; cycle:";
        for (std::size_t i = path.size(); i-- > static_cast<std::size_t>(seen_at[v]);) {
          msg += ' ';
          msg += describe_step(groups[path[i]].info);
          msg += " ->";
        }
        msg += ' ';
        msg += describe_step(groups[v].info);
      }
      throw ReplayOrderError(msg);
    }
  }

  // Instruction steps in that order; step granularity merges neighbours of
  // one (epoch, Step, iter).
  BlockReplay out;
  out.order.reserve(idx.size());
  std::vector<std::uint32_t> evs;
  for (std::size_t k = 0; k < ord.size();) {
    ReplayStep s = groups[ord[k]].info;
    evs.clear();
    std::size_t k2 = k;
    do {
      auto& ge = groups[ord[k2]].events;
      evs.insert(evs.end(), ge.begin(), ge.end());
      s.min_seq_in_thread = std::min(s.min_seq_in_thread, groups[ord[k2]].info.min_seq_in_thread);
      std::vector<std::uint32_t>().swap(ge);
      ++k2;
    } while (g == Granularity::step && k2 < ord.size() && groups[ord[k2]].info.epoch == s.epoch &&
             groups[ord[k2]].info.step == s.step && groups[ord[k2]].info.iter == s.iter);
    k = k2;
    if (g == Granularity::step) s.occurrence = -1;
    // Within a step: by (warp, lane) so requests read in lane order.
    std::sort(evs.begin(), evs.end(), [&](std::uint32_t a, std::uint32_t c) { return program_order(ev[a], ev[c]); });
    s.begin = static_cast<std::uint32_t>(out.order.size());
    s.count = static_cast<std::uint32_t>(evs.size());
    int threads = 0, pw = -1, pl = -1;
    for (std::uint32_t i : evs) {
      if (ev[i].warp != pw || ev[i].lane != pl) ++threads;
      pw = ev[i].warp;
      pl = ev[i].lane;
      out.order.push_back(i);
    }
    s.threads = threads;
    out.steps.push_back(s);
  }
  return out;
}

std::vector<std::string> check_replay_order(const std::vector<Event>& ev, std::span<const std::uint32_t> order,
                                            std::span<const ReplayStep> steps, Granularity g, std::size_t max_report) {
  std::vector<std::string> bad;
  auto report = [&](std::string s) {
    if (bad.size() < max_report) bad.push_back(std::move(s));
  };
  if (order.empty()) {
    if (!steps.empty()) report("steps without events");
    return bad;
  }
  // The steps cover the order without gaps; each event's step number.
  std::vector<int> step_at(order.size(), -1);
  std::uint32_t next = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].begin != next || steps[s].count == 0 || steps[s].begin + steps[s].count > order.size()) {
      report("step " + std::to_string(s) + " does not continue the order (begin " + std::to_string(steps[s].begin) +
             ", count " + std::to_string(steps[s].count) + ", expected begin " + std::to_string(next) + ")");
      return bad;
    }
    for (std::uint32_t k = 0; k < steps[s].count; ++k) step_at[steps[s].begin + k] = static_cast<int>(s);
    next += steps[s].count;
  }
  if (next != order.size()) {
    report("the steps cover " + std::to_string(next) + " of " + std::to_string(order.size()) + " events");
    return bad;
  }

  // Exactly the block's events, once each.
  const Event& first = ev.at(order[0]);
  std::vector<int> step_of(ev.size(), -1);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::uint32_t i = order[k];
    if (i >= ev.size()) {
      report("event index " + std::to_string(i) + " out of range");
      return bad;
    }
    if (step_of[i] >= 0) report("event " + std::to_string(i) + " appears twice");
    step_of[i] = step_at[k];
  }
  std::vector<std::uint32_t> block;
  for (std::uint32_t i = 0; i < ev.size(); ++i) {
    const Event& e = ev[i];
    if (e.seq != first.seq || e.head != first.head || e.partition != first.partition) {
      if (step_of[i] >= 0) report("event " + std::to_string(i) + " of another block: " + describe(e));
      continue;
    }
    if (step_of[i] < 0) report("event " + std::to_string(i) + " of the block is in no step: " + describe(e));
    else block.push_back(i);
  }

  // Homogeneous instruction steps.
  if (g == Granularity::instruction) {
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const ReplayStep& st = steps[s];
      for (std::uint32_t k = st.begin; k < st.begin + st.count; ++k) {
        const Event& e = ev[order[k]];
        if (e.epoch != st.epoch || e.step != st.step || e.op != st.op || e.tensor != st.tensor || e.iter != st.iter ||
            e.lane_iter != st.lane_iter) {
          report("step " + std::to_string(s) + " (" + to_string(st.step) + " " + to_string(st.op) +
                 ") mixes instructions: " + describe(e));
          break;
        }
      }
    }
  }

  // Program order per thread.
  std::sort(block.begin(), block.end(), [&](std::uint32_t a, std::uint32_t c) { return program_order(ev[a], ev[c]); });
  for (std::size_t k = 1; k < block.size(); ++k) {
    const Event& a = ev[block[k - 1]];
    const Event& b = ev[block[k]];
    if (a.warp != b.warp || a.lane != b.lane) continue;
    const int sa = step_of[block[k - 1]], sb = step_of[block[k]];
    if (b.epoch < a.epoch) report("thread w" + std::to_string(b.warp) + " l" + std::to_string(b.lane) +
                                  ": epoch decreases in program order at " + describe(b));
    if (sb < sa || (g == Granularity::instruction && sb == sa))
      report("thread w" + std::to_string(b.warp) + " l" + std::to_string(b.lane) + ": step " + std::to_string(sb) +
             " (" + describe(b) + ") replayed " + (sb == sa ? "in the same step as" : "before") + " step " +
             std::to_string(sa) + " (" + describe(a) + "), which precedes it in the thread");
  }

  // Barriers.
  std::map<int, int> barrier_step;  // epoch -> its step
  for (std::uint32_t i : block) {
    const Event& e = ev[i];
    if (e.op != Op::barrier) continue;
    auto [it, inserted] = barrier_step.try_emplace(e.epoch, step_of[i]);
    if (!inserted && it->second != step_of[i])
      report("barrier of epoch " + std::to_string(e.epoch) + " split over steps " + std::to_string(it->second) +
             " and " + std::to_string(step_of[i]));
  }
  for (const auto& [epoch, s] : barrier_step) {
    const ReplayStep& st = steps[static_cast<std::size_t>(s)];
    for (std::uint32_t k = st.begin; k < st.begin + st.count; ++k)
      if (ev[order[k]].op != Op::barrier || ev[order[k]].epoch != epoch) {
        report("barrier step " + std::to_string(s) + " also holds " + describe(ev[order[k]]));
        break;
      }
  }
  for (std::uint32_t i : block) {
    const Event& e = ev[i];
    for (const auto& [epoch, s] : barrier_step) {
      if (e.op == Op::barrier && e.epoch == epoch) continue;
      if (e.epoch <= epoch && step_of[i] >= s) {
        report("event of epoch " + std::to_string(e.epoch) + " replayed at step " + std::to_string(step_of[i]) +
               ", not before the barrier of epoch " + std::to_string(epoch) + " (step " + std::to_string(s) +
               "): " + describe(e));
        break;
      }
      if (e.epoch > epoch && step_of[i] <= s) {
        report("event of epoch " + std::to_string(e.epoch) + " replayed at step " + std::to_string(step_of[i]) +
               ", not after the barrier of epoch " + std::to_string(epoch) + " (step " + std::to_string(s) +
               "): " + describe(e));
        break;
      }
    }
  }

  // Shuffles: the source lane runs the same shuffle in the same step.
  std::set<std::tuple<int, int, int>> shuffles;  // (step, warp, lane)
  for (std::uint32_t i : block)
    if (ev[i].op == Op::shuffle) shuffles.emplace(step_of[i], ev[i].warp, ev[i].lane);
  for (std::uint32_t i : block) {
    const Event& e = ev[i];
    if (e.op != Op::shuffle) continue;
    if (e.src_lane < 0 || e.src_lane >= 32) {
      report("shuffle without a source lane: " + describe(e));
      continue;
    }
    if (!shuffles.count({step_of[i], e.warp, e.src_lane}))
      report("shuffle at step " + std::to_string(step_of[i]) + " reads lane " + std::to_string(e.src_lane) +
             ", which runs no shuffle in that step: " + describe(e));
  }
  return bad;
}

TraceReplayCheck check_trace_replay(const std::vector<Event>& ev) {
  TraceReplayCheck r;
  std::map<std::tuple<int, int, int>, std::vector<std::uint32_t>> blocks;
  for (std::uint32_t i = 0; i < ev.size(); ++i) blocks[{ev[i].seq, ev[i].head, ev[i].partition}].push_back(i);
  for (const auto& [key, idx] : blocks) {
    const std::string name = "block (" + std::to_string(std::get<0>(key)) + "," + std::to_string(std::get<1>(key)) +
                             "," + std::to_string(std::get<2>(key)) + ") ";
    ++r.blocks;
    for (Granularity g : {Granularity::instruction, Granularity::step}) {
      const std::string gname = g == Granularity::instruction ? "instruction: " : "step: ";
      try {
        const BlockReplay rep = build_block_replay(ev, idx, g);
        if (g == Granularity::instruction) r.steps += rep.steps.size();
        for (auto& v : check_replay_order(ev, rep.order, rep.steps, g)) r.violations.push_back(name + gname + v);
      } catch (const ReplayOrderError& e) {
        r.violations.push_back(name + gname + e.what());
      }
    }
  }
  return r;
}

}  // namespace pa::trace
