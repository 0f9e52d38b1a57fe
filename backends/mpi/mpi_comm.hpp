// The MPI calls ClusterSim makes, as a table of plain C functions filled by the MPI module
// (docs/real-execution.md, "The MPI module"): lib/libcsim_mpi_backend.so links the MPI library and
// exports csim_mpi_comm(); backends/mpi/mpi_comm_loader.cpp dlopens it the first time launch mode
// mpi or an MPI sweep needs MPI, so simrun maps no MPI library otherwise and starts where MPI is
// absent. The table passes only C types (ints, bytes), so it is the same in every build;
// kMpiCommAbi still guards against a stale module left in place.
#pragma once

namespace csim::mpi {

inline constexpr int kMpiCommAbi = 1;

// Each function returns 0 on success (MPI_SUCCESS), an MPI error code otherwise. Every collective
// runs on MPI_COMM_WORLD.
struct MpiComm {
  int abi = kMpiCommAbi;
  // MPI_Init_thread(MPI_THREAD_FUNNELED) unless MPI is initialised already; *started = 1 when this
  // call initialised it.
  int (*init)(int* started) = nullptr;
  int (*rank)(int* rank) = nullptr;
  int (*size)(int* size) = nullptr;
  int (*bcast_bytes)(void* data, int bytes, int root) = nullptr;  // MPI_Bcast of MPI_BYTE
  // MPI_Gather of one int per rank into all[size] on root.
  int (*gather_int)(int mine, int* all, int root) = nullptr;
  // MPI_Gatherv of chars: LENS and DISPLS (size entries) and ALL are read on root only.
  int (*gatherv_chars)(const char* mine, int len, char* all, const int* lens, const int* displs,
                       int root) = nullptr;
  int (*allreduce_max_int)(int mine, int* out) = nullptr;  // MPI_Allreduce, MPI_MAX
  // MPI_Finalize unless MPI is finalized already.
  int (*finalize)() = nullptr;
};

// The module's table, loaded on first use; throws BackendUnavailable with one line naming what was
// looked for ($CSIM_MPI_MODULE, ../lib and the binary's folder, the build tree) and why it failed.
const MpiComm& mpi_comm();

}  // namespace csim::mpi

// The module's entry point (backends/mpi/mpi_comm_module.cpp).
extern "C" const csim::mpi::MpiComm* csim_mpi_comm();
