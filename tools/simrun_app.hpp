// simrun: run a scenario headless, print its summary, write trace/summary JSON.
// The whole command line lives here so tests can run it in-process; tools/simrun.cpp is main().
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/executor.hpp"
#include "core/memory_timeline.hpp"
#include "core/program.hpp"
#include "core/scenario.hpp"
#include "profiler/trace.hpp"

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
};

// Lower, simulate, analyse memory and build the trace of a parsed scenario.
SimRun simulate(const core::Scenario& scenario, const core::RunControl& control = {});

int simrun_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
