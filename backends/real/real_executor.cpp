// Host side of real execution (docs/real-execution.md, "Issuing").
#include "backends/real/real_executor.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "backends/real/rank_link.hpp"

namespace csim::real {
namespace {

using core::DepKind;
using core::Op;
using core::OpId;
using core::OpKind;
using Clock = std::chrono::steady_clock;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Keeps the calling thread busy for `ns`: it sleeps while more than 200 us remain and yields for
// the rest, so Python and dispatch time cost real time without burning a core for long stretches.
void hold_for(TimeNs ns) {
  if (ns <= 0) return;
  const auto until = Clock::now() + std::chrono::nanoseconds(ns);
  for (;;) {
    const auto left = until - Clock::now();
    if (left <= std::chrono::nanoseconds(0)) return;
    if (left > std::chrono::microseconds(200))
      std::this_thread::sleep_for(left - std::chrono::microseconds(100));
    else
      std::this_thread::yield();
  }
}

// Shared state of one run: which ops have been issued (their events exist) and which host ops
// have finished. One lock and one condition variable; waits re-check `stop` so nothing hangs.
class Issue {
 public:
  explicit Issue(std::size_t ops) : issued_(ops, 0), host_done_(ops, 0) {}

  void mark_issued(OpId id, bool host_done) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      issued_[id] = 1;
      if (host_done) host_done_[id] = 1;
    }
    cv_.notify_all();
  }
  // false when the run stopped first.
  bool wait_issued(OpId id, bool need_host_done) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stop_ || (issued_[id] && (!need_host_done || host_done_[id])); });
    return !stop_;
  }
  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }
  bool stopped() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stop_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> issued_, host_done_;
  bool stop_ = false;
};

}  // namespace

