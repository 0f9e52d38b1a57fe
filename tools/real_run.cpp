#include "tools/real_run.hpp"

#include <memory>

#include "backends/common/trace_builder.hpp"
#include "backends/real/real_executor.hpp"
#include "backends/real/standin_runtime.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#ifdef CSIM_HAVE_CUDA
#include "backends/cuda/cuda_runtime.hpp"
#endif

namespace csim::app {

std::string cuda_status_line() {
#ifdef CSIM_HAVE_CUDA
  return cuda::cuda_probe_line();
#else
  return "the cuda backend is not part of this build (CUDA toolkit or NCCL not found at configure "
         "time)";
#endif
}

namespace {

std::unique_ptr<real::DeviceRuntime> make_runtime(const core::Scenario& s, const core::Program& p,
                                                  const RealRunOptions& o) {
  if (o.backend == "standin") {
    // The stand-in's durations come from simulating the very Program it will run.
    sim::SimExecutor sim(s);
    const core::ExecutionResult simulated = sim.run(p, {});
    return std::make_unique<real::StandinRuntime>(real::standin_busy_ns(p, simulated),
                                                  real::StandinOptions{o.time_scale});
  }
#ifdef CSIM_HAVE_CUDA
  try {
    return cuda::make_cuda_runtime();
  } catch (const real::DeviceUnavailable& e) {
    throw BackendUnavailable(e.what());
  }
#else
  throw BackendUnavailable(cuda_status_line() + "; use --backend sim or --backend standin");
#endif
}

}  // namespace

SimRun run_real(const core::Scenario& scenario, const RealRunOptions& o,
                const core::RunControl& control) {
  if (o.launch != "threads")
    throw InputError("(command line)", "--launch",
                     o.launch + ": only the threads launch mode is implemented so far",
                     "use --launch threads");
  // Real execution needs every rank's ops: rank symmetry is a simulator shortcut.
  core::Scenario full = scenario;
  full.simulation.symmetry = false;
  SimRun run;
  run.program = core::lower(full);
  std::unique_ptr<real::DeviceRuntime> rt = make_runtime(full, run.program, o);
  real::RealExecutor exec(*rt, real::RealOptions{o.emulate_gil});
  try {
    run.result = exec.run(run.program, control);
  } catch (const real::DeviceUnavailable& e) {
    throw BackendUnavailable(e.what());
  }
  run.memory = core::memory_timeline(run.program, run.result.timings, full.cluster);
  run.trace = backend::build_trace(full, run.program, run.result, run.memory);
  run.trace.metadata["launch"] = o.launch;
  run.trace.metadata["runtime"] = rt->info().metadata;
  return run;
}

}  // namespace csim::app
