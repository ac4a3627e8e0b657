// The background loader: its state machine (idle -> running -> done / failed
// / cancelled), monotonic progress, cancellation (of a running job, and by
// starting another), errors reported instead of thrown away; and the real
// load (host model, trace files) through it, with progress and cancellation;
// the bundled trace files the Trace tab lists (assets/traces/<source>/*.patrace).
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/background.hpp"
#include "core/trace_files.hpp"
#include "core/trace_load.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"

using namespace pa;
using namespace pa::viewer;
using namespace std::chrono_literals;

namespace {
// Polls until the task leaves `running` (bounded, so a hang fails the test).
TaskStatus settle(BackgroundTask<int>& t) {
  for (int i = 0; i < 2000 && t.poll() == TaskStatus::running; ++i) std::this_thread::sleep_for(5ms);
  return t.status();
}
}  // namespace

TEST_CASE("LoadControl: progress is clamped and never goes down", "[viewer][background]") {
  LoadControl c;
  CHECK(c.progress() == 0.0f);
  c.set_progress(0.5f);
  c.set_progress(0.2f);  // late, smaller: ignored
  CHECK(c.progress() == 0.5f);
  c.set_progress(2.0f);
  CHECK(c.progress() == 1.0f);
  c.set_progress(-1.0f);
  c.set_progress(0.0f / 0.0f);  // NaN
  CHECK(c.progress() == 1.0f);
  LoadControl r;
  r.set_range(0.2f, 0.6f);
  CHECK(r.progress() == 0.2f);
  r.report(0.5f);
  CHECK(r.progress() > 0.39f);
  CHECK(r.progress() < 0.41f);
  CHECK_FALSE(r.cancelled());
  CHECK_NOTHROW(r.check());
  r.cancel();
  CHECK(r.cancelled());
  CHECK_THROWS_AS(r.check(), LoadCancelled);
}

TEST_CASE("BackgroundTask: idle -> running -> done -> idle, result once", "[viewer][background]") {
  BackgroundTask<int> t;
  CHECK(t.status() == TaskStatus::idle);
  CHECK_FALSE(t.take().has_value());
  std::atomic<bool> go{false};
  t.start([&](LoadControl& c) {
    c.set_phase("waiting");
    c.set_progress(0.25f);
    while (!go) std::this_thread::sleep_for(1ms);
    return 42;
  });
  CHECK(t.status() == TaskStatus::running);
  CHECK(t.poll() == TaskStatus::running);  // never blocks
  CHECK_FALSE(t.take().has_value());       // nothing before it is done
  go = true;
  CHECK(settle(t) == TaskStatus::done);
  CHECK(t.progress() == 1.0f);
  const auto r = t.take();
  REQUIRE(r.has_value());
  CHECK(*r == 42);
  CHECK(t.status() == TaskStatus::idle);
  CHECK_FALSE(t.take().has_value());
}

TEST_CASE("BackgroundTask: an error is reported, not thrown away or thrown at the UI", "[viewer][background]") {
  BackgroundTask<int> t;
  t.start([](LoadControl&) -> int { throw std::runtime_error("cannot open 'x.patrace': No such file"); });
  CHECK(settle(t) == TaskStatus::failed);
  CHECK_FALSE(t.take().has_value());
  const std::string e = t.take_error();
  CHECK(e.find("x.patrace") != std::string::npos);
  CHECK(t.status() == TaskStatus::idle);
  // Exceptions that are not std::exception, or have no message, still say something.
  t.start([](LoadControl&) -> int { throw 7; });
  CHECK(settle(t) == TaskStatus::failed);
  CHECK_FALSE(t.take_error().empty());
}

