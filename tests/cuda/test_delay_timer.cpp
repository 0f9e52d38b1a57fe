// The host timer that holds simulated-elsewhere delays on CUDA streams (backends/cuda/
// delay_timer.hpp), without a GPU: the CUDA side (the start event's query, the word the stream
// waits on) is replaced by plain callbacks. The checks are orderings and lower bounds (a delay is
// never released before the stream reached it plus its duration), never how fast this machine is.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/delay_timer.hpp"

using namespace csim;
using cuda::DelayTimer;
using cuda::WaitStep;

namespace {

// What the delays' callbacks saw, in release order.
struct Log {
  std::mutex mu;
  std::vector<int> released;           // delay ids
  std::vector<TimeNs> released_at_ns;  // steady clock at release
  void release(int id) {
    std::lock_guard lock(mu);
    released.push_back(id);
    released_at_ns.push_back(cuda::steady_clock_ns());
  }
  std::size_t count() {
    std::lock_guard lock(mu);
    return released.size();
  }
};

DelayTimer::Delay delay(Log& log, int id, std::function<bool(TimeNs*)> reached, TimeNs ns) {
  DelayTimer::Delay d;
  d.reached = std::move(reached);
  d.duration_ns = ns;
  d.release = [&log, id] { log.release(id); };
  return d;
}

// Reached at a fixed host time (as if the stream got there then).
std::function<bool(TimeNs*)> reached_at(TimeNs t) {
  return [t](TimeNs* at) {
    *at = t;
    return true;
  };
}

std::function<bool(TimeNs*)> never_reached() {
  return [](TimeNs*) { return false; };
}

}  // namespace

TEST_CASE("next_wait_step: sleep until the spin window, spin through it, then done", "[cuda]") {
  using K = WaitStep::Kind;
  // Deadline 1 ms, window 100 us: at 0 sleep 900 us (to the window's start), at 950 us spin, at
  // and past the deadline done.
  const WaitStep far = cuda::next_wait_step(0, 1'000'000, 100'000);
  CHECK(far.kind == K::kSleep);
  CHECK(far.sleep_ns == 900'000);
  CHECK(cuda::next_wait_step(900'000, 1'000'000, 100'000).kind == K::kSpin);  // window's start
  CHECK(cuda::next_wait_step(950'000, 1'000'000, 100'000).kind == K::kSpin);
  CHECK(cuda::next_wait_step(1'000'000, 1'000'000, 100'000).kind == K::kDone);
  CHECK(cuda::next_wait_step(2'000'000, 1'000'000, 100'000).kind == K::kDone);
  // The default window is the 100 us the docs give.
  CHECK(cuda::next_wait_step(0, 100'001).kind == K::kSleep);
  CHECK(cuda::next_wait_step(0, 100'000).kind == K::kSpin);
}

TEST_CASE("wait_until_ns returns at or after its deadline", "[cuda]") {
  const TimeNs deadline = cuda::steady_clock_ns() + 300'000;  // 300 us: a sleep, then a spin
  cuda::wait_until_ns(deadline);
  CHECK(cuda::steady_clock_ns() >= deadline);
}

TEST_CASE("DelayTimer: delays end in push order, each after its reach plus its duration",
          "[cuda]") {
  Log log;
  std::atomic<int> init_calls{0};
  DelayTimer timer([&] { ++init_calls; });
  // Three delays of one stream, reached one after the other: each counts from its own reach.
  //   delay 0: reached at t0,        2 ms -> not before t0 + 2 ms
  //   delay 1: reached at t0 + 1 ms, 2 ms -> not before t0 + 3 ms
  //   delay 2: reached at t0 + 1 ms, 0 ns -> not before t0 + 1 ms (but after delay 1: stream order)
  const TimeNs t0 = cuda::steady_clock_ns();
  timer.push(delay(log, 0, reached_at(t0), 2'000'000));
  timer.push(delay(log, 1, reached_at(t0 + 1'000'000), 2'000'000));
  timer.push(delay(log, 2, reached_at(t0 + 1'000'000), 0));
  timer.drain();
  REQUIRE(log.released == std::vector<int>{0, 1, 2});
  CHECK(log.released_at_ns[0] >= t0 + 2'000'000);
  CHECK(log.released_at_ns[1] >= t0 + 3'000'000);
  CHECK(log.released_at_ns[2] >= log.released_at_ns[1]);
  CHECK(init_calls == 1);
  const DelayTimer::Stats st = timer.stats();
  CHECK(st.held == 3);
  CHECK(st.cut == 0);
  CHECK(st.worst_late_ns >= 0);
}

TEST_CASE("DelayTimer: a delay waits for the stream to reach it", "[cuda]") {
  Log log;
  std::atomic<TimeNs> reached_ns{-1};  // set by the test: "the stream got there"
  // The timer's polls of `reached`, counted: the test waits for the third one (an event, not a
  // sleep), by which the timer has twice seen the stream not there yet.
  std::mutex poll_mu;
  std::condition_variable polled;
  int polls = 0;
  DelayTimer timer(nullptr, nullptr, /*poll_ns=*/10'000);
  timer.push(delay(
      log, 0,
      [&](TimeNs* at) {
        {
          std::lock_guard lock(poll_mu);
          ++polls;
        }
        polled.notify_all();
        const TimeNs t = reached_ns.load();
        if (t < 0) return false;
        *at = t;
        return true;
      },
      1'000'000));
  {
    std::unique_lock lock(poll_mu);
    polled.wait(lock, [&] { return polls >= 3; });
  }
  CHECK(log.count() == 0);  // not reached: held however many polls that takes
  const TimeNs t = cuda::steady_clock_ns();
  reached_ns = t;
  timer.drain();
  REQUIRE(log.count() == 1);
  CHECK(log.released_at_ns[0] >= t + 1'000'000);
}

TEST_CASE("DelayTimer: abort releases every delay at once, and later pushes immediately",
          "[cuda]") {
  Log log;
  DelayTimer timer;
  // One delay the stream never reaches, and two behind it: only an abort lets the stream go.
  timer.push(delay(log, 0, never_reached(), 1'000'000));
  timer.push(delay(log, 1, reached_at(0), 1'000'000));
  timer.push(delay(log, 2, never_reached(), 1'000'000));
  timer.abort();
  CHECK(log.released == std::vector<int>{0, 1, 2});
  timer.push(delay(log, 3, never_reached(), 1'000'000));  // after the end: released in push
  CHECK(log.released == std::vector<int>{0, 1, 2, 3});
  const DelayTimer::Stats st = timer.stats();
  CHECK(st.held == 0);
  CHECK(st.cut == 4);
  timer.abort();  // idempotent, and the destructor's abort after it too
  CHECK(log.count() == 4);
}

TEST_CASE("DelayTimer: a failing reach probe reports its error and releases everything", "[cuda]") {
  Log log;
  std::mutex mu;
  std::string error;
  DelayTimer timer(nullptr, [&](const std::string& e) {
    std::lock_guard lock(mu);
    error = e;
  });
  timer.push(delay(
      log, 0, [](TimeNs*) -> bool { throw std::runtime_error("event query failed"); }, 1'000));
  timer.push(delay(log, 1, never_reached(), 1'000));
  timer.drain();  // returns: the error ended the timer
  CHECK(log.released == std::vector<int>{0, 1});
  std::lock_guard lock(mu);
  CHECK(error == "event query failed");
}
