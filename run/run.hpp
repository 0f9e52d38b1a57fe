// The run pipeline (docs/architecture.md, "run/"): one scenario lowered to its Program, executed by
// the simulator or for real, its memory analysed and, when asked for, its trace built. Every front
// end goes through run(): simrun and its commands, sweeps and tune, hpo, OOM advice, compare,
// simview's scenario runner, the benchmarks and the tests.
//
//   RunRequest ──▶ run() ──▶ lower ──▶ executor (sim | stand-in | cuda; threads | processes | mpi)
//                                       ──▶ memory timeline ──▶ trace (only when trace = true)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/program/executor.hpp"
#include "core/program/memory_timeline.hpp"
#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"
#include "profiler/chrome_trace_writer.hpp"
#include "profiler/trace.hpp"

namespace csim::run {

// Exit codes every front end maps its outcome to (printed by simrun --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitBackendUnavailable = 3;
inline constexpr int kExitOom = 4;
inline constexpr int kExitRunFailed = 5;  // a real run failed (a rank died); partial trace kept

enum class Backend {
  kSim,      // cost model + discrete-event engine (backends/sim)
  kStandin,  // the real executor on CPU threads standing in for GPUs (backends/real)
  kCuda,     // the real executor on CUDA GPUs (backends/cuda)
};
enum class Launch {
  kThreads,    // one process, one thread per GPU
  kProcesses,  // one process per Program process, coordinated over loopback TCP
  kMpi,        // under mpirun: one MPI rank per Program process (RunRequest::mpi)
};
const char* to_string(Backend b);  // "sim", "standin", "cuda" (the --backend values)
const char* to_string(Launch l);   // "threads", "processes", "mpi" (the --launch values)
// False for a name that is not one of the above.
bool parse_backend(const std::string& name, Backend* out);
bool parse_launch(const std::string& name, Launch* out);

class MpiLauncher;  // run/mpi_launch.hpp: only front ends that link MPI supply one

struct RunRequest {
  const core::Scenario* scenario = nullptr;  // must outlive the call
  // A ready Program to run instead of lowering the scenario (simrun replay: a profiler trace's
  // Program, docs/replay.md); the scenario then gives the hardware only. Must outlive the call.
  const core::Program* program = nullptr;
  Backend backend = Backend::kSim;
  Launch launch = Launch::kThreads;  // real backends only
  bool trace = true;                 // build RunResult::trace (false: sweeps, tune, OOM advice)
  // With trace, for a front end that only writes the trace (simrun -o): the simulator formats it
  // while building it (RunResult::formatted_trace, trace_formatted true; RunResult::trace stays
  // empty), the same file without TraceEvent objects (docs/trace-format.md, "Formatting while
  // building"). Real backends ignore it and fill RunResult::trace. The formatted trace is
  // streamed ("Streaming the text"): write_trace_file builds its events again from the
  // RunResult's program, result and memory and from the scenario.
  bool format_trace = false;
  // Cancel flag; progress (a front end's progress line, told of each phase: lowering, preparing
  // the simulation, simulating, analysing memory, building the trace; docs/limits.md, "Progress").
  core::RunControl control;
  // Real backends (docs/real-execution.md):
  double time_scale = 1.0;           // stand-in: simulated durations x this
  bool emulate_gil = true;           // a real mutex for each Python process's GIL
  int rank = -1;                     // >= 0: run only this GPU's ops, the rest simulated
  bool cupti = false;                // cuda, threads: CUPTI per-kernel lanes and NVML counters
  const MpiLauncher* mpi = nullptr;  // launch mode mpi; null: BackendUnavailable
};

// Everything one run produces.
struct RunResult {
  core::Program program;
  core::ExecutionResult result;
  core::MemoryReport memory;
  prof::Trace trace;                     // empty unless RunRequest::trace (and not trace_formatted)
  prof::FormattedTrace formatted_trace;  // RunRequest::format_trace on the simulator
  bool trace_formatted = false;          // the trace is formatted_trace
  std::vector<std::string> warnings;     // the scenario's and the lowering's (also in the trace)
  std::vector<std::string> notes;        // the executor's (result.notes; also in the trace)
  std::string failure;                   // real runs: why a rank failed ("" when none did)
  nlohmann::json metadata = nlohmann::json::object();  // real runs: launch details (in the trace)
  // Launch mode mpi: only rank 0 holds the merged result and writes outputs; the other ranks'
  // runs end with writer false.
  bool writer = true;
  int mpi_rank = -1;
};

// Runs `request`. Throws InputError (bad input the parser cannot see: a lowering rule, --ranks out
// of range, a launch mode without its prerequisites) and BackendUnavailable (the backend cannot run
// here: exit 3). An interrupted run (control.cancel) keeps the steps that completed, marked
// incomplete (docs/limits.md); a real run whose rank failed says so in RunResult::failure.
RunResult run(const RunRequest& request);
// Writes RUN's trace to PATH atomically: RunResult::trace, or the formatted trace (its events
// built again from RUN and SCENARIO, the scenario it was run on; RunRequest::format_trace). With
// `progress`, the phase "writing the trace" (docs/limits.md, "Progress").
void write_trace_file(const RunResult& run, const core::Scenario& scenario, const std::string& path,
                      core::Progress* progress = nullptr);

// The simulator with its trace: run() of {&scenario, Backend::kSim, trace = true, control}.
RunResult simulate(const core::Scenario& scenario, const core::RunControl& control = {});

// One line: what the CUDA backend found on this machine (or why it is not in this build).
std::string cuda_status_line();

}  // namespace csim::run