core::ExecutionResult RealExecutor::run(const core::Program& p, const core::RunControl& control) {
  if (p.symmetry.enabled())
    throw DeviceError("a rank-symmetric Program cannot run for real: lower it with symmetry off");
  const std::int64_t zero = link_ ? link_->clock_zero_ns() : steady_ns();
  auto since_zero = [zero] { return steady_ns() - zero; };
  // Which Program process owns an op (its issuing thread's); this run's is `me` (-1: all).
  const int me = link_ ? link_->rank() : -1;
  auto owner = [&p](OpId id) {
    return p.threads[static_cast<std::size_t>(p.ops[id].thread)].process;
  };
  auto mine = [&](OpId id) { return me < 0 || owner(id) == me; };
  std::vector<int> gpus;
  if (me < 0) {
    gpus = p.active_gpus;
  } else {
    for (const Op& op : p.ops)
      if (op.stream >= 0 && mine(op.id)) gpus.push_back(op.gpu);
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
  }
  // Ops other ranks wait for: their issue and completion are published.
  std::vector<char> wanted_elsewhere(p.ops.size(), 0);
  if (link_) {
    for (const Op& op : p.ops)
      for (const core::Dep& d : op.deps)
        if (owner(d.op) != owner(op.id)) wanted_elsewhere[d.op] = 1;
    rt_.set_completion_callback([this, &wanted_elsewhere](OpId id) {
      if (wanted_elsewhere[id]) link_->publish_done(id);
    });
  }
  rt_.open(p, gpus, zero);

  const std::size_t n = p.ops.size();
  std::vector<core::OpTiming> t(n);
  std::vector<std::vector<OpId>> ops_of(p.threads.size());
  for (const Op& op : p.ops) {
    if (mine(op.id)) ops_of[static_cast<std::size_t>(op.thread)].push_back(op.id);
  }
  // The emulated GIL: one real mutex per process that has one.
  std::vector<std::unique_ptr<std::mutex>> gil(p.processes.size());
  for (auto& g : gil) g = std::make_unique<std::mutex>();

  Issue issue(n);
  std::mutex err_mu;
  std::exception_ptr first_error;
  std::atomic<bool> cancelled{false};

  auto issue_thread = [&](std::size_t th) {
    const core::ThreadDesc& td = p.threads[th];
    const bool has_gil =
        options_.emulate_gil && p.processes[static_cast<std::size_t>(td.process)].has_gil;
    std::vector<OpId> stream_deps;
    try {
      for (OpId id : ops_of[th]) {
        if (control.cancel && control.cancel->load()) {
          cancelled = true;
          break;
        }
        const Op& op = p.ops[id];
        core::OpTiming& tm = t[id];
        // Host waits, and the events that stream waits need: a dep must have been issued before
        // a stream can wait for it (as cudaStreamWaitEvent needs a recorded event). A stream
        // waiting for a host op waits on the host instead.
        stream_deps.clear();
        bool ok = true;
        for (const core::Dep& d : op.deps) {
          const bool host_dep = p.ops[d.op].stream < 0;
          if (!mine(d.op)) {
            // Another rank's op: known through the coordinator; a stream here cannot wait for a
            // stream there, so a stream dependency is waited for on the host too.
            ok = host_dep ? link_->wait_issued(d.op, true) : link_->wait_done(d.op);
            if (!ok) break;
            continue;
          }
          ok = issue.wait_issued(d.op, host_dep);
          if (!ok) break;
          if (host_dep) continue;
          if (d.kind == DepKind::kHostWaits || op.stream < 0)
            rt_.host_wait(d.op);
          else
            stream_deps.push_back(d.op);
        }
        if (!ok) break;
        tm.ready_ns = since_zero();
        if (op.python_ns > 0 && has_gil) {
          std::lock_guard<std::mutex> g(*gil[static_cast<std::size_t>(td.process)]);
          tm.gil_wait_ns = since_zero() - tm.ready_ns;
          tm.python_start_ns = since_zero();
          if (op.kind == OpKind::kHostWork) tm.start_ns = tm.python_start_ns;
          hold_for(op.python_ns);
        } else {
          tm.python_start_ns = since_zero();
          if (op.kind == OpKind::kHostWork) tm.start_ns = tm.python_start_ns;
          hold_for(op.python_ns);
        }
        hold_for(op.dispatch_ns);
        if (op.stream >= 0) rt_.enqueue(op, stream_deps);
        tm.issue_end_ns = since_zero();
        if (op.stream < 0) {
          if (op.kind == OpKind::kMarker) tm.start_ns = tm.issue_end_ns;
          tm.end_ns = tm.issue_end_ns;
        }
        issue.mark_issued(id, op.stream < 0);
        if (link_ && wanted_elsewhere[id]) link_->publish_issued(id, op.stream < 0);
        if (control.progress) control.progress->add_done(1);
      }
    } catch (...) {
      // An error after the run was stopped (a wait woken by the abort) is a consequence, not a
      // cause: only the first error of a running run is reported.
      std::lock_guard<std::mutex> lk(err_mu);
      if (!first_error && !issue.stopped()) first_error = std::current_exception();
    }
    bool failed = false;
    {
      std::lock_guard<std::mutex> lk(err_mu);  // another issuing thread may be setting it
      failed = static_cast<bool>(first_error);
    }
    if (failed || cancelled) {
      issue.stop();
      rt_.abort();
    }
  };

  // The coordinator aborts this rank when another one failed or the run was cancelled.
  if (link_) {
    link_->on_abort([&](const std::string&) {
      issue.stop();
      rt_.abort();
    });
  }
  std::vector<std::thread> threads;
  threads.reserve(p.threads.size());
  for (std::size_t th = 0; th < p.threads.size(); ++th) threads.emplace_back(issue_thread, th);
  for (std::thread& th : threads) th.join();
  // After a failure the runtime was aborted, and its finish() may throw that it was ("the run
  // was aborted"): a consequence, so the first error, the cause, is what run() throws.
  std::exception_ptr finish_error;
  try {
    rt_.finish();
  } catch (...) {
    finish_error = std::current_exception();
  }
  if (link_) link_->on_abort(nullptr);
  if (first_error) std::rethrow_exception(first_error);
  if (finish_error) std::rethrow_exception(finish_error);

  core::ExecutionResult res;
  const RuntimeInfo info = rt_.info();
  res.backend = info.backend;
  res.measured = info.measured;
  res.notes = info.notes;
  res.complete = !cancelled && !issue.stopped();
  for (const Op& op : p.ops) {
    if (op.stream < 0 || !mine(op.id)) continue;
    TimeNs s = -1, e = -1;
    if (rt_.op_interval(op.id, &s, &e)) {
      t[op.id].start_ns = s;
      t[op.id].end_ns = e;
    }
  }
  res.timings = std::move(t);
  return res;
}

}  // namespace csim::real
