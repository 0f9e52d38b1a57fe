// CPU stand-in for GPUs (docs/real-execution.md, "Stand-in device"): one worker thread per Program
// stream plays that stream. An op waits for its stream deps, then keeps its worker busy for a
// duration taken from the simulator (scaled by time_scale); a collective's members meet at a real
// rendezvous and finish together. Everything around it (issuing threads, GIL emulation, host
// waits, event ordering, timing, trace) is the real executor's code, so it runs for real in CI.
// Its timings are never measurements: the trace says backend "cpu-standin", measured false.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/real/device_runtime.hpp"
#include "core/program/executor.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::real {

struct StandinOptions {
  double time_scale = 1.0;  // stand-in durations = simulated durations x time_scale
};

// How long each op keeps its stand-in stream busy, from a simulation of the same Program:
// end - start for ordinary ops; for a collective, end minus the latest start of its instance's
// members (the transfer once everyone has arrived: the rendezvous itself supplies the waiting).
std::vector<TimeNs> standin_busy_ns(const core::Program& program,
                                    const core::ExecutionResult& simulated);

class StandinRuntime : public DeviceRuntime {
 public:
  StandinRuntime(std::vector<TimeNs> busy_ns, StandinOptions options);
  ~StandinRuntime() override;

  RuntimeInfo info() const override;
  void open(const core::Program& program, const std::vector<int>& gpus,
            std::int64_t clock_zero_ns) override;
  void enqueue(const core::Op& op, const std::vector<core::OpId>& stream_deps) override;
  void host_wait(core::OpId op) override;
  void finish() override;
  bool op_interval(core::OpId op, TimeNs* start_ns, TimeNs* end_ns) const override;
  void abort() override;
  void set_completion_callback(std::function<void(core::OpId)> f) override {
    on_done_ = std::move(f);
  }
  bool reports_completions() const override { return true; }
  // Multi-process runs: collectives meet through this instead of in-process counting. It gets the
  // instance and this member's start and returns the last member's arrival (-1: aborted).
  void set_rendezvous(std::function<TimeNs(int, TimeNs)> f) { rendezvous_ = std::move(f); }

 private:
  struct Task {
    core::OpId op = core::kNoOp;
    std::vector<core::OpId> deps;
  };
  struct Instance {
    int expected = 0, arrived = 0;
    TimeNs last_arrival_ns = 0;
  };

  void work(int worker);
  TimeNs now_ns() const;

  std::vector<TimeNs> busy_ns_;
  StandinOptions options_;
  const core::Program* program_ = nullptr;
  std::int64_t clock_zero_ns_ = 0;

  // One lock for queues, completion and rendezvous: the stand-in favours obvious correctness
  // (it runs under ThreadSanitizer in CI) over contention, which a few thousand ops never reach.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> worker_of_stream_;  // -1: a stream of another process
  std::vector<std::deque<Task>> queues_;
  std::vector<std::thread> workers_;
  std::vector<char> enqueued_, done_;
  std::vector<TimeNs> start_ns_, end_ns_;
  std::vector<Instance> instances_;
  bool closing_ = false, aborted_ = false;
  std::function<void(core::OpId)> on_done_;
  std::function<TimeNs(int, TimeNs)> rendezvous_;
};

}  // namespace csim::real
