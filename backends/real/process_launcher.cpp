// Launch mode "processes" (docs/real-execution.md, "Processes"): forks one rank per Program
// process and runs the coordinator (coordinator.hpp) in the launching process.
#include "backends/real/process_launcher.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backends/real/coordinator.hpp"

namespace csim::real {

core::ExecutionResult launch_processes(const core::Program& p, const RuntimeFactory& factory,
                                       RealOptions options, const core::RunControl& control,
                                       const LaunchOptions& launch, LaunchReport* report) {
  LaunchReport local;
  if (!report) report = &local;
  *report = LaunchReport{};
  const int ranks = static_cast<int>(p.processes.size());
  report->ranks = ranks;
  int port = 0;
  int lfd = listen_tcp(false, ranks + 4, &port);
  const std::int64_t zero = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now().time_since_epoch())
                                .count();
  Coordinator c(p, ranks, launch, report);
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      c.ranks()[static_cast<std::size_t>(r)].failed = true;
      report->failure = "fork failed for rank " + std::to_string(r) + ": " + std::strerror(errno);
      break;
    }
    if (pid == 0) {
      ::close(lfd);
      // No atexit handlers or static destructors of the parent's state in the child.
      std::_Exit(
          run_rank("127.0.0.1", port, r, zero, p, factory, options, control, launch.heartbeat_ms));
    }
    c.ranks()[static_cast<std::size_t>(r)].pid = pid;
    if (launch.on_started) launch.on_started(r, pid);
  }
  c.loop(lfd, zero, control);
  if (lfd >= 0) ::close(lfd);
  for (RankState& st : c.ranks()) {
    if (st.pid <= 0) continue;
    int status = 0;
    for (int i = 0; i < launch.grace_ms / 10 && ::waitpid(st.pid, &status, WNOHANG) == 0; ++i)
      ::usleep(10'000);
    if (::waitpid(st.pid, &status, WNOHANG) == 0) {
      ::kill(st.pid, SIGKILL);
      ::waitpid(st.pid, &status, 0);
    }
  }
  core::ExecutionResult res = c.result();
  return res;
}

}  // namespace csim::real
