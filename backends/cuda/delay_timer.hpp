// Host timers that hold delays on CUDA streams: simrun --ranks replaces another rank's
// collective by its simulated duration on this rank's stream (docs/real-execution.md, "One rank
// of a large run"). The stream waits on a word in mapped host memory (cuStreamWaitValue32, see
// stream_delays.cpp); the stream's timer thread sees when the stream reached the delay, waits the
// duration from that moment, and writes the word. No CUDA here: the timer gets the CUDA side as
// callbacks, so its logic is unit-tested without a GPU (tests/cuda/test_delay_timer.cpp).
//
// Why not cudaLaunchHostFunc with a sleep: CUDA may run host functions of independent streams one
// at a time, so two streams' delays would add up, and sleep_for oversleeps by tens of µs (306 µs
// delays lasted 374-408 µs). The timer sleeps only until kSpinWindowNs before the deadline and
// spins (yielding) through the rest.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "core/units.hpp"

namespace csim::cuda {

// The steady clock in ns (the clock op times are paired with).
TimeNs steady_clock_ns();

// The last stretch before a deadline that a wait spins through instead of sleeping: Linux sleeps
// overshoot by up to ~60 µs (timer slack and wake-up); spinning 100 µs costs a core that long.
inline constexpr TimeNs kSpinWindowNs = 100'000;

// One step of waiting for `deadline_ns` at `now_ns`: done once it has passed; sleep for
// `sleep_ns` while more than the spin window is left (until the window starts); spin (yield and
// look again) inside the window.
struct WaitStep {
  enum class Kind { kDone, kSleep, kSpin };
  Kind kind = Kind::kDone;
  TimeNs sleep_ns = 0;  // kSleep only
};
WaitStep next_wait_step(TimeNs now_ns, TimeNs deadline_ns, TimeNs spin_window_ns = kSpinWindowNs);

// Returns at or after `deadline_ns` on steady_clock_ns(), sleeping then spinning as above.
void wait_until_ns(TimeNs deadline_ns, TimeNs spin_window_ns = kSpinWindowNs);

class DelayTimer {
 public:
  struct Delay {
    // Polled (from the timer's thread) until it returns true, with *reached_ns set to the host
    // steady-clock time at which the stream reached the delay: the delay counts from there, not
    // from when the timer noticed. May throw (the error goes to on_error).
    std::function<bool(TimeNs* reached_ns)> reached;
    TimeNs duration_ns = 0;
    // Lets the stream go on. Called exactly once per delay, in push order: by the timer's thread
    // (at the deadline, or at once after abort() or an error), or by push() once the timer has
    // ended. Must not throw.
    std::function<void()> release;
  };

  // `thread_init` runs first on the timer's thread (cudaSetDevice); `on_error` gets the message
  // of a `reached` that threw, after which every delay is released at once; `poll_ns`: how long
  // the thread sleeps between `reached` polls.
  explicit DelayTimer(std::function<void()> thread_init = nullptr,
                      std::function<void(const std::string&)> on_error = nullptr,
                      TimeNs poll_ns = 20'000);
  ~DelayTimer() { abort(); }
  DelayTimer(const DelayTimer&) = delete;
  DelayTimer& operator=(const DelayTimer&) = delete;

  void push(Delay d);
  // Releases every delay not yet released, now, so the stream drains, and ends the thread.
  void abort() noexcept;
  // Ends the thread once every pushed delay was held and released.
  void drain() noexcept;

  struct Stats {
    std::int64_t held = 0;     // delays released after their full duration
    std::int64_t cut = 0;      // delays released early (abort, error)
    TimeNs worst_late_ns = 0;  // largest release time - (reached + duration) over the held ones
  };
  Stats stats() const;

 private:
  void loop();
  // The next delay, or false when the thread should end (stopping, or drained and empty).
  bool take(Delay* d);
  void release_rest() noexcept;  // under no lock; the thread's exit path and abort()

  std::function<void()> thread_init_;
  std::function<void(const std::string&)> on_error_;
  const TimeNs poll_ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Delay> queue_;
  bool aborting_ = false;  // under mu_
  bool draining_ = false;  // under mu_
  bool ended_ = false;     // under mu_: the thread is past its last release; push() releases
  Stats stats_;            // under mu_
  std::mutex join_mu_;     // abort() and drain() may race (two failing issuing threads)
  std::thread thread_;
};

}  // namespace csim::cuda
