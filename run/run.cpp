// run/run.hpp: the simulator's path, and the dispatch to the real backends (run/real_run.cpp).
#include "run/run.hpp"

#include "backends/common/trace_builder.hpp"
#include "backends/sim/sim_executor.hpp"
#include "core/error.hpp"
#include "core/lowering/lowering.hpp"
#include "run/real_run.hpp"

namespace csim::run {

const char* to_string(Backend b) {
  switch (b) {
    case Backend::kSim:
      return "sim";
    case Backend::kStandin:
      return "standin";
    case Backend::kCuda:
      return "cuda";
  }
  return "sim";
}

const char* to_string(Launch l) {
  switch (l) {
    case Launch::kThreads:
      return "threads";
    case Launch::kProcesses:
      return "processes";
    case Launch::kMpi:
      return "mpi";
  }
  return "threads";
}

bool parse_backend(const std::string& name, Backend* out) {
  for (Backend b : {Backend::kSim, Backend::kStandin, Backend::kCuda})
    if (name == to_string(b)) {
      *out = b;
      return true;
    }
  return false;
}

bool parse_launch(const std::string& name, Launch* out) {
  for (Launch l : {Launch::kThreads, Launch::kProcesses, Launch::kMpi})
    if (name == to_string(l)) {
      *out = l;
      return true;
    }
  return false;
}

namespace {

// Lower, simulate, analyse memory and (when asked for) build the trace.
// Each phase tells rq.control.progress (when given) its name and count (docs/limits.md,
// "Progress"): lowering (steps or rank-steps), preparing the simulation and simulating
// (sim_executor.cpp), analysing memory, building the trace.
RunResult run_sim(const RunRequest& rq) {
  const core::Scenario& scenario = *rq.scenario;
  core::Progress* const progress = rq.control.progress;
  RunResult run;
  run.program = rq.program != nullptr ? *rq.program : core::lower(scenario, progress);
  sim::SimExecutor exec(scenario);
  run.result = exec.run(run.program, rq.control);
  // Interrupted: the outputs keep the steps that completed, marked incomplete (docs/limits.md).
  if (!run.result.complete) backend::keep_completed_steps(run.program, &run.result);
  run.memory = core::memory_timeline(run.program, run.result.timings, scenario.cluster, progress);
  run.warnings = scenario.warnings;
  run.warnings.insert(run.warnings.end(), run.program.warnings.begin(), run.program.warnings.end());
  run.notes = run.result.notes;
  if (rq.trace && rq.format_trace) {
    run.formatted_trace =
        backend::build_formatted_trace(scenario, run.program, run.result, run.memory, progress);
    run.trace_formatted = true;
  } else if (rq.trace) {
    run.trace = backend::build_trace(scenario, run.program, run.result, run.memory, progress);
  }
  return run;
}

}  // namespace

RunResult run(const RunRequest& request) {
  CSIM_ASSERT_MSG(request.scenario != nullptr, "RunRequest::scenario is required");
  if (request.backend == Backend::kSim) return run_sim(request);
  return run_real(request);
}

void write_trace_file(const RunResult& run, const core::Scenario& scenario, const std::string& path,
                      core::Progress* progress) {
  if (!run.trace_formatted) {
    prof::write_chrome_trace_file(run.trace, path, progress);
    return;
  }
  prof::write_chrome_trace_file(
      run.formatted_trace, path,
      backend::formatted_trace_producer(run.formatted_trace, scenario, run.program, run.result,
                                        run.memory, progress));
}

RunResult simulate(const core::Scenario& scenario, const core::RunControl& control) {
  RunRequest rq;
  rq.scenario = &scenario;
  rq.control = control;
  return run(rq);
}

}  // namespace csim::run
