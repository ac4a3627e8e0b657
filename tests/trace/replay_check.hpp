// In a Catch2 test: every thread block of a trace (host model or recorded on
// a GPU) replays in an order the kernel runs (pa/trace/replay.hpp).
#pragma once
#include <string>

#include "pa/trace/replay.hpp"

#define PA_CHECK_REPLAY_ORDER(events)                                                                      \
  do {                                                                                                     \
    const ::pa::trace::TraceReplayCheck rc_ = ::pa::trace::check_trace_replay(events);                     \
    std::string first_;                                                                                    \
    for (std::size_t k_ = 0; k_ < rc_.violations.size() && k_ < 4; ++k_) first_ += rc_.violations[k_] + "\n"; \
    INFO("replay order: " << rc_.blocks << " blocks, " << rc_.violations.size() << " violations\n" << first_); \
    CHECK(rc_.blocks > 0);                                                                                 \
    CHECK(rc_.violations.empty());                                                                         \
  } while (0)
