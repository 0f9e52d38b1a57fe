// Launch mode "processes" (docs/real-execution.md, "Processes"): starts one rank per Program
// process by exec of the rank executable and runs the coordinator (coordinator.hpp) in the
// launching process.
//
// Why exec and not fork: the launcher may be a multi-threaded process (the clustersim module
// inside a Python interpreter, simrun with its progress thread); a forked child inherits the
// locks other threads held at the fork, held for ever, and a copy of an interpreter it must not
// run. posix_spawn starts a fresh program instead (glibc's is a vfork + exec, safe in a threaded
// process), which is given everything it needs: the job (rank_job.hpp) through one inherited file
// descriptor, a memfd written once and read by every rank.
#include "backends/real/process_launcher.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "backends/real/coordinator.hpp"
#include "core/error.hpp"

extern char** environ;

namespace csim::real {
namespace {

// The descriptor the job has in every rank (the --job-fd the rank reads).
constexpr int kJobFd = 3;

// A memfd holding `bytes`, close-on-exec (the spawn's dup2 gives each rank its own kJobFd) and
// never kJobFd itself (dup2 onto itself would keep close-on-exec set).
int job_memfd(const std::string& bytes) {
  int fd = ::memfd_create("csim-rank-job", MFD_CLOEXEC);
  if (fd >= 0 && fd == kJobFd) {
    const int moved = ::fcntl(fd, F_DUPFD_CLOEXEC, kJobFd + 1);
    ::close(fd);
    fd = moved;
  }
  if (fd < 0)
    throw BackendUnavailable(std::string("launcher: cannot hold the rank job (memfd_create): ") +
                             std::strerror(errno));
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw BackendUnavailable("launcher: cannot write the rank job: " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  return fd;
}

// Starts `argv` with the job at kJobFd, no signal blocked and SIGPIPE at its default (a Python
// interpreter ignores it, and an ignored signal survives exec). Returns the pid, or -1 with errno
// set.
pid_t spawn_rank(const std::vector<std::string>& argv, int job_fd) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&at);
  posix_spawn_file_actions_adddup2(&fa, job_fd, kJobFd);
  sigset_t none, def;
  sigemptyset(&none);
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &def);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &fa, &at, args.data(), environ);
  posix_spawnattr_destroy(&at);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

}  // namespace

core::ExecutionResult launch_processes(const core::Program& p, RankSetup setup,
                                       const core::RunControl& control, const LaunchOptions& launch,
                                       LaunchReport* report) {
  LaunchReport local;
  if (!report) report = &local;
  *report = LaunchReport{};
  if (launch.rank_exe.empty() || ::access(launch.rank_exe.c_str(), X_OK) != 0)
    throw BackendUnavailable("launch mode processes: the rank executable '" + launch.rank_exe +
                             "' cannot be run (build the csim-rank target)");
  const int ranks = static_cast<int>(p.processes.size());
  report->ranks = ranks;
  setup.heartbeat_ms = launch.heartbeat_ms;
  const int job_fd = job_memfd(encode_rank_job(p, setup));
  int port = 0;
  int lfd = -1;
  try {
    lfd = listen_tcp(false, ranks + 4, &port);
  } catch (...) {
    ::close(job_fd);
    throw;
  }
  RankArgs args;
  args.port = port;
  args.job_fd = kJobFd;
  args.clock_zero_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count();
  Coordinator c(p, ranks, launch, report);
  for (int r = 0; r < ranks; ++r) {
    args.rank = r;
    const pid_t pid = spawn_rank(rank_argv(launch.rank_exe, args), job_fd);
    if (pid < 0) {
      c.ranks()[static_cast<std::size_t>(r)].failed = true;
      report->failure = "cannot start rank " + std::to_string(r) + " (" + launch.rank_exe +
                        "): " + std::strerror(errno);
      break;
    }
    c.ranks()[static_cast<std::size_t>(r)].pid = pid;
    if (launch.on_started) launch.on_started(r, pid);
  }
  ::close(job_fd);  // every rank holds its own descriptor of it
  c.loop(lfd, args.clock_zero_ns, control);
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
  return c.result();
}

}  // namespace csim::real
