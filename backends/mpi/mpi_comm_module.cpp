// The entry point of libcsim_mpi_backend.so (backends/mpi/mpi_comm.hpp): the only code that calls
// the MPI library.
#include <mpi.h>

#include "backends/mpi/mpi_comm.hpp"

namespace {

int init(int* started) {
  *started = 0;
  int initialized = 0;
  if (const int err = MPI_Initialized(&initialized); err != MPI_SUCCESS) return err;
  if (initialized) return MPI_SUCCESS;
  int provided = 0;
  const int err = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  if (err == MPI_SUCCESS) *started = 1;
  return err;
}

int rank(int* r) {
  return MPI_Comm_rank(MPI_COMM_WORLD, r);
}

int size(int* n) {
  return MPI_Comm_size(MPI_COMM_WORLD, n);
}

int bcast_bytes(void* data, int bytes, int root) {
  return MPI_Bcast(data, bytes, MPI_BYTE, root, MPI_COMM_WORLD);
}

int gather_int(int mine, int* all, int root) {
  return MPI_Gather(&mine, 1, MPI_INT, all, 1, MPI_INT, root, MPI_COMM_WORLD);
}

int gatherv_chars(const char* mine, int len, char* all, const int* lens, const int* displs,
                  int root) {
  return MPI_Gatherv(mine, len, MPI_CHAR, all, lens, displs, MPI_CHAR, root, MPI_COMM_WORLD);
}

int allreduce_max_int(int mine, int* out) {
  return MPI_Allreduce(&mine, out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
}

int finalize() {
  int finalized = 0;
  if (const int err = MPI_Finalized(&finalized); err != MPI_SUCCESS) return err;
  return finalized ? MPI_SUCCESS : MPI_Finalize();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const csim::mpi::MpiComm* csim_mpi_comm() {
  static const csim::mpi::MpiComm c{
      csim::mpi::kMpiCommAbi, &init,    &rank, &size, &bcast_bytes, &gather_int, &gatherv_chars,
      &allreduce_max_int,     &finalize};
  return &c;
}
