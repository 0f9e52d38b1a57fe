// Launch mode "processes" (docs/real-execution.md, "Processes"): one OS process per Program
// process (DDP's one process per GPU, data-loader workers), each started by exec of the rank
// executable csim-rank (posix_spawn: never a bare fork of the launcher, which may be a threaded
// Python interpreter) with the Program and its setup handed over an inherited file descriptor
// (rank_job.hpp). The launcher coordinates the ranks over loopback TCP: it relays which ops were
// issued or finished, counts collective arrivals, measures each rank's clock offset, watches
// heartbeats, and merges the ranks' timings into one result. A rank that dies or stops answering
// makes the others stop within seconds, with a message naming it; what completed is kept and marked
// incomplete.
#pragma once

#include <sys/types.h>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/real/device_runtime.hpp"
#include "backends/real/rank_job.hpp"
#include "backends/real/real_executor.hpp"
#include "backends/real/wire.hpp"
#include "core/program/executor.hpp"

namespace csim::real {

class RankLink;

struct LaunchOptions {
  // The rank executable (csim-rank, found by run/rank_main.hpp's find_rank_executable); launch
  // mode processes throws BackendUnavailable when it cannot be started.
  std::string rank_exe;
  int heartbeat_ms = 200;             // each rank says it is alive this often
  int heartbeat_timeout_ms = 10'000;  // a rank silent this long is declared hung and killed
  int grace_ms = 5'000;               // after an abort, ranks get this long before SIGKILL
  std::function<void(int rank, pid_t pid)> on_started;  // tests: the ranks' pids
  // Tests: called from the coordinator's loop for every message a rank sends (wire.hpp), before
  // the coordinator acts on it, so a test can kill, stop or cancel on an observable event (a rank
  // connected, a rank arrived at a collective) without a thread of its own.
  std::function<void(int rank, MsgType type)> on_message;
};

struct ClockSync {
  int rank = 0;
  std::int64_t offset_ns = 0;       // rank clock minus coordinator clock
  std::int64_t uncertainty_ns = 0;  // half the best ping round trip
};

struct LaunchReport {
  int ranks = 0;
  std::vector<ClockSync> clocks;
  int failed_rank = -1;             // -1: none
  std::string failure;              // one line, names the rank ("" when all finished)
  bool device_unavailable = false;  // a rank found no usable device (BackendUnavailable)
};

// Each rank builds its runtime in its own process (a CUDA context must not cross fork) from this:
// csim-rank from its job's RankSetup, an MPI rank from the launching simrun's request.
using RuntimeFactory = std::function<std::unique_ptr<DeviceRuntime>(RankLink&)>;

// Runs `program` with one process per Program process, each an exec of launch.rank_exe given
// `program` and `setup` (its heartbeat_ms replaced by launch.heartbeat_ms). The result's timings
// are on the launcher's clock; complete is false when a rank failed or the run was cancelled,
// and report->failure then says why. Throws BackendUnavailable when the ranks cannot be started.
core::ExecutionResult launch_processes(const core::Program& program, RankSetup setup,
                                       const core::RunControl& control, const LaunchOptions& launch,
                                       LaunchReport* report);

}  // namespace csim::real
