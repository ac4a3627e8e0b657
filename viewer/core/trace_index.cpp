#include "core/trace_index.hpp"

#include <cmath>
#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "core/background.hpp"

namespace pa::viewer {
namespace {

struct GroupKey {
  std::int32_t epoch, iter, occ;
  std::uint8_t step;
  bool operator==(const GroupKey&) const = default;
};
struct GroupKeyHash {
  std::size_t operator()(const GroupKey& k) const {
    std::uint64_t h = static_cast<std::uint32_t>(k.epoch);
    h = h * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint32_t>(k.iter);
    h = h * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint32_t>(k.occ);
    h = h * 0x9E3779B97F4A7C15ull ^ k.step;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

struct Group {
  GroupKey key;
  ReplayStep info;
  std::vector<std::uint32_t> events;
};

}  // namespace

TraceIndex::TraceIndex(const std::vector<trace::Event>& ev, Granularity g, LoadControl* ctl) : gran_(g) {
  if (ev.size() >= 0x7fffffffu) throw std::length_error("trace has too many events for the viewer (limit 2^31)");
  const auto n = static_cast<std::uint32_t>(ev.size());
  step_of_event_.assign(n, -1);
  block_of_event_.assign(n, -1);

  // Blocks in order of first appearance.
  std::vector<std::vector<std::uint32_t>> per_block;
  // Progress: the block pass is ~10% of the work, the grouping the rest.
  const double total = 1.0 + n;
  std::uint64_t done_events = 0;
  auto tick = [&](std::uint64_t done) {
    if (ctl && (done & 0xffff) == 0) {
      ctl->check();
      ctl->report(0.1f + 0.9f * static_cast<float>(done / total));
    }
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    if (ctl && (i & 0xffff) == 0) {
      ctl->check();
      ctl->report(0.1f * static_cast<float>(i / total));
    }
    const BlockKey k{ev[i].seq, ev[i].head, ev[i].partition};
    int b = -1;
    // Few blocks: a linear search from the back (the current block) is fastest.
    for (int j = static_cast<int>(blocks_.size()) - 1; j >= 0; --j)
      if (blocks_[j] == k) { b = j; break; }
    if (b < 0) {
      b = static_cast<int>(blocks_.size());
      blocks_.push_back(k);
      per_block.emplace_back();
    }
    block_of_event_[i] = b;
    per_block[b].push_back(i);
  }

  auto thread_order = [&](std::uint32_t a, std::uint32_t c) {
    const auto& x = ev[a];
    const auto& y = ev[c];
    if (x.epoch != y.epoch) return x.epoch < y.epoch;
    if (x.warp != y.warp) return x.warp < y.warp;
    if (x.lane != y.lane) return x.lane < y.lane;
    return x.seq_in_thread < y.seq_in_thread;
  };

  steps_.resize(blocks_.size());
  std::vector<int> group_of_event(n, -1);  // within the block being indexed
  order_.reserve(n);
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    auto& idx = per_block[b];
    if (!std::is_sorted(idx.begin(), idx.end(), thread_order))
      std::stable_sort(idx.begin(), idx.end(), thread_order);

    std::unordered_map<GroupKey, int, GroupKeyHash> group_of;
    std::vector<Group> groups;
    // Occurrence counters, reset whenever the (warp, lane) changes.
    std::unordered_map<GroupKey, int, GroupKeyHash> occ_count;
    int cur_warp = -1, cur_lane = -1;
    for (std::uint32_t i : idx) {
      tick(++done_events);
      const auto& e = ev[i];
      if (e.warp != cur_warp || e.lane != cur_lane) {
        occ_count.clear();
        cur_warp = e.warp;
        cur_lane = e.lane;
      }
      int occ = -1;
      if (g == Granularity::instruction) occ = occ_count[GroupKey{e.epoch, e.iter, 0, static_cast<std::uint8_t>(e.step)}]++;
      const GroupKey key{e.epoch, e.iter, occ, static_cast<std::uint8_t>(e.step)};
      auto [it, inserted] = group_of.try_emplace(key, static_cast<int>(groups.size()));
      if (inserted) {
        Group gr;
        gr.key = key;
        gr.info.step = e.step;
        gr.info.op = e.op;
        gr.info.tensor = e.tensor;
        gr.info.epoch = e.epoch;
        gr.info.iter = e.iter;
        gr.info.occurrence = occ;
        gr.info.min_seq_in_thread = e.seq_in_thread;
        groups.push_back(std::move(gr));
      }
      group_of_event[i] = it->second;
      Group& gr = groups[it->second];
      gr.info.min_seq_in_thread = std::min(gr.info.min_seq_in_thread, e.seq_in_thread);
      gr.events.push_back(i);
    }
    // Order: a topological order of the groups under every thread's program
    // order (each thread's consecutive events give an edge), choosing among
    // the ready groups by (epoch, min seq_in_thread, step, iter, occurrence).
    // Threads with fewer events (idle warps reach the barrier early) thus
    // never pull a later group in front of an earlier one.
    auto before = [&](int a, int c) {
      const auto& x = groups[a].info;
      const auto& y = groups[c].info;
      if (x.epoch != y.epoch) return x.epoch < y.epoch;
      if (x.min_seq_in_thread != y.min_seq_in_thread) return x.min_seq_in_thread < y.min_seq_in_thread;
      if (x.step != y.step) return x.step < y.step;
      if (x.iter != y.iter) return x.iter < y.iter;
      return x.occurrence < y.occurrence;
    };
    const int ng = static_cast<int>(groups.size());
    std::vector<std::vector<int>> succ(ng);
    std::vector<int> indeg(ng, 0);
    {
      std::unordered_map<std::uint64_t, char> seen;
      int prev = -1, pw2 = -1, pl2 = -1;
      for (std::uint32_t i : idx) {
        const auto& e = ev[i];
        const int gi = group_of_event[i];
        if (e.warp == pw2 && e.lane == pl2 && prev >= 0 && prev != gi) {
          const std::uint64_t k2 = (static_cast<std::uint64_t>(prev) << 32) | static_cast<std::uint32_t>(gi);
          if (seen.emplace(k2, 1).second) {
            succ[prev].push_back(gi);
            ++indeg[gi];
          }
        }
        prev = gi;
        pw2 = e.warp;
        pl2 = e.lane;
      }
    }
    std::vector<int> ord;
    ord.reserve(ng);
    {
      auto cmp = [&](int a, int c) { return before(c, a); };  // min-heap on `before`
      std::vector<int> heap;
      for (int gi = 0; gi < ng; ++gi)
        if (indeg[gi] == 0) heap.push_back(gi);
      std::make_heap(heap.begin(), heap.end(), cmp);
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), cmp);
        const int gi = heap.back();
        heap.pop_back();
        ord.push_back(gi);
        for (int nx : succ[gi])
          if (--indeg[nx] == 0) {
            heap.push_back(nx);
            std::push_heap(heap.begin(), heap.end(), cmp);
          }
      }
    }
    if (static_cast<int>(ord.size()) != ng) {
      // Inconsistent program orders (a cycle): fall back to the plain sort.
      ord.resize(ng);
      std::iota(ord.begin(), ord.end(), 0);
      std::sort(ord.begin(), ord.end(), before);
    }
    auto& out = steps_[b];
    out.reserve(groups.size());
    for (int gi : ord) {
      Group& gr = groups[gi];
      ReplayStep s = gr.info;
      s.begin = static_cast<std::uint32_t>(order_.size());
      s.count = static_cast<std::uint32_t>(gr.events.size());
      // Events of a step: by (warp, lane) so requests read in lane order.
      std::sort(gr.events.begin(), gr.events.end(), [&](std::uint32_t a, std::uint32_t c) {
        if (ev[a].warp != ev[c].warp) return ev[a].warp < ev[c].warp;
        if (ev[a].lane != ev[c].lane) return ev[a].lane < ev[c].lane;
        return ev[a].seq_in_thread < ev[c].seq_in_thread;
      });
      int threads = 0, pw = -1, pl = -1;
      const int step_no = static_cast<int>(out.size());
      for (std::uint32_t i : gr.events) {
        if (ev[i].warp != pw || ev[i].lane != pl) ++threads;
        pw = ev[i].warp;
        pl = ev[i].lane;
        step_of_event_[i] = step_no;
        order_.push_back(i);
      }
      s.threads = threads;
      out.push_back(s);
      std::vector<std::uint32_t>().swap(gr.events);
    }
  }
  if (ctl) ctl->report(1.0f);
}

