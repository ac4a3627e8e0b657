// Replay state and the grouping of events into replay steps, on hand-made
// events and on the host model.
#include <catch2/catch_test_macros.hpp>

#include "core/trace_index.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;
using trace::Event;

namespace {
Event ev(int warp, int lane, trace::Step step, int iter, int epoch, int seq_in_thread, int seq = 0) {
  Event e{};
  e.stage = trace::Stage::qk;
  e.step = step;
  e.op = trace::Op::global_load;
  e.tensor = trace::Tensor::k_cache;
  e.warp = static_cast<std::uint16_t>(warp);
  e.lane = static_cast<std::uint16_t>(lane);
  e.seq = seq;
  e.iter = iter;
  e.epoch = epoch;
  e.seq_in_thread = seq_in_thread;
  e.byte_offset = 0;
  e.bytes = 8;
  return e;
}
}  // namespace

TEST_CASE("ReplayState steps, jumps, clamps and plays", "[viewer][replay]") {
  ReplayState r;
  CHECK(r.count() == 0);
  r.next();
  CHECK(r.current() == 0);
  r.play();
  CHECK_FALSE(r.playing());  // nothing to play
  r.set_count(10);
  r.next();
  r.next();
  CHECK(r.current() == 2);
  r.prev();
  CHECK(r.current() == 1);
  r.jump(100);
  CHECK(r.current() == 9);
  r.jump(-5);
  CHECK(r.current() == 0);
  r.end();
  CHECK(r.current() == 9);
  r.home();
  CHECK(r.current() == 0);

  r.set_speed(4);
  r.play();
  CHECK(r.playing());
  CHECK_FALSE(r.tick(0.1));  // 0.4 steps: not yet
  CHECK(r.tick(0.2));        // 1.2 steps accumulated
  CHECK(r.current() == 1);
  CHECK(r.tick(1.0));        // +4
  CHECK(r.current() == 5);
  CHECK(r.tick(10.0));       // stops at the end
  CHECK(r.current() == 9);
  CHECK_FALSE(r.playing());
  r.play();                  // from the end: restarts
  CHECK(r.current() == 0);
  r.toggle_play();
  CHECK_FALSE(r.playing());
  CHECK_FALSE(r.tick(5.0));

  r.jump(7);
  r.set_count(3);  // a smaller trace keeps the position clamped
  CHECK(r.current() == 2);
  r.set_speed(0);
  CHECK(r.speed() > 0);
}

TEST_CASE("Events group into one replay step per instruction", "[viewer][replay]") {
  // Two threads; each issues 2 K loads in iter 0, then a barrier, then 1 load in epoch 1.
  std::vector<Event> v;
  for (int lane = 0; lane < 2; ++lane) {
    v.push_back(ev(0, lane, trace::Step::k_load, 0, 0, 0));
    v.push_back(ev(0, lane, trace::Step::k_load, 0, 0, 1));
    Event b = ev(0, lane, trace::Step::barrier, -1, 0, 2);
    b.op = trace::Op::barrier;
    v.push_back(b);
    v.push_back(ev(0, lane, trace::Step::qk_dot, 0, 1, 3));
  }
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 1);
  REQUIRE(idx.num_steps(0) == 4);
  const auto& s = idx.steps(0);
  CHECK(s[0].step == trace::Step::k_load);
  CHECK(s[0].occurrence == 0);
  CHECK(s[1].step == trace::Step::k_load);
  CHECK(s[1].occurrence == 1);
  CHECK(s[2].step == trace::Step::barrier);
  CHECK(s[3].step == trace::Step::qk_dot);
  CHECK(s[3].epoch == 1);
  for (int k = 0; k < 4; ++k) {
    CHECK(s[k].threads == 2);
    CHECK(idx.events_of(0, k).size() == 2);
    for (auto e : idx.events_of(0, k)) CHECK(idx.step_of_event(e) == k);
  }
  // Lane order inside a step.
  CHECK(v[idx.events_of(0, 0)[0]].lane == 0);
  CHECK(v[idx.events_of(0, 0)[1]].lane == 1);
  CHECK(idx.find_step(0, trace::Step::qk_dot) == 3);
  CHECK(idx.find_step(0, trace::Step::v_load) == -1);
  CHECK(idx.events_of(0, 99).empty());
  CHECK(idx.events_of(5, 0).empty());

  TraceIndex coarse(v, Granularity::step);
  REQUIRE(coarse.num_steps(0) == 3);  // both K loads in one step
  CHECK(coarse.steps(0)[0].count == 4);
  CHECK(coarse.steps(0)[0].occurrence == -1);
}

