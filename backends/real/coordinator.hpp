// The coordinator of the multi-process launch modes and the rank side's main loop
// (docs/real-execution.md, "Processes", "MPI"). Launch mode processes starts the ranks and runs the
// coordinator in the launching process; launch mode mpi runs it on a thread of MPI rank 0, every
// MPI rank (0 included) being one Program process. Both speak the same protocol (wire.hpp).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backends/real/process_launcher.hpp"
#include "backends/real/wire.hpp"

namespace csim::real {

// A listening TCP socket on 127.0.0.1 (all_interfaces false) or on every interface, on a free
// port (*port set). Throws BackendUnavailable. Close-on-exec, as every socket of the launch: a
// rank started by another thread's launch must not hold this one's connections open.
int listen_tcp(bool all_interfaces, int backlog, int* port);

// One rank's whole run: connects to the coordinator at host:port, builds its runtime with
// `factory`, runs its share of `program` and reports its timings. Returns the process exit code
// (0, or 1 when it could not even reach the coordinator: the reason went to stderr).
int run_rank(const std::string& host, int port, int rank, std::int64_t clock_zero_ns,
             const core::Program& program, const RuntimeFactory& factory, RealOptions options,
             const core::RunControl& control, int heartbeat_ms);

struct RankState {
  pid_t pid = -1;  // started ranks; -1 for ranks the coordinator cannot signal (mpi)
  std::int64_t reported_pid = -1;  // the pid the rank said hello with (any host)
  int fd = -1;
  bool ready = false;  // clock measured: from now on it gets relays (after the log's replay)
  bool finished = false, failed = false, complete = false;
  std::int64_t last_seen_ns = 0;
  std::string error;
};

class Coordinator {
 public:
  Coordinator(const core::Program& p, int ranks, const LaunchOptions& o, LaunchReport* report);

  std::vector<RankState>& ranks() { return ranks_; }

  // Until every rank has finished or is gone. Closes listen_fd (sets it to -1) once every rank
  // has connected.
  void loop(int& listen_fd, std::int64_t zero, const core::RunControl& control);

  core::ExecutionResult result() const;

 private:
  void on_msg(int rank, const Msg& m, std::int64_t zero);
  void relay(int from, const Msg& m);
  void abort_all(int failed_rank, const std::string& why);
  void gone(int rank);

  const core::Program& program_;
  const LaunchOptions& options_;
  LaunchReport* report_;
  std::vector<RankState> ranks_;
  std::vector<core::OpTiming> timings_;
  std::vector<int> expected_, arrived_;
  std::vector<std::int64_t> last_arrival_;
  std::vector<int> blob_maker_;  // per shared-value key: the rank asked to make it, -1 none yet
  // Every relayed message so far: a rank that becomes ready later gets them replayed, so it
  // learns what the others did before it was listening (state, not events).
  std::vector<Msg> log_;
  bool aborted_ = false, cancelled_ = false;
  std::int64_t abort_at_ns_ = 0;
};

}  // namespace csim::real