std::string describe_block(const BlockKey& k, trace::Stage stage) {
  std::string out = "seq " + std::to_string(k.seq) + " head " + std::to_string(k.head) + " ";
  if (k.partition >= 0)
    out += (stage == trace::Stage::optimized ? "split " : "part ") + std::to_string(k.partition);
  else if (k.partition == BlockLabel::kReduce) out += "reduce";
  else if (k.partition == BlockLabel::kPrefixReduce) out += "prefix reduce";
  else if (k.partition == BlockLabel::kMerge) out += "merge";
  else if (BlockLabel::is_prefix(k.partition)) out += "prefix chunk " + std::to_string(k.partition - BlockLabel::kPrefixBase);
  else out += "block " + std::to_string(k.partition);
  return out;
}

int TraceIndex::find_block(const BlockKey& k) const {
  for (std::size_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i] == k) return static_cast<int>(i);
  return -1;
}

std::span<const std::uint32_t> TraceIndex::events_of(int b, int step) const {
  if (b < 0 || b >= num_blocks() || step < 0 || step >= num_steps(b)) return {};
  const auto& s = steps_[b][step];
  return {order_.data() + s.begin, s.count};
}

int TraceIndex::find_step(int b, trace::Step s, int from) const {
  for (int i = std::max(from, 0); i < num_steps(b); ++i)
    if (steps_[b][i].step == s) return i;
  return -1;
}

