// simrun replay's pipeline (docs/replay.md): trace files -> ReplayProgram (tokenize, sort, build)
// -> the scenario of its hardware with the --set what-ifs -> run::run() with the ready Program ->
// per step measured vs replayed, per stream busy time, the import stats.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "replay/gpu_whatif.hpp"
#include "replay/replay_program.hpp"
#include "run/run.hpp"

namespace csim::replay {

// The files of the command line: a folder stands for its *.json and *.json.gz files, sorted by
// name (one per rank, as HTA reads a trace folder). Throws InputError for an empty folder.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs);

// Tokenize, sort and build (the three stages) over every file.
ReplayProgram import_traces(const std::vector<std::string>& files, bool hold_unexplained = true);

// The catalog GPU a trace's deviceProperties name ("NVIDIA A100-SXM4-40GB", "Tesla V100-SXM2-32GB",
// "NVIDIA A100-PG509-200"), or "" when none matches.
std::string catalog_gpu_of(const std::string& device_name);

// What the replay.* keys of --set ask for (docs/replay.md, "What-ifs"); the other --set keys go
// to the scenario.
struct ReplayKnobs {
  std::string source_gpu;        // replay.source_gpu: the GPU the traces ran on (default: detected)
  double python_scale = 1.0;     // replay.python_scale: the loop thread's Python time x this
  double dispatch_scale = 1.0;   // replay.dispatch_scale: ATen dispatch and runtime calls x this
  bool hold_unexplained = true;  // replay.hold_unexplained: unexplained waits kept (true/false)
  int dp_scale = 1;              // replay.dp_scale: data-parallel ranks x this (weak scaling)
  int source_gpus_per_node = 8;  // replay.source_gpus_per_node: the traced job's GPUs per node
};

struct ReplayRequest {
  std::vector<std::string> inputs;  // files or folders
  std::vector<std::string> sets;    // --set KEY=VALUE
  run::Backend backend = run::Backend::kSim;
  bool trace = false;  // build the replayed run's trace (-o)
};

struct StepResult {
  int gpu = 0;
  std::string name;
  TimeNs measured_ns = 0, replayed_ns = 0;
};
struct StreamResult {
  int gpu = 0;
  std::string name;
  TimeNs measured_busy_ns = 0, replayed_busy_ns = 0;
};

struct MemoryResult {  // a rank with [memory] events (docs/replay.md, "Memory")
  int gpu = 0;
  Bytes measured_peak_bytes = 0;  // the largest Total Allocated in the window
  Bytes replayed_peak_bytes = 0;  // the memory timeline's peak of the replayed allocations
};

struct ReplayOutcome {
  ReplayProgram imported;  // the Program as replayed (what-ifs applied)
  core::Scenario scenario;
  run::RunResult run;
  std::vector<StepResult> steps;
  std::vector<StreamResult> streams;
  std::vector<MemoryResult> memory;
  std::vector<ExplainRow> explain;  // the GPU what-if's and the collectives' rows
  std::string source_gpu, target_gpu;
  // The job's cluster as traced and as asked (docs/replay.md, "Collectives on another cluster").
  int job_ranks = 0, job_ranks_to = 0;  // world size, times replay.dp_scale
  core::ClusterSpec job_from, job_to;
  int collectives_recosted = 0, collectives_fixed = 0;  // re-costable or not
};

ReplayOutcome replay(const ReplayRequest& rq);

// Mean over steps of |replayed - measured| / measured (docs/replay.md, "Steps").
double mean_step_error(const std::vector<StepResult>& steps);

void print_replay(const ReplayOutcome& o, std::ostream& out, bool explain);

}  // namespace csim::replay