TEST_CASE("BackgroundTask: cancel stops a job at its next check; its result is dropped", "[viewer][background]") {
  BackgroundTask<int> t;
  std::atomic<bool> started{false};
  t.start([&](LoadControl& c) {
    started = true;
    for (;;) {
      c.check();
      std::this_thread::sleep_for(1ms);
    }
    return 1;
  });
  while (!started) std::this_thread::sleep_for(1ms);
  t.cancel();
  CHECK(t.status() == TaskStatus::cancelled);
  CHECK_FALSE(t.take().has_value());
  // The cancelled job ends on its own; the task reaps it without blocking the caller.
  for (int i = 0; i < 2000 && t.retired_jobs() > 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(t.retired_jobs() == 0);
  t.clear_cancelled();
  CHECK(t.status() == TaskStatus::idle);
}

TEST_CASE("BackgroundTask: starting a new job cancels the old one, whose result never arrives", "[viewer][background]") {
  BackgroundTask<int> t;
  std::atomic<bool> release_old{false};
  std::atomic<bool> old_saw_cancel{false};
  t.start([&](LoadControl& c) {
    // Not cancellable until released (like the host model): finishes with a result.
    while (!release_old) std::this_thread::sleep_for(1ms);
    old_saw_cancel = c.cancelled();
    return 1;
  });
  t.start([](LoadControl&) { return 2; });
  release_old = true;
  CHECK(settle(t) == TaskStatus::done);
  CHECK(*t.take() == 2);
  for (int i = 0; i < 2000 && t.retired_jobs() > 0; ++i) std::this_thread::sleep_for(1ms);
  CHECK(old_saw_cancel);
  CHECK(t.poll() == TaskStatus::idle);  // the old result is never delivered
}

TEST_CASE("BackgroundTask: wait() blocks until the job ends; the destructor cancels and joins", "[viewer][background]") {
  {
    BackgroundTask<int> t;
    t.start([](LoadControl&) {
      std::this_thread::sleep_for(20ms);
      return 5;
    });
    CHECK(t.wait() == TaskStatus::done);
    CHECK(*t.take() == 5);
  }
  const auto t0 = std::chrono::steady_clock::now();
  {
    BackgroundTask<int> t;
    t.start([](LoadControl& c) {
      for (;;) {
        c.check();
        std::this_thread::sleep_for(1ms);
      }
      return 0;
    });
  }  // must not hang
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
}

// ---- the real load ----------------------------------------------------------

TEST_CASE("load_trace: host model, progress monotonic from 0 to 1, same index as a direct build", "[viewer][background][load]") {
  LoadRequest r;
  r.kind = LoadRequest::Kind::model;
  r.stage = trace::Stage::qk;
  std::vector<float> seen;
  std::mutex m;
  LoadControl c;
  c.set_observer([&](float p) {
    std::lock_guard<std::mutex> lk(m);
    seen.push_back(p);
  });
  const LoadedTrace t = load_trace(r, c);
  REQUIRE_FALSE(seen.empty());
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] >= seen[i - 1]);
  CHECK(seen.back() == 1.0f);
  const auto events = trace::model_events(r.spec, trace::Stage::qk, trace::Selection{});
  CHECK(t.events.size() == events.size());
  const TraceIndex direct(events, Granularity::instruction);
  CHECK(t.index.num_steps(0) == direct.num_steps(0));
  CHECK(t.message.empty());
  CHECK(t.block0.reads_k);
  CHECK_FALSE(t.block0.slot_physical.empty());
  CHECK(t.block0.slot_physical == compute_block_caches(r.spec, r.stage, t.cfg, events, direct, t.tables, 0).slot_physical);
}

TEST_CASE("load_trace: a stage without a host model is a message, not an error", "[viewer][background][load]") {
  for (trace::Stage st : {trace::Stage::cascade_merge, trace::Stage::optimized}) {
    if (trace::stage_is_modelled(st)) continue;  // its model has landed
    LoadRequest r;
    r.kind = LoadRequest::Kind::model;
    r.stage = st;
    LoadControl c;
    const LoadedTrace t = load_trace(r, c);
    CHECK(t.events.empty());
    CHECK(t.message.find("No replay") != std::string::npos);
    CHECK(t.message.find(trace::to_string(st)) != std::string::npos);
  }
}

