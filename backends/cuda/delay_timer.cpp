#include "backends/cuda/delay_timer.hpp"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

namespace csim::cuda {

TimeNs steady_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

WaitStep next_wait_step(TimeNs now_ns, TimeNs deadline_ns, TimeNs spin_window_ns) {
  const TimeNs left = deadline_ns - now_ns;
  if (left <= 0) return {WaitStep::Kind::kDone, 0};
  if (left > spin_window_ns) return {WaitStep::Kind::kSleep, left - spin_window_ns};
  return {WaitStep::Kind::kSpin, 0};
}

void wait_until_ns(TimeNs deadline_ns, TimeNs spin_window_ns) {
  for (;;) {
    const WaitStep s = next_wait_step(steady_clock_ns(), deadline_ns, spin_window_ns);
    switch (s.kind) {
      case WaitStep::Kind::kDone:
        return;
      case WaitStep::Kind::kSleep:
        std::this_thread::sleep_for(std::chrono::nanoseconds(s.sleep_ns));
        break;
      case WaitStep::Kind::kSpin:
        std::this_thread::yield();
        break;
    }
  }
}

DelayTimer::DelayTimer(std::function<void()> thread_init,
                       std::function<void(const std::string&)> on_error, TimeNs poll_ns)
    : thread_init_(std::move(thread_init)), on_error_(std::move(on_error)), poll_ns_(poll_ns) {
  thread_ = std::thread([this] { loop(); });
}

void DelayTimer::push(Delay d) {
  {
    std::lock_guard lock(mu_);
    if (!ended_) {
      queue_.push_back(std::move(d));
      cv_.notify_all();
      return;
    }
    ++stats_.cut;
  }
  d.release();  // the timer has stopped: nothing would ever release it
}

bool DelayTimer::take(Delay* d) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return aborting_ || draining_ || !queue_.empty(); });
  if (aborting_ || queue_.empty()) return false;
  *d = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void DelayTimer::loop() {
  std::string error;
  try {
    if (thread_init_) thread_init_();
  } catch (const std::exception& e) {
    error = e.what();
  }
  Delay d;
  while (error.empty() && take(&d)) {
    // Until the stream reaches the delay: poll, sleeping on the condition variable so that an
    // abort wakes the thread at once.
    TimeNs reached_ns = 0;
    bool reached = false;
    bool stop = false;
    try {
      while (!(reached = d.reached(&reached_ns))) {
        std::unique_lock lock(mu_);
        if (cv_.wait_for(lock, std::chrono::nanoseconds(poll_ns_), [this] { return aborting_; })) {
          stop = true;
          break;
        }
      }
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "the delay's reach probe threw";
    }
    // Then until its deadline: sleep (abortable) while far from it, spin the last stretch.
    const TimeNs deadline_ns = reached_ns + d.duration_ns;
    while (reached && !stop) {
      const WaitStep s = next_wait_step(steady_clock_ns(), deadline_ns);
      if (s.kind == WaitStep::Kind::kDone) break;
      std::unique_lock lock(mu_);
      if (s.kind == WaitStep::Kind::kSleep) {
        stop =
            cv_.wait_for(lock, std::chrono::nanoseconds(s.sleep_ns), [this] { return aborting_; });
      } else {
        stop = aborting_;
        lock.unlock();
        std::this_thread::yield();
      }
    }
    d.release();
    const TimeNs late_ns = steady_clock_ns() - deadline_ns;
    {
      std::lock_guard lock(mu_);
      if (reached && !stop) {
        ++stats_.held;
        stats_.worst_late_ns = std::max(stats_.worst_late_ns, late_ns);
      } else {
        ++stats_.cut;
      }
    }
    if (stop) break;
  }
  if (!error.empty() && on_error_) on_error_(error);
  release_rest();
}

void DelayTimer::release_rest() noexcept {
  std::deque<Delay> rest;
  {
    std::lock_guard lock(mu_);
    ended_ = true;
    rest.swap(queue_);
    stats_.cut += static_cast<std::int64_t>(rest.size());
  }
  for (Delay& d : rest) d.release();
}

void DelayTimer::abort() noexcept {
  {
    std::lock_guard lock(mu_);
    aborting_ = true;
  }
  cv_.notify_all();
  std::lock_guard join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

void DelayTimer::drain() noexcept {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  cv_.notify_all();
  std::lock_guard join_lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

DelayTimer::Stats DelayTimer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace csim::cuda
