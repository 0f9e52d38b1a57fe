// The device side of real execution (docs/real-execution.md): what the real executor needs from
// the GPUs of one process. Two implementations: backends/cuda (CUDA streams and events, cuBLAS,
// NCCL) and backends/real/standin_runtime (CPU worker threads that stand in for GPU streams, so the
// executor, launcher, GIL emulation and trace path run for real without a GPU).
//
// The executor (backends/real/real_executor) owns the host side: issuing threads, the emulated
// GIL, Python and dispatch time, host waits, host work. It calls a DeviceRuntime to enqueue each
// stream op and to order streams; the runtime measures when each op ran on its stream.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/program/program.hpp"
#include "core/units.hpp"

namespace csim::real {

// A runtime that cannot run here (no GPU, no driver, a CUDA or NCCL error at start-up) throws
// csim::BackendUnavailable (core/error.hpp): simrun prints what() on one line and exits 3.

// Thrown when an op fails while running (CUDA error, NCCL error, device out of memory); the
// message names the op.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RuntimeInfo {
  std::string backend;    // "cuda" or "cpu-standin" (ExecutionResult::backend)
  bool measured = false;  // true only when timings come from real GPUs
  std::map<std::string, std::string> metadata;  // GPU name, driver, CUDA, NCCL versions, ...
  std::vector<std::string> notes;               // caveats carried into the trace
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual RuntimeInfo info() const = 0;

  // Prepares the streams of `gpus` (global GPU indices this process drives) and the communicators
  // of every group whose members are all among them. Called once, before any enqueue. `clock_zero`
  // is the run's time origin on the host steady clock (ns): op times are reported relative to it.
  virtual void open(const core::Program& program, const std::vector<int>& gpus,
                    std::int64_t clock_zero_ns) = 0;

  // Enqueues a stream op (compute, copy, collective, alloc, free) on op.stream, after making that
  // stream wait for `stream_deps` (ops already enqueued, on any stream of this process). Returns
  // without waiting for the op to run.
  virtual void enqueue(const core::Op& op, const std::vector<core::OpId>& stream_deps) = 0;

  // Blocks the calling host thread until `op` (already enqueued) has finished on its stream.
  virtual void host_wait(core::OpId op) = 0;

  // Waits for every enqueued op to finish.
  virtual void finish() = 0;

  // After finish(): when `op` ran on its stream, ns since clock_zero. false if it never ran.
  virtual bool op_interval(core::OpId op, TimeNs* start_ns, TimeNs* end_ns) const = 0;

  // Called from another thread when the run must stop (a failed issuing thread, Ctrl-C): wakes
  // every wait of this runtime (host_wait, collectives waiting for members) so that they return
  // or throw instead of hanging. CUDA: ncclCommAbort on the communicators.
  virtual void abort() {}

  // Multi-process runs: called with each op of this process when it has finished on its stream,
  // so that ranks waiting for it elsewhere can be told. Runtimes that cannot report completions
  // leave it unset (and the launcher refuses processes mode for them).
  virtual void set_completion_callback(std::function<void(core::OpId)> /*f*/) {}
  virtual bool reports_completions() const { return false; }
};

}  // namespace csim::real