TEST_CASE("Unsorted events and several blocks are indexed", "[viewer][replay]") {
  std::vector<Event> v = {ev(1, 3, trace::Step::k_load, 0, 0, 1, 1), ev(0, 0, trace::Step::k_load, 0, 0, 0, 0),
                          ev(1, 3, trace::Step::q_smem_load, 0, 0, 0, 1)};
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 2);
  CHECK(idx.block(0).seq == 1);  // order of first appearance
  CHECK(idx.find_block(BlockKey{0, 0, 0}) == 1);
  CHECK(idx.find_block(BlockKey{7, 0, 0}) == -1);
  REQUIRE(idx.num_steps(0) == 2);
  CHECK(idx.steps(0)[0].step == trace::Step::q_smem_load);  // program order by seq_in_thread
  CHECK(idx.steps(0)[1].step == trace::Step::k_load);
  CHECK(idx.block_of_event(1) == 1);
  TraceIndex empty(std::vector<Event>{}, Granularity::instruction);
  CHECK(empty.num_blocks() == 0);
  CHECK(empty.num_steps(0) == 0);
}

TEST_CASE("Host-model QK trace: every event in exactly one step; K loads are warp-wide instructions",
          "[viewer][replay]") {
  ProblemSpec spec;  // fp16, head 128, block 16, 128 threads, context 100
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  REQUIRE(!events.empty());
  TraceIndex idx(events, Granularity::instruction);
  REQUIRE(idx.num_blocks() == 1);
  std::size_t total = 0;
  for (int k = 0; k < idx.num_steps(0); ++k) total += idx.events_of(0, k).size();
  CHECK(total == events.size());
  const int k = idx.find_step(0, trace::Step::k_load);
  REQUIRE(k >= 0);
  // One instruction: every lane of every warp with a block issues one load.
  const auto st = idx.steps(0)[k];
  CHECK(st.threads == static_cast<int>(st.count));
  CHECK(st.count % 32 == 0);
  // Steps are in barrier-epoch order.
  for (int i = 1; i < idx.num_steps(0); ++i) CHECK(idx.steps(0)[i - 1].epoch <= idx.steps(0)[i].epoch);
}

TEST_CASE("Idle threads reaching the barrier early do not reorder steps", "[viewer][replay]") {
  // Lane 0 loads then stores then hits the barrier; lane 1 only hits the barrier
  // (its barrier has seq_in_thread 0, smaller than lane 0's store).
  std::vector<Event> v = {ev(0, 0, trace::Step::q_load, -1, 0, 0), ev(0, 0, trace::Step::q_smem_store, -1, 0, 1),
                          ev(0, 0, trace::Step::barrier, -1, 0, 2), ev(1, 0, trace::Step::barrier, -1, 0, 0)};
  TraceIndex idx(v, Granularity::instruction);
  REQUIRE(idx.num_steps(0) == 3);
  CHECK(idx.steps(0)[0].step == trace::Step::q_load);
  CHECK(idx.steps(0)[1].step == trace::Step::q_smem_store);
  CHECK(idx.steps(0)[2].step == trace::Step::barrier);
  CHECK(idx.steps(0)[2].threads == 2);
}
