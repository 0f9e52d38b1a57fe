// The one narrow interface every executor implements (docs/program.md, "Executors").
// The simulator and the CUDA executor both take a Program and return per-op timings; the trace
// builder (backends/common) turns Program + timings into the one Trace schema.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/program/program.hpp"
#include "core/progress.hpp"

namespace csim::core {

struct OpTiming {
  TimeNs ready_ns = -1;      // the issuing thread reached the op and its host waits were met
  TimeNs gil_wait_ns = 0;    // of which waiting for the GIL (after ready_ns)
  TimeNs core_wait_ns = 0;   // waiting for a free CPU core (after the GIL wait)
  TimeNs issue_end_ns = -1;  // host finished issuing (python + dispatch done)
  // Real executors: when the Python part started (after the GIL wait), measured; the launch call
  // is then drawn from its end (python_start_ns + python_ns) to issue_end_ns, so it covers the
  // real enqueue and a device op never starts before its launch (docs/real-execution.md,
  // "Timestamps and causality"). -1 (the simulator): the launch is the last dispatch_ns.
  TimeNs python_start_ns = -1;
  TimeNs start_ns = -1;  // execution start: on its GPU stream, or on the host for host work
  TimeNs end_ns = -1;    // execution end
  // A collective: the NCCL algorithm and protocol the executor ran it with, recorded where it
  // chose them (the simulator's plan_collective); kAuto where it cannot know (NCCL's own tuner on
  // real GPUs, unless forced). The trace reports these, not a re-plan.
  CollectiveAlgo algo = CollectiveAlgo::kAuto;
  NcclProto proto = NcclProto::kAuto;
};

struct RunControl {
  const std::atomic<bool>* cancel = nullptr;  // set asynchronously (Ctrl-C): stop early
  // A front end's progress line (core/progress.hpp), told of each phase (lowering, preparing the
  // simulation, simulating, ...) and its count; null: none asked for.
  Progress* progress = nullptr;
};

struct ExecutionResult {
  std::string backend;                // "sim", "cuda", "cpu-standin"
  bool measured = false;              // true only for timings measured on real GPUs
  bool complete = true;               // false when cancelled
  std::vector<OpTiming> timings;      // indexed by OpId
  std::vector<std::string> notes;     // labelled caveats to carry into trace metadata
  std::int64_t events_processed = 0;  // simulator: discrete events handled
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  virtual ExecutionResult run(const Program& program, const RunControl& control) = 0;
};

}  // namespace csim::core