TEST_CASE("load_trace: stages 7 and 8 load from the host model; a partial trace says what it leaves out", "[viewer][background][load]") {
  for (trace::Stage st : {trace::Stage::cascade_merge, trace::Stage::optimized}) {
    if (!trace::stage_is_modelled(st)) continue;
    LoadRequest r;
    r.kind = LoadRequest::Kind::model;
    r.stage = st;
    r.spec.context_lens = {100, 140};
    r.spec.shared_prefix_len = 64;
    LoadControl c;
    const LoadedTrace t = load_trace(r, c);
    CHECK_FALSE(t.events.empty());
    CHECK(t.index.num_blocks() >= 1);
    CHECK(t.index.block(t.block) == BlockKey{0, 0, 0});  // the selected block is shown first
    const std::string note = trace::model_coverage_note(r.spec, st);
    if (!note.empty()) CHECK(t.message.find(note) != std::string::npos);
    else CHECK(t.message.empty());
  }
}

TEST_CASE("load_trace: an invalid problem throws a message naming the bad value", "[viewer][background][load]") {
  LoadRequest r;
  r.kind = LoadRequest::Kind::model;
  r.stage = trace::Stage::qk;
  r.spec.head_size = 100;
  LoadControl c;
  CHECK_THROWS_WITH(load_trace(r, c), Catch::Matchers::ContainsSubstring("100"));
}

