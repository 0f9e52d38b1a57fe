// Progress of one long run for a front end's progress line (tools/run_progress.hpp; docs/limits.md,
// "Progress"), with no terminal in sight: the code doing the work names each phase with the units
// it counts ("lowering", 1,024 rank-steps), then publishes how many are done; the front end's
// reporter thread reads the count from another thread and prints it.
//
// The count is one relaxed atomic, stored by the worker every `every` units (ProgressCount): a
// store every few thousand ops costs nothing next to the ops themselves, and nothing at all when
// no front end asked for progress (a null Progress*: sweeps, tune, the tests, the benchmarks).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace csim::core {

class Progress {
 public:
  virtual ~Progress() = default;
  // A new phase of `total` units named `unit` ("ops", "rank-steps"); total 0: nothing counted, the
  // elapsed time only. The count restarts at 0.
  void begin(const std::string& phase, std::int64_t total, const std::string& unit) {
    ended_ = done_.exchange(0, std::memory_order_relaxed);
    on_phase(phase, total, unit);
  }
  void set_done(std::int64_t n) { done_.store(n, std::memory_order_relaxed); }
  void add_done(std::int64_t n) { done_.fetch_add(n, std::memory_order_relaxed); }
  std::int64_t done() const { return done_.load(std::memory_order_relaxed); }

 protected:
  // Told of each phase (begin), on the worker's thread: the front end's reporter keeps its name,
  // total and unit.
  virtual void on_phase(const std::string& phase, std::int64_t total, const std::string& unit) = 0;
  // Within on_phase: the count the phase before reached when this one began.
  std::int64_t ended() const { return ended_; }

 private:
  std::atomic<std::int64_t> done_{0};
  std::int64_t ended_ = 0;  // written and read on the worker's thread only (begin, on_phase)
};

// One phase counted by one thread: begins the phase on `progress` (nothing when it is null), then
// counts units and publishes the count once `every` more units are done, and at finish().
class ProgressCount {
 public:
  ProgressCount() = default;
  ProgressCount(Progress* progress, const std::string& phase, std::int64_t total,
                const std::string& unit, std::int64_t every = 4096)
      : progress_(progress), every_(every) {
    if (progress_) progress_->begin(phase, total, unit);
  }
  void add(std::int64_t n = 1) {
    done_ += n;
    if (progress_ && done_ - published_ >= every_) publish();
  }
  void finish() {
    if (progress_) publish();
  }
  std::int64_t done() const { return done_; }

 private:
  void publish() {
    progress_->set_done(done_);
    published_ = done_;
  }
  Progress* progress_ = nullptr;
  std::int64_t every_ = 4096;
  std::int64_t done_ = 0;
  std::int64_t published_ = 0;
};

}  // namespace csim::core
