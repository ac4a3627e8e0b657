// Replay steps: the events of one thread block grouped into what a learner
// sees happen at once, in an order the block can really run.
//
// Instruction granularity (the default): a replay step is one dynamic
// instruction executed by the threads of the block, the events with the same
//     (barrier epoch, Step, Op, Tensor, loop iteration, lane-strided iteration)
// and the same occurrence of that key in their own thread (the 3rd K vec load
// of block iteration 0, say: each warp's 32 lanes form one warp request, the
// unit whose coalescing and bank conflicts the lessons discuss). The Op is
// part of the key, so a shuffle never shares a step with a load of the same
// Step, and a shuffle's xor mask is no loop iteration (Event::src_lane holds
// its source): the rounds of a butterfly are successive occurrences. Loops
// whose trip count differs between lanes (chunk L = lane, lane + 32, ...)
// name their iteration in Event::lane_iter, so the k-th occurrence is the
// same instruction in every thread that runs it.
//
// Step granularity merges neighbouring instruction steps of one (epoch, Step,
// iteration): fewer, bigger steps for an overview, still in the same order.
//
// Order: a topological order of the steps under every thread's program order
// (seq_in_thread), choosing among the ready steps by (epoch, smallest
// seq_in_thread, Step, iter, occurrence). Threads that run two instructions in
// opposite orders make the order impossible: that is an error (ReplayOrderError),
// never a silent fallback, since the replay would show something the kernel
// never runs. check_replay_order states and checks what a valid order is.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/event.hpp"

namespace pa::trace {

enum class Granularity { instruction, step };

struct ReplayStep {
  Step step = Step::q_load;
  Op op = Op::compute;          // of the first event (every event's, at instruction granularity)
  Tensor tensor = Tensor::none;  // likewise
  int epoch = 0;
  int iter = -1;
  int lane_iter = -1;
  int occurrence = 0;  // -1 with Granularity::step
  int min_seq_in_thread = 0;
  std::uint32_t begin = 0, count = 0;  // range in BlockReplay::order
  int threads = 0;                     // distinct (warp, lane) in the step
};

// The threads of a block run two instructions in opposite orders.
class ReplayOrderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BlockReplay {
  std::vector<ReplayStep> steps;
  std::vector<std::uint32_t> order;  // the block's event indices, step after step; within a step by (warp, lane)
};

// events: a whole trace; block: the indices of one thread block's events, in
// any order. progress (optional) is called every 64 Ki events with the number
// done so far (the viewer reports it and cancels from it by throwing).
// Throws ReplayOrderError naming the instructions that cannot be ordered.
BlockReplay build_block_replay(const std::vector<Event>& events, std::vector<std::uint32_t> block, Granularity g,
                               const std::function<void(std::size_t)>& progress = {});

// What every replay order must satisfy; returns the violations found (at most
// max_report, each one line; empty = a valid order). order/steps: one block's
// replay as build_block_replay returns it. Checked independently of how the
// order was built:
//  - order holds every event of the block (same seq, head, partition) exactly
//    once, and the steps cover it without gaps;
//  - each thread's events appear in its program order (seq_in_thread): step
//    numbers never decrease, and at instruction granularity they increase (a
//    thread runs one instruction of a step); at instruction granularity all
//    events of a step share (epoch, Step, Op, Tensor, iter, lane_iter);
//  - a barrier is a step of its own, holding every barrier event of its epoch,
//    after every other event of that or an earlier epoch and before every
//    event of a later epoch;
//  - a shuffle's source lane (Event::src_lane, required) runs the same shuffle
//    in the same step, so whatever produced the operand came before.
std::vector<std::string> check_replay_order(const std::vector<Event>& events, std::span<const std::uint32_t> order,
                                            std::span<const ReplayStep> steps, Granularity g,
                                            std::size_t max_report = 8);

// Every thread block of a trace replayed at both granularities and checked
// (pa-lab trace does this before writing a file; the tests on host-model and
// GPU-recorded traces too). A cycle counts as a violation.
struct TraceReplayCheck {
  int blocks = 0;           // thread blocks checked
  std::size_t steps = 0;    // instruction steps over all blocks
  std::vector<std::string> violations;  // each prefixed by "block (seq,head,partition) granularity: "
};
TraceReplayCheck check_trace_replay(const std::vector<Event>& events);

}  // namespace pa::trace
