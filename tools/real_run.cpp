#include "tools/real_run.hpp"

#include <memory>

#include "backends/common/trace_builder.hpp"
#include "backends/real/process_launcher.hpp"
#include "backends/real/rank_link.hpp"
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

namespace {

// Launch mode processes: one forked rank per Program process, each with its own stand-in runtime
// whose collectives meet through the coordinator (docs/real-execution.md, "Processes").
void run_processes(const core::Scenario& s, const RealRunOptions& o,
                   const core::RunControl& control, SimRun* run) {
  if (o.backend != "standin")
    throw BackendUnavailable(
        "--launch processes is implemented for --backend standin only so far "
        "(the cuda runtime bootstraps NCCL within one process)");
  sim::SimExecutor sim(s);
  const std::vector<TimeNs> busy = real::standin_busy_ns(run->program, sim.run(run->program, {}));
  const real::StandinOptions so{o.time_scale};
  real::RuntimeFactory factory = [&busy, so](real::RankLink& link) {
    auto rt = std::make_unique<real::StandinRuntime>(busy, so);
    rt->set_rendezvous(
        [&link](int instance, TimeNs start) { return link.arrive(instance, start); });
    return std::unique_ptr<real::DeviceRuntime>(std::move(rt));
  };
  real::LaunchReport report;
  run->result = real::launch_processes(run->program, factory, real::RealOptions{o.emulate_gil},
                                       control, real::LaunchOptions{}, &report);
  const real::RuntimeInfo info = real::StandinRuntime(busy, so).info();
  run->result.backend = info.backend;
  run->result.measured = info.measured;
  run->result.notes.insert(run->result.notes.begin(), info.notes.begin(), info.notes.end());
  run->failure = report.failure;
  nlohmann::json clocks = nlohmann::json::array();
  for (const real::ClockSync& c : report.clocks)
    clocks.push_back(
        {{"rank", c.rank}, {"offset_ns", c.offset_ns}, {"uncertainty_ns", c.uncertainty_ns}});
  run->extra_metadata["clock_sync"] = clocks;
  run->extra_metadata["ranks"] = report.ranks;
  run->extra_metadata["runtime"] = info.metadata;
}

}  // namespace

SimRun run_real(const core::Scenario& scenario, const RealRunOptions& o,
                const core::RunControl& control) {
  if (o.launch == "mpi")
    throw InputError("(command line)", "--launch", "mpi: not implemented yet",
                     "use --launch threads or --launch processes");
  // CUDA 13 builds for compute capability 7.5 and newer: older GPUs' scenarios stay simulated.
  const int cc = scenario.cluster.gpu.compute_capability;
  if (o.backend == "cuda" && cc > 0 && cc < 75)
    throw BackendUnavailable("the scenario's GPU " + scenario.cluster.gpu.name +
                             " (compute capability " + std::to_string(cc / 10) + "." +
                             std::to_string(cc % 10) +
                             ") cannot run with CUDA 13, which needs 7.5 or newer; simulate it, "
                             "or --set cluster.gpu=H200-SXM-141GB");
  // Real execution needs every rank's ops: rank symmetry is a simulator shortcut.
  core::Scenario full = scenario;
  full.simulation.symmetry = false;
  SimRun run;
  run.program = core::lower(full);
  if (o.launch == "processes") {
    try {
      run_processes(full, o, control, &run);
    } catch (const real::DeviceUnavailable& e) {
      throw BackendUnavailable(e.what());
    }
  } else {
    std::unique_ptr<real::DeviceRuntime> rt = make_runtime(full, run.program, o);
    real::RealExecutor exec(*rt, real::RealOptions{o.emulate_gil});
    try {
      run.result = exec.run(run.program, control);
    } catch (const real::DeviceUnavailable& e) {
      throw BackendUnavailable(e.what());
    }
    run.extra_metadata["runtime"] = rt->info().metadata;
  }
  run.memory = core::memory_timeline(run.program, run.result.timings, full.cluster);
  run.trace = backend::build_trace(full, run.program, run.result, run.memory);
  run.trace.metadata["launch"] = o.launch;
  for (auto it = run.extra_metadata.begin(); it != run.extra_metadata.end(); ++it)
    run.trace.metadata[it.key()] = it.value();
  return run;
}

}  // namespace csim::app
