// run() for the real backends (stand-in, cuda): lower the scenario at full fidelity and run it on
// threads, processes or MPI ranks (docs/real-execution.md). run/run.cpp dispatches here.
#pragma once

#include <memory>

#include "backends/real/device_runtime.hpp"
#include "run/run.hpp"

namespace csim::run {

// Throws BackendUnavailable (exit 3) when the backend cannot run here, InputError for a launch
// mode this build or this start cannot do.
RunResult run_real(const RunRequest& request);

// The device runtime a threads-mode run of `program` uses: the stand-in (its durations simulated
// from `scenario`, times time_scale) or the CUDA runtime (with CUPTI when `cupti`). Throws
// BackendUnavailable.
std::unique_ptr<real::DeviceRuntime> make_device_runtime(const core::Scenario& scenario,
                                                         const core::Program& program,
                                                         Backend backend, double time_scale = 1.0,
                                                         bool cupti = false);

}  // namespace csim::run
