// Work off the UI thread: one background task at a time with an atomic
// progress, a phase label and cooperative cancellation. Plain C++ (no
// window), so its state machine is unit-tested (tests/viewer/test_background.cpp).
//
//   idle --start--> running --work returns--> done    --take()-------> idle
//                           --work throws---> failed  --take_error()-> idle
//                           --cancel()------> cancelled (result dropped)
//   start() while running cancels the old job: it keeps running on its own
//   thread until its next check(), and its result is never delivered.
//
// Nothing a job throws escapes: the message becomes error() for the window.
#pragma once
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pa::viewer {

// Thrown by LoadControl::check() inside a job that was cancelled.
struct LoadCancelled : std::exception {
  const char* what() const noexcept override { return "cancelled"; }
};

// Shared between the UI thread (reads progress, cancels) and one job
// (reports progress, checks for cancellation).
class LoadControl {
 public:
  // Fraction done in [0, 1]; never goes down (a later, smaller value is ignored).
  void set_progress(float f) {
    if (!(f == f)) return;  // NaN
    f = f < 0 ? 0.0f : f > 1 ? 1.0f : f;
    float cur = progress_.load(std::memory_order_relaxed);
    while (f > cur && !progress_.compare_exchange_weak(cur, f, std::memory_order_relaxed)) {
    }
    if (observer_) observer_(progress_.load(std::memory_order_relaxed));
  }
  float progress() const { return progress_.load(std::memory_order_relaxed); }
  // Progress inside a sub-range: report(x) with x in [0,1] maps to [lo, hi].
  void set_range(float lo, float hi) {
    lo_ = lo;
    hi_ = hi;
    set_progress(lo);
  }
  void report(float x) { set_progress(lo_ + (hi_ - lo_) * x); }
  // A string literal naming what the job does now ("reading the file").
  void set_phase(const char* p) { phase_.store(p, std::memory_order_relaxed); }
  const char* phase() const { return phase_.load(std::memory_order_relaxed); }
  void cancel() { cancel_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancel_.load(std::memory_order_relaxed); }
  void check() const {
    if (cancelled()) throw LoadCancelled();
  }
  // Tests: sees every progress value the job reports (called on the job's thread).
  void set_observer(std::function<void(float)> f) { observer_ = std::move(f); }

 private:
  std::atomic<float> progress_{0.0f};
  std::atomic<const char*> phase_{""};
  std::atomic<bool> cancel_{false};
  float lo_ = 0.0f, hi_ = 1.0f;  // job thread only
  std::function<void(float)> observer_;
};

enum class TaskStatus { idle, running, done, failed, cancelled };

template <class T>
class BackgroundTask {
 public:
  using Work = std::function<T(LoadControl&)>;

  BackgroundTask() = default;
  BackgroundTask(const BackgroundTask&) = delete;
  BackgroundTask& operator=(const BackgroundTask&) = delete;
  // Cancels every job and waits for them (each ends at its next check()).
  ~BackgroundTask() {
    if (cur_) cur_->ctl.cancel();
    for (auto& r : retired_) r.job->ctl.cancel();
    if (cur_thread_.joinable()) cur_thread_.join();
    for (auto& r : retired_)
      if (r.thread.joinable()) r.thread.join();
  }

  // Starts work on a new thread; a job still running is cancelled first.
  void start(Work work, std::function<void(LoadControl&)> setup = {}) {
    cancel();
    auto job = std::make_shared<Job>();
    if (setup) setup(job->ctl);
    cur_ = job;
    status_ = TaskStatus::running;
    cur_thread_ = std::thread([job, w = std::move(work)] {
      try {
        job->result.emplace(w(job->ctl));
      } catch (const LoadCancelled&) {
        job->was_cancelled = true;
      } catch (const std::exception& e) {
        job->error = e.what();
        if (job->error.empty()) job->error = "unknown error (empty exception message)";
      } catch (...) {
        job->error = "unknown error (a non-standard exception)";
      }
      job->finished.store(true, std::memory_order_release);
    });
  }

  // Cancels the running job (if any); status becomes cancelled.
  void cancel() {
    reap();
    if (!cur_) return;
    cur_->ctl.cancel();
    if (status_ == TaskStatus::running) status_ = TaskStatus::cancelled;
    retired_.push_back({std::move(cur_), std::move(cur_thread_)});
    cur_.reset();
  }

  // UI thread, once per frame: notices a finished job. Never blocks.
  TaskStatus poll() {
    reap();
    if (cur_ && cur_->finished.load(std::memory_order_acquire)) {
      if (cur_thread_.joinable()) cur_thread_.join();  // it has ended: immediate
      if (cur_->was_cancelled || cur_->ctl.cancelled()) {
        status_ = TaskStatus::cancelled;
        pending_.reset();
      } else if (cur_->result) {
        status_ = TaskStatus::done;
        pending_ = std::move(cur_->result);
      } else {
        status_ = TaskStatus::failed;
        error_ = cur_->error;
      }
      cur_.reset();
    }
    return status_;
  }
  // Blocks until the current job ends (screenshot and bench modes), then polls.
  TaskStatus wait() {
    if (cur_thread_.joinable()) cur_thread_.join();
    return poll();
  }

  TaskStatus status() const { return status_; }
  bool running() const { return status_ == TaskStatus::running; }
  float progress() const { return cur_ ? cur_->ctl.progress() : status_ == TaskStatus::done ? 1.0f : 0.0f; }
  const char* phase() const { return cur_ ? cur_->ctl.phase() : ""; }

  // The finished result (once); status goes back to idle.
  std::optional<T> take() {
    std::optional<T> out;
    if (status_ == TaskStatus::done) {
      out = std::move(pending_);
      pending_.reset();
      status_ = TaskStatus::idle;
    }
    return out;
  }
  // The failure's message (once); status goes back to idle.
  std::string take_error() {
    std::string e;
    if (status_ == TaskStatus::failed) {
      e = std::move(error_);
      error_.clear();
      status_ = TaskStatus::idle;
    }
    return e;
  }
  // Acknowledge a cancellation.
  void clear_cancelled() {
    if (status_ == TaskStatus::cancelled) status_ = TaskStatus::idle;
  }
  // Jobs cancelled but still on their way out (tests, diagnostics).
  int retired_jobs() {
    reap();
    return static_cast<int>(retired_.size());
  }

 private:
  struct Job {
    LoadControl ctl;
    std::atomic<bool> finished{false};
    std::optional<T> result;
    std::string error;
    bool was_cancelled = false;
  };
  struct Retired {
    std::shared_ptr<Job> job;
    std::thread thread;
  };
  // Joins retired jobs that have ended (never waits on a running one).
  void reap() {
    for (std::size_t i = 0; i < retired_.size();) {
      if (retired_[i].job->finished.load(std::memory_order_acquire)) {
        if (retired_[i].thread.joinable()) retired_[i].thread.join();
        retired_.erase(retired_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }

  std::shared_ptr<Job> cur_;
  std::thread cur_thread_;
  std::vector<Retired> retired_;
  TaskStatus status_ = TaskStatus::idle;
  std::optional<T> pending_;
  std::string error_;
};

}  // namespace pa::viewer
