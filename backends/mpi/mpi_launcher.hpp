// Launch mode "mpi" (docs/real-execution.md, "MPI"): started by mpirun, one MPI rank per Program
// process (DDP's one process per GPU), on one node or several. MPI carries only the bootstrap:
// rank 0 opens the coordinator's port on every interface and broadcasts its host name, port and
// clock origin; from then on the ranks speak the launcher protocol of launch mode processes
// (backends/real/coordinator.hpp) with the coordinator on a thread of rank 0, so heartbeats,
// collective rendezvous, shared NCCL ids, clock alignment and the trace merge are the same code.
#pragma once

#include <string>

#include "backends/real/process_launcher.hpp"

namespace csim::mpi {

struct MpiWorld {
  int rank = 0;
  int size = 1;
  std::string host;  // this rank's host name
};

// True when a process manager started this process as an MPI rank (Open MPI's mpirun, MPICH's
// Hydra, Slurm's PMIx): checked before MPI_Init, which would otherwise start a singleton MPI
// runtime of its own.
bool started_by_mpirun();

// Initialises MPI on first use (MPI_Init_thread, funneled: only the calling thread uses MPI) and
// says who this process is. Throws BackendUnavailable when MPI cannot start.
MpiWorld mpi_world();

// Runs this rank's share of `program` (MPI is finalized once the bootstrap is broadcast). On rank 0
// the result holds every rank's timings (on rank 0's clock) and *writer is true; on the other ranks
// the result is empty and *writer false. Requires mpi_world().size == program.processes.size() (the
// caller checks, for a clear message).
core::ExecutionResult launch_mpi(const core::Program& program, const real::RuntimeFactory& factory,
                                 real::RealOptions options, const core::RunControl& control,
                                 const real::LaunchOptions& launch, real::LaunchReport* report,
                                 bool* writer);

// Ends MPI (MPI_Finalize) if mpi_world() started it; safe to call more than once. Nothing may
// use MPI afterwards (launch_mpi calls it after its broadcast).
void mpi_finish();

}  // namespace csim::mpi
