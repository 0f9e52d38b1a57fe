#include "run/real_run.hpp"

#include <map>
#include <memory>
#include <optional>

#include "backends/common/launch_order.hpp"
#include "backends/common/trace_builder.hpp"
#include "backends/real/process_launcher.hpp"
#include "backends/real/rank_link.hpp"
#include "backends/real/real_executor.hpp"
#include "backends/real/standin_runtime.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "core/program/program_slice.hpp"
#include "profiler/nvml_sampler.hpp"
#ifdef CSIM_CUDA_MODULE
#include "profiler/cupti/cupti_records.hpp"
#include "run/cuda_loader.hpp"
#endif
#include "run/mpi_launch.hpp"
#include "run/rank_main.hpp"

namespace csim::run {

std::string cuda_status_line() {
#ifdef CSIM_CUDA_MODULE
  std::string why;
  const cuda::CudaModule* m = cuda_module(&why);
  return m ? m->probe_line() : why;
#else
  return "the cuda backend is not part of this build (CUDA toolkit or NCCL not found at configure "
         "time)";
#endif
}

namespace {

constexpr std::int64_t kNvmlPeriodMs = 100;  // NVML's own utilisation period is 1/6 s to 1 s

}  // namespace

std::unique_ptr<real::DeviceRuntime> make_device_runtime(const core::Scenario& s,
                                                         const core::Program& p, Backend backend,
                                                         double time_scale, bool cupti) {
  if (backend == Backend::kStandin) {
    // The stand-in's durations come from simulating the very Program it will run.
    sim::SimExecutor sim(s);
    const core::ExecutionResult simulated = sim.run(p, {});
    return std::make_unique<real::StandinRuntime>(real::standin_busy_ns(p, simulated),
                                                  real::StandinOptions{time_scale});
  }
#ifdef CSIM_CUDA_MODULE
  return require_cuda_module().make_runtime(cuda::CudaOptions{cupti});
#else
  (void)cupti;
  throw BackendUnavailable(cuda_status_line() + "; use --backend sim or --backend standin");
#endif
}

namespace {

// --cupti: the run's CUPTI records and NVML samples, added to its trace (docs/real-execution.md,
// "CUPTI and NVML").
void add_gpu_telemetry(real::DeviceRuntime& rt, const prof::NvmlSampler& nvml, RunResult* run) {
#ifdef CSIM_CUDA_MODULE
  const cuda::CuptiCapture c = require_cuda_module().take_capture(rt);
  cupti::append_to_trace(c.records, run->program, &run->trace);
  nlohmann::json& notes = run->trace.metadata["notes"];
  if (!nvml.available()) {
    notes.push_back("no NVML: utilisation counters not sampled (" + nvml.why_unavailable() + ")");
    return;
  }
  std::vector<prof::NvmlSample> samples = nvml.samples();
  for (prof::NvmlSample& s : samples) s.t_ns -= c.clock_zero_ns;  // sampled from steady zero
  std::map<int, int> gpu_of_device;  // NVML and CUDA order devices differently: match UUIDs
  for (int i = 0; i < nvml.device_count(); ++i) {
    const auto it = c.gpu_of_uuid.find(nvml.uuids()[static_cast<std::size_t>(i)]);
    if (it != c.gpu_of_uuid.end()) gpu_of_device[i] = it->second;
  }
  if (gpu_of_device.empty()) notes.push_back("NVML counters: no UUID matched, NVML index = GPU");
  prof::to_counters(samples, &run->trace, gpu_of_device);
  for (const std::string& p : nvml.problems()) notes.push_back(p);
#else
  (void)rt, (void)nvml, (void)run;
#endif
}

}  // namespace

namespace {

// Launch modes processes and mpi: one rank per Program process, each with its own runtime built
// in its own process (a CUDA context must not cross fork) whose cross-rank needs go through the
// coordinator: the stand-in's collective rendezvous, CUDA's NCCL unique ids
// (docs/real-execution.md, "Processes", "MPI"). Launch mode processes starts its ranks by exec of
// csim-rank, handing them the Program and this setup; mpirun started the MPI ranks.
void run_multiprocess(const core::Scenario& s, const RunRequest& o, const core::RunControl& control,
                      RunResult* run) {
  real::RankSetup setup;
  setup.runtime =
      o.backend == Backend::kStandin ? real::RankRuntime::kStandin : real::RankRuntime::kCuda;
  setup.time_scale = o.time_scale;
  setup.options = real::RealOptions{o.emulate_gil};
  const real::StandinOptions so{o.time_scale};
  if (o.backend == Backend::kStandin) {
    sim::SimExecutor sim(s);
    setup.standin_busy_ns = real::standin_busy_ns(run->program, sim.run(run->program, {}));
  }
#ifdef CSIM_CUDA_MODULE
  // Loaded before the ranks start, so that a missing module is one line here, not one per rank.
  if (o.backend == Backend::kCuda) (void)require_cuda_module();
#else
  if (o.backend == Backend::kCuda)
    throw BackendUnavailable(cuda_status_line() + "; use --backend sim or --backend standin");
#endif
  real::LaunchReport report;
  if (o.launch == Launch::kMpi) {
    if (!o.mpi)
      throw BackendUnavailable(
          "launch mode mpi is not part of this build (no MPI found at configure time: install "
          "libopenmpi-dev and reconfigure)");
    if (!o.mpi->started_by_mpirun())
      throw InputError("(command line)", "--launch",
                       "mpi: this simrun was not started by mpirun (one MPI rank per process of "
                       "the scenario's " +
                           run->program.strategy_label + ")",
                       "mpirun -np " + std::to_string(run->program.processes.size()) +
                           " simrun SCENARIO --launch mpi ...");
    const int world_size = o.mpi->world_size();
    if (world_size != static_cast<int>(run->program.processes.size()))
      throw InputError(
          "(command line)", "--launch",
          "mpi: this run has " + std::to_string(world_size) + " MPI ranks; the scenario's " +
              run->program.strategy_label + " has " +
              std::to_string(run->program.processes.size()) + " processes",
          "mpirun -np " + std::to_string(run->program.processes.size()) + " simrun ...");
    run->mpi_rank = o.mpi->world_rank();
    run->result = o.mpi->launch(run->program, rank_runtime_factory(setup), setup.options, control,
                                real::LaunchOptions{}, &report, &run->writer);
  } else {
    real::LaunchOptions launch;
    std::string why;
    launch.rank_exe = find_rank_executable(&why);
    if (launch.rank_exe.empty())
      throw InputError("(command line)", "--launch",
                       "processes: " + why + ": its ranks are started by exec of it",
                       "build it (cmake --build --preset release --target csim-rank), set " +
                           std::string(kRankExecutableEnv) + "=PATH, or use --launch threads");
    run->result = real::launch_processes(run->program, setup, control, launch, &report);
  }
  if (!run->writer) return;
  // A rank without a device is the backend being unavailable (exit 3), not a failed run.
  if (report.device_unavailable) throw BackendUnavailable(report.failure);
  real::RuntimeInfo info;
  if (o.backend == Backend::kStandin) {
    info = real::StandinRuntime(setup.standin_busy_ns, so).info();
  } else {
    info.backend = "cuda";
    info.measured = true;
  }
  run->result.backend = info.backend;
  run->result.measured = info.measured;
  run->result.notes.insert(run->result.notes.begin(), info.notes.begin(), info.notes.end());
  run->failure = report.failure;
  nlohmann::json clocks = nlohmann::json::array();
  for (const real::ClockSync& c : report.clocks)
    clocks.push_back(
        {{"rank", c.rank}, {"offset_ns", c.offset_ns}, {"uncertainty_ns", c.uncertainty_ns}});
  run->metadata["clock_sync"] = clocks;
  run->metadata["ranks"] = report.ranks;
  if (!info.metadata.empty()) run->metadata["runtime"] = info.metadata;
}

// --ranks R: simulates the whole scenario (rank symmetry allowed: GPU R's ops are those of its
// representative), then slices out R's threads with the collectives and peer copies as fixed
// delays of their simulated durations; `one` becomes the one-GPU scenario the slice runs on.
core::Program one_rank(const core::Scenario& s, int rank, const core::RunControl& control,
                       core::Scenario* one, nlohmann::json* md) {
  if (rank >= s.cluster.world_gpus())
    throw InputError("(command line)", "--ranks",
                     std::to_string(rank) + " is not a GPU of this " +
                         std::to_string(s.cluster.world_gpus()) + "-GPU cluster",
                     "GPUs are numbered from 0");
  const core::Program whole = core::lower(s, control.progress);
  const int rep = core::representative_of(whole, rank);
  if (rep < 0)
    throw InputError("(command line)", "--ranks", "GPU " + std::to_string(rank) + " is idle",
                     "pick a GPU the strategy uses");
  sim::SimExecutor sim(s);
  const core::ExecutionResult simulated = sim.run(whole, control);
  core::RankSlice slice = core::slice_rank(whole, rep, simulated.timings);
  *one = s;
  one->cluster.nodes = 1;
  one->cluster.gpus_per_node = 1;
  one->cluster.stragglers.clear();
  one->cluster.degraded_links.clear();
  one->simulation.symmetry = false;
  (*md)["rank_slice"] = {{"gpu", rank},
                         {"ops_of_gpu", rep},
                         {"world_gpus", s.cluster.world_gpus()},
                         {"replaced_by_simulated_delays", slice.replaced}};
  if (rep != rank)
    slice.program.warnings.push_back("GPU " + std::to_string(rank) + " mirrors GPU " +
                                     std::to_string(rep) + " (rank symmetry): its ops ran");
  return std::move(slice.program);
}

}  // namespace

RunResult run_real(const RunRequest& o) {
  const core::Scenario& scenario = *o.scenario;
  const core::RunControl& control = o.control;
  // CUDA 13 builds for compute capability 7.5 and newer: older GPUs' scenarios stay simulated.
  const int cc = scenario.cluster.gpu.compute_capability;
  if (o.backend == Backend::kCuda && cc > 0 && cc < 75)
    throw BackendUnavailable("the scenario's GPU " + scenario.cluster.gpu.name +
                             " (compute capability " + std::to_string(cc / 10) + "." +
                             std::to_string(cc % 10) +
                             ") cannot run with CUDA 13, which needs 7.5 or newer; simulate it, "
                             "or --set cluster.gpu=H200-SXM-141GB");
  // Real execution needs every rank's ops: rank symmetry is a simulator shortcut. With --ranks,
  // one GPU's ops run on a one-GPU cluster and the rest of the cluster is simulated.
  core::Scenario full = scenario;
  full.simulation.symmetry = false;
  RunResult run;
  std::unique_ptr<real::DeviceRuntime> rt;
  std::optional<prof::NvmlSampler> nvml;  // --cupti: sampled around the run
  if (o.program != nullptr) {
    run.program = *o.program;  // simrun replay: every op of the trace (no --ranks slice)
  } else if (o.rank >= 0) {
    if (o.launch != Launch::kThreads)
      throw InputError("(command line)", "--ranks", "one GPU runs in one process",
                       "use --launch threads with --ranks");
    run.program = one_rank(scenario, o.rank, control, &full, &run.metadata);
  } else {
    run.program = core::lower(full, control.progress);
  }
  // "running" counts the ops issued in this process (RealExecutor): all of them with launch mode
  // threads; the ranks of processes and mpi issue theirs in their own processes, so there the
  // phase has no count (docs/limits.md, "Progress").
  if (o.launch == Launch::kProcesses || o.launch == Launch::kMpi) {
    if (control.progress) control.progress->begin("running", 0, "");
    run_multiprocess(full, o, control, &run);
    if (!run.writer) return run;
  } else {
    rt = make_device_runtime(full, run.program, o.backend, o.time_scale, o.cupti);
    real::RealExecutor exec(*rt, real::RealOptions{o.emulate_gil});
    if (control.progress)
      control.progress->begin("running", static_cast<std::int64_t>(run.program.ops.size()),
                              "ops issued");
    if (o.cupti && o.backend == Backend::kCuda) nvml.emplace().start(kNvmlPeriodMs);
    run.result = exec.run(run.program, control);
    if (nvml) nvml->stop();
    run.metadata["runtime"] = rt->info().metadata;
  }
  // Interrupted (not failed): keep the steps that completed, marked incomplete (docs/limits.md).
  if (!run.result.complete && run.failure.empty())
    backend::keep_completed_steps(run.program, &run.result);
  run.memory =
      core::memory_timeline(run.program, run.result.timings, full.cluster, control.progress);
  run.warnings = full.warnings;
  run.warnings.insert(run.warnings.end(), run.program.warnings.begin(), run.program.warnings.end());
  run.notes = run.result.notes;
  if (!o.trace) return run;
  run.trace = backend::build_trace(full, run.program, run.result, run.memory, control.progress);
  if (nvml) add_gpu_telemetry(*rt, *nvml, &run);
  // A device event never starts before its launch (docs/real-execution.md, "Timestamps and
  // causality"): the events that do are clamped to it, and the largest correction is recorded.
  run.trace.metadata["clock_alignment_residual_ns_max"] =
      backend::clamp_device_events_to_launches(&run.trace);
  run.trace.metadata["launch"] = to_string(o.launch);
  for (auto it = run.metadata.begin(); it != run.metadata.end(); ++it)
    run.trace.metadata[it.key()] = it.value();
  return run;
}

}  // namespace csim::run