StepLocation locate_step(const TraceIndex& index, int prefer, trace::Step s, std::optional<BlockRole> role) {
  auto fits = [&](int b) {
    return b >= 0 && b < index.num_blocks() && (!role || block_role(index.block(b).partition) == *role);
  };
  if (fits(prefer))
    if (const int k = index.find_step(prefer, s); k >= 0) return {prefer, k};
  for (int b = 0; b < index.num_blocks(); ++b)
    if (b != prefer && fits(b))
      if (const int k = index.find_step(b, s); k >= 0) return {b, k};
  return {};
}

// ---- ReplayState ------------------------------------------------------------

void ReplayState::set_count(int n) {
  count_ = std::max(n, 0);
  jump(current_);
  if (count_ == 0) playing_ = false;
}

void ReplayState::set_speed(float s) { speed_ = std::clamp(s, 0.25f, 200.0f); }

void ReplayState::jump(int step) {
  current_ = count_ == 0 ? 0 : std::clamp(step, 0, count_ - 1);
  acc_ = 0.0;
}

void ReplayState::play() {
  if (count_ == 0) return;
  if (current_ >= count_ - 1) current_ = 0;  // play from the start after the end
  playing_ = true;
  acc_ = 0.0;
}

bool ReplayState::tick(double seconds) {
  if (!playing_ || count_ == 0) return false;
  acc_ += seconds * speed_;
  const int adv = static_cast<int>(acc_);
  if (adv <= 0) return false;
  acc_ -= adv;
  const int before = current_;
  current_ = std::min(current_ + adv, count_ - 1);
  if (current_ == count_ - 1) playing_ = false;
  return current_ != before;
}

}  // namespace pa::viewer
