// What the viewer replays is an order the kernel runs: every lesson's default
// problem and every shipped trace (host model and GPU-recorded), loaded the
// way the viewer loads them (load_trace: the viewer's own TraceIndex), at both
// granularities, checked by pa::trace::check_replay_order block by block.
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "core/background.hpp"
#include "core/lesson_problem.hpp"
#include "core/trace_files.hpp"
#include "core/trace_load.hpp"
#include "pa/trace/replay.hpp"
#include "pa/trace/trace_file.hpp"

using namespace pa;
using namespace pa::viewer;

namespace {

// Every block of a loaded trace; returns the number of blocks checked.
int check_loaded(const LoadedTrace& t, const std::string& what) {
  int blocks = 0;
  for (int b = 0; b < t.index.num_blocks(); ++b) {
    const auto& steps = t.index.steps(b);
    std::vector<std::uint32_t> order;
    for (int k = 0; k < t.index.num_steps(b); ++k) {
      const auto ev = t.index.events_of(b, k);
      order.insert(order.end(), ev.begin(), ev.end());
    }
    // The index's step ranges are offsets into its global order: rebase them.
    std::vector<trace::ReplayStep> local(steps.begin(), steps.end());
    std::uint32_t at = 0;
    for (auto& s : local) {
      s.begin = at;
      at += s.count;
    }
    const auto v = trace::check_replay_order(t.events, order, local, t.index.granularity());
    INFO(what << ", block " << describe_block(t.index.block(b), t.stage) << ": " << (v.empty() ? "" : v.front()));
    CHECK(v.empty());
    CHECK(t.index.num_steps(b) > 0);
    ++blocks;
  }
  return blocks;
}

}  // namespace

TEST_CASE("replay truth: every lesson's default problem replays in kernel order", "[viewer][replay]") {
  int loaded = 0, blocks = 0;
  for (int lesson = 0; lesson <= 8; ++lesson) {
    const auto stage = lesson == 0 ? trace::Stage::qk : static_cast<trace::Stage>(lesson);
    for (Granularity g : {Granularity::instruction, Granularity::step}) {
      LoadRequest r;
      r.kind = LoadRequest::Kind::model;
      r.spec = lesson_problem_of(lesson, ProblemSpec{}, stage, 0).spec;
      r.stage = stage;
      r.granularity = g;
      LoadControl ctl;
      const LoadedTrace t = load_trace(r, ctl);
      INFO("lesson " << lesson << ": " << t.message);  // a coverage note, not a failure
      REQUIRE(t.index.num_blocks() >= 1);
      blocks += check_loaded(t, "lesson " + std::to_string(lesson));
      ++loaded;
    }
  }
  REQUIRE(loaded == 18);
  CHECK(blocks >= 18);
}

TEST_CASE("replay truth: every shipped trace replays in kernel order", "[viewer][replay]") {
  const auto files = list_trace_files(PA_ASSETS_DIR "/traces");
  int host = 0, gpu = 0, blocks = 0;
  for (const auto& f : files) {
    for (Granularity g : {Granularity::instruction, Granularity::step}) {
      LoadRequest r;
      r.kind = LoadRequest::Kind::file;
      r.path = f.path;
      r.granularity = g;
      LoadControl ctl;
      const LoadedTrace t = load_trace(r, ctl);
      blocks += check_loaded(t, f.path);
      if (g == Granularity::instruction) (t.source == trace::kHostModelSource ? host : gpu) += 1;
    }
  }
  // One trace per stage from the host model and from the GPU.
  CHECK(host == 8);
  CHECK(gpu == 8);
  CHECK(blocks >= 2 * 16);
}
