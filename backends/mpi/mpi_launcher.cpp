// Launch mode "mpi" (docs/real-execution.md, "MPI"). MPI itself is called through the MPI module
// (backends/mpi/mpi_comm.hpp), loaded by the first mpi_world().
#include "backends/mpi/mpi_launcher.hpp"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/mpi/mpi_comm.hpp"
#include "backends/real/coordinator.hpp"

namespace csim::mpi {
namespace {

bool g_started = false;  // MPI_Init_thread was called here (and MPI_Finalize not yet)

std::string this_host() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

// What rank 0 broadcasts: where the coordinator listens and the run's clock origin.
struct Bootstrap {
  std::int64_t clock_zero_ns = 0;
  std::int32_t port = 0;
  char host[256] = {};
};

}  // namespace

bool started_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "PMI_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

MpiWorld mpi_world() {
  const MpiComm& mpi = mpi_comm();
  int started = 0;
  if (mpi.init(&started) != 0)
    throw BackendUnavailable("MPI_Init_thread failed: launch mode mpi needs mpirun");
  if (started) g_started = true;
  MpiWorld w;
  mpi.rank(&w.rank);
  mpi.size(&w.size);
  w.host = this_host();
  return w;
}

void mpi_finish() {
  if (g_started) mpi_comm().finalize();  // started: the module is loaded
}

core::ExecutionResult launch_mpi(const core::Program& p, const real::RuntimeFactory& factory,
                                 real::RealOptions options, const core::RunControl& control,
                                 const real::LaunchOptions& launch, real::LaunchReport* report,
                                 bool* writer) {
  const MpiWorld w = mpi_world();
  real::LaunchReport local;
  if (!report) report = &local;
  *report = real::LaunchReport{};
  report->ranks = w.size;
  *writer = w.rank == 0;

  Bootstrap boot;
  int listen_fd = -1;
  if (w.rank == 0) {
    int port = 0;
    listen_fd = real::listen_tcp(true, w.size + 4, &port);
    boot.port = port;
    boot.clock_zero_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
    // CSIM_COORDINATOR_HOST: the name or address other nodes reach rank 0 by, when its host
    // name does not resolve to the right interface there.
    const char* env = std::getenv("CSIM_COORDINATOR_HOST");
    std::strncpy(boot.host, env && *env ? env : w.host.c_str(), sizeof boot.host - 1);
  }
  mpi_comm().bcast_bytes(&boot, static_cast<int>(sizeof boot), 0);
  // MPI's part ends here: no MPI progress during the timed run. (Open MPI's mpirun still ends
  // the whole job when a rank dies, finalized or not.)
  mpi_finish();
  // Ranks on rank 0's host use loopback; the others its host name. Ranks run on their own steady
  // clocks with rank 0's origin: the coordinator measures each rank's offset (docs, "Clocks").
  const std::string host =
      (w.rank == 0 || w.host == boot.host) ? std::string("127.0.0.1") : std::string(boot.host);

  if (w.rank != 0) {
    real::run_rank(host, boot.port, w.rank, boot.clock_zero_ns, p, factory, options, control,
                   launch.heartbeat_ms);
    return core::ExecutionResult{};
  }
  real::Coordinator c(p, w.size, launch, report);
  std::thread coordinator([&] { c.loop(listen_fd, boot.clock_zero_ns, control); });
  const int code = real::run_rank(host, boot.port, 0, boot.clock_zero_ns, p, factory, options,
                                  control, launch.heartbeat_ms);
  coordinator.join();
  if (listen_fd >= 0) ::close(listen_fd);
  core::ExecutionResult res = c.result();
  if (code != 0 && report->failure.empty()) report->failure = "rank 0 could not run its share";
  return res;
}

}  // namespace csim::mpi
