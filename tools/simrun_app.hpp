// simrun: run a scenario headless, print its summary, write trace/summary JSON.
// The whole command line lives here so tests can run it in-process; tools/simrun.cpp is main().
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/executor.hpp"
#include "core/memory_timeline.hpp"
#include "core/program.hpp"
#include "core/scenario.hpp"
#include "profiler/trace.hpp"

namespace CLI {
class App;
}

namespace csim::app {

// Exit codes (also printed by --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitBackendUnavailable = 3;
inline constexpr int kExitOom = 4;
inline constexpr int kExitRunFailed = 5;  // a real run failed (a rank died); partial trace kept

// Everything one simulated run produces.
struct SimRun {
  core::Program program;
  core::ExecutionResult result;
  core::MemoryReport memory;
  prof::Trace trace;
  std::string failure;  // real runs: why a rank failed ("" when none did)
  nlohmann::json extra_metadata = nlohmann::json::object();  // real runs: launch details
  // Launch mode mpi: only rank 0 holds the merged result and writes outputs; the other ranks'
  // runs end with writer false.
  bool writer = true;
  int mpi_rank = -1;
};

class RunProgress;

// Lower, simulate, analyse memory and build the trace of a parsed scenario. With a progress
// line, each phase is announced on it (control.ops_done must then be its counter).
SimRun simulate(const core::Scenario& scenario, const core::RunControl& control = {},
                RunProgress* progress = nullptr);

int simrun_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Shared by simrun's commands. parse_command_line: -1 to go on, else the exit code (--help
// printed: 0; a bad option: 2, one line). run_command: runs the command's body and turns the
// exceptions every command can end with into its exit code (2 bad input, 3 backend unavailable,
// 1 internal error), printing one line prefixed by `tool`.
int parse_command_line(CLI::App& app, const std::vector<std::string>& args,
                       const std::string& tool, std::ostream& out, std::ostream& err);
int run_command(const std::string& tool, std::ostream& err, const std::function<int()>& body);

}  // namespace csim::app