TEST_CASE("load_trace: trace files - valid, missing, corrupt, a directory", "[viewer][background][load]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "pa_viewer_load_test";
  std::filesystem::create_directories(dir);
  ProblemSpec spec;
  spec.context_lens = {40};
  trace::TraceData d;
  d.header.spec = spec;
  d.header.stage = trace::Stage::lv;
  d.header.source = "test";
  d.header.revision = "r1";
  d.events = trace::model_events(spec, trace::Stage::lv, trace::Selection{});
  const std::string good = (dir / "lv.patrace").string();
  trace::write_trace(good, d);

  LoadRequest r;
  r.kind = LoadRequest::Kind::file;
  r.path = good;
  LoadControl c;
  const LoadedTrace t = load_trace(r, c);
  CHECK(t.events.size() == d.events.size());
  CHECK(t.stage == trace::Stage::lv);
  CHECK(t.source == "test");
  CHECK(t.path == good);
  CHECK(t.index.num_blocks() == 1);
  CHECK(c.progress() == 1.0f);

  r.path = (dir / "missing.patrace").string();
  LoadControl c2;
  CHECK_THROWS_WITH(load_trace(r, c2), Catch::Matchers::ContainsSubstring("missing.patrace"));
  const std::string bad = (dir / "corrupt.patrace").string();
  { std::ofstream(bad) << "PALTRACE but then garbage"; }
  r.path = bad;
  LoadControl c3;
  CHECK_THROWS_WITH(load_trace(r, c3), Catch::Matchers::ContainsSubstring("corrupt.patrace"));
  r.path = dir.string();
  LoadControl c4;
  CHECK_THROWS_WITH(load_trace(r, c4), Catch::Matchers::ContainsSubstring("directory"));
  // Through the task: the error arrives as a message.
  BackgroundTask<LoadedTrace> task;
  task.start([r](LoadControl& ctl) { return load_trace(r, ctl); });
  CHECK(task.wait() == TaskStatus::failed);
  CHECK(task.take_error().find("directory") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("load_trace: cancellation before and during indexing throws LoadCancelled", "[viewer][background][load]") {
  LoadRequest r;
  r.kind = LoadRequest::Kind::model;
  r.stage = trace::Stage::qk;
  LoadControl c;
  c.cancel();
  CHECK_THROWS_AS(load_trace(r, c), LoadCancelled);
  // Cancelled from the progress callback once indexing has begun (a big trace: many checks).
  r.spec.context_lens = {3000};
  LoadControl c2;
  LoadControl* p = &c2;
  c2.set_observer([p](float f) {
    if (f > 0.7f) p->cancel();
  });
  CHECK_THROWS_AS(load_trace(r, c2), LoadCancelled);
  // A re-index of loaded events at the other granularity.
  LoadRequest ri;
  ri.kind = LoadRequest::Kind::reindex;
  ri.stage = trace::Stage::qk;
  ri.events = std::make_shared<const std::vector<trace::Event>>(trace::model_events(ri.spec, ri.stage, trace::Selection{}));
  ri.granularity = Granularity::step;
  LoadControl c3;
  const LoadedTrace t = load_trace(ri, c3);
  CHECK(t.index.granularity() == Granularity::step);
  CHECK(t.index.num_steps(0) < TraceIndex(*ri.events, Granularity::instruction).num_steps(0));
}

TEST_CASE("bundled traces: the Trace tab lists the repository's *.patrace files one level down", "[viewer][background][files]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(PA_ASSETS_DIR) / "traces";
  REQUIRE(fs::is_directory(dir));
  const std::vector<TraceFileEntry> files = list_trace_files(dir);
  // What is shipped: assets/traces/<source>/<stage>.patrace, none directly in assets/traces.
  std::vector<std::string> want;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".patrace") want.push_back(e.path().lexically_relative(dir).generic_string());
  std::sort(want.begin(), want.end());
  REQUIRE(want.size() >= 2);
  std::vector<std::string> got;
  for (const auto& f : files) got.push_back(f.relative);
  CHECK(got == want);
  CHECK(std::is_sorted(got.begin(), got.end()));
  const auto has = [&](const std::string& r) { return std::find(got.begin(), got.end(), r) != got.end(); };
  CHECK(has("nvidia-h100/qk.patrace"));
  CHECK(has("host-model/qk.patrace"));
  for (const auto& f : files) {
    INFO(f.relative);
    CHECK(f.relative.ends_with(".patrace"));
    CHECK(fs::is_regular_file(f.path));
    CHECK(fs::equivalent(fs::path(f.path), dir / f.relative));
  }
  CHECK_FALSE(has("README.md"));
  // The listed paths open (the smallest ones: a recorded and a modelled trace).
  for (const std::string rel : {"nvidia-h100/q_to_smem.patrace", "host-model/q_to_smem.patrace"}) {
    if (!has(rel)) continue;
    LoadRequest r;
    r.kind = LoadRequest::Kind::file;
    r.path = files[std::find(got.begin(), got.end(), rel) - got.begin()].path;
    LoadControl c;
    const LoadedTrace t = load_trace(r, c);
    CHECK(t.stage == trace::Stage::q_to_smem);
    CHECK_FALSE(t.events.empty());
  }
}

TEST_CASE("bundled traces: recursive, *.patrace only, sorted; a missing directory is empty", "[viewer][background][files]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "pa_viewer_trace_list_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "b-source" / "deeper");
  fs::create_directories(dir / "a-source");
  fs::create_directories(dir / "empty.patrace");  // a directory with the extension: not a file
  for (const fs::path& p : {dir / "top.patrace", dir / "README.md", dir / "a-source" / "qk.patrace",
                           dir / "a-source" / "qk.patrace.tmp", dir / "a-source" / "notes.txt",
                           dir / "b-source" / "lv.patrace", dir / "b-source" / "deeper" / "x.patrace"})
    std::ofstream(p) << "x";
  std::vector<std::string> got;
  for (const auto& f : list_trace_files(dir)) got.push_back(f.relative);
  CHECK(got == std::vector<std::string>{"a-source/qk.patrace", "b-source/deeper/x.patrace", "b-source/lv.patrace",
                                        "top.patrace"});
  CHECK(list_trace_files(dir / "missing").empty());
  CHECK(list_trace_files(dir / "top.patrace").empty());  // a file, not a directory
  fs::remove_all(dir);
}
