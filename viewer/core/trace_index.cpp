#include "core/trace_index.hpp"

#include <algorithm>
#include <stdexcept>

#include "core/background.hpp"

namespace pa::viewer {

TraceIndex::TraceIndex(const std::vector<trace::Event>& ev, Granularity g, LoadControl* ctl) : gran_(g) {
  if (ev.size() >= 0x7fffffffu) throw std::length_error("trace has too many events for the viewer (limit 2^31)");
  const auto n = static_cast<std::uint32_t>(ev.size());
  step_of_event_.assign(n, -1);
  block_of_event_.assign(n, -1);

  // Blocks in order of first appearance. Progress: this pass is ~10% of the
  // work, the replay order the rest.
  std::vector<std::vector<std::uint32_t>> per_block;
  const double total = 1.0 + n;
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

  steps_.resize(blocks_.size());
  order_.reserve(n);
  std::size_t done_before = 0;
  for (std::size_t b = 0; b < blocks_.size(); ++b) {
    const std::size_t block_events = per_block[b].size();
    auto progress = [&](std::size_t done) {
      if (!ctl) return;
      ctl->check();
      ctl->report(0.1f + 0.9f * static_cast<float>((done_before + done) / total));
    };
    trace::BlockReplay r = trace::build_block_replay(ev, std::move(per_block[b]), g, progress);
    const auto base = static_cast<std::uint32_t>(order_.size());
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      r.steps[s].begin += base;
      for (std::uint32_t k = 0; k < r.steps[s].count; ++k)
        step_of_event_[r.order[r.steps[s].begin - base + k]] = static_cast<std::int32_t>(s);
    }
    order_.insert(order_.end(), r.order.begin(), r.order.end());
    steps_[b] = std::move(r.steps);
    done_before += block_events;
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
