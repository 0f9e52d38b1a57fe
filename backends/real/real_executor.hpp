// Real execution of a Program (docs/real-execution.md): one host thread per Program thread issues
// its ops in order, as the training script's threads would; Python time holds an emulated GIL (a
// real process-wide mutex) and dispatch time does not, as PyTorch releases the GIL around ATen
// calls; stream ops go to a DeviceRuntime (CUDA, or the CPU stand-in), which measures when they
// ran. The same Program the simulator runs, so the two traces can be compared op by op.
#pragma once

#include <string>

#include "backends/real/device_runtime.hpp"
#include "core/program/executor.hpp"

namespace csim::real {

class RankLink;

struct RealOptions {
  bool emulate_gil = true;  // a process with has_gil serialises its threads' Python time
};

class RealExecutor : public core::Executor {
 public:
  RealExecutor(DeviceRuntime& runtime, RealOptions options) : rt_(runtime), options_(options) {}
  // A rank of a multi-process run (launch mode "processes"): runs only the threads of Program
  // process link->rank() and learns about the other ranks' ops through the link.
  RealExecutor(DeviceRuntime& runtime, RealOptions options, RankLink* link)
      : rt_(runtime), options_(options), link_(link) {}
  std::string name() const override { return "real"; }
  // Runs every active GPU of `program` in this process (launch mode "threads"). Throws
  // BackendUnavailable / DeviceError from the runtime; a cancel (RunControl) stops issuing, keeps
  // what finished and returns complete = false.
  core::ExecutionResult run(const core::Program& program, const core::RunControl& control) override;

 private:
  DeviceRuntime& rt_;
  RealOptions options_;
  RankLink* link_ = nullptr;
};

}  // namespace csim::real
