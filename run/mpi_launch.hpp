// Launch mode mpi for run() (docs/real-execution.md, "MPI"): the door to backends/mpi, passed in
// RunRequest::mpi by the front ends that link MPI (simrun), so that run/'s other users (simview,
// the tests) link no MPI. csim_run_mpi implements it; without it, launch mode mpi is
// BackendUnavailable.
#pragma once

#include "backends/real/process_launcher.hpp"
#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::run {

class MpiLauncher {
 public:
  virtual ~MpiLauncher() = default;
  // True when mpirun (or another process manager) started this process as an MPI rank.
  virtual bool started_by_mpirun() const = 0;
  // This rank and the world's size (initialises MPI on first use).
  virtual int world_rank() const = 0;
  virtual int world_size() const = 0;
  // backends/mpi/mpi_launcher.hpp, launch_mpi: on rank 0 the merged result and *writer true.
  virtual core::ExecutionResult launch(const core::Program& program,
                                       const real::RuntimeFactory& factory,
                                       real::RealOptions options, const core::RunControl& control,
                                       const real::LaunchOptions& launch,
                                       real::LaunchReport* report, bool* writer) const = 0;
};

// The MPI launcher of this build (csim_run_mpi, built when MPI is found).
const MpiLauncher& mpi_launcher();

}  // namespace csim::run
