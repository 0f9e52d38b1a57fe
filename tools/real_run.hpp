// simrun --backend standin|cuda: lower a scenario at full fidelity and run it for real
// (docs/real-execution.md). Kept apart from simrun_app.cpp so the CLI stays wiring.
#pragma once

#include <memory>
#include <string>

#include "backends/real/device_runtime.hpp"

#include "tools/simrun_app.hpp"

namespace csim::app {

struct RealRunOptions {
  std::string backend = "standin";  // "standin" or "cuda"
  std::string launch = "threads";   // "threads" or "processes" ("mpi" not yet)
  double time_scale = 1.0;          // stand-in: simulated durations x this
  bool emulate_gil = true;          // a real mutex for each Python process's GIL
  int rank = -1;  // >= 0: run only this GPU's ops, the rest simulated (core/program_slice.hpp)
  // cuda: CUPTI per-kernel lanes and NVML counters in the trace (docs/real-execution.md)
  bool cupti = false;
};

// Throws BackendUnavailable (exit 3) when the backend cannot run here, InputError for a launch
// mode this build cannot do.
SimRun run_real(const core::Scenario& scenario, const RealRunOptions& options,
                const core::RunControl& control);

// The device runtime a threads-mode run of `program` uses: the stand-in (its durations simulated
// from `scenario`, times options.time_scale) or the CUDA runtime. Throws BackendUnavailable.
std::unique_ptr<real::DeviceRuntime> make_device_runtime(const core::Scenario& scenario,
                                                         const core::Program& program,
                                                         const RealRunOptions& options);

// One line: what the CUDA backend found on this machine (or why it is not in this build).
std::string cuda_status_line();

}  // namespace csim::app
