// mpi_comm() of backends/mpi/mpi_comm.hpp: the MPI module, loaded on first use.
#include <mutex>
#include <string>

#include "backends/common/module_loader.hpp"
#include "backends/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace csim::mpi {

const MpiComm& mpi_comm() {
  static std::once_flag once;
  static const MpiComm* comm = nullptr;
  static std::string why;
  std::call_once(once, [] {
    // RTLD_GLOBAL: Open MPI dlopens its components (mca_*.so), which look for the symbols of
    // libmpi and libopen-pal in the global scope.
    const backend::ModuleSpec spec{"the MPI module", "libcsim_mpi_backend.so", "CSIM_MPI_MODULE",
                                   "csim_mpi_comm", true};
    std::string path;
    using Entry = const MpiComm* (*)();
    const auto entry = reinterpret_cast<Entry>(backend::load_module_entry(spec, &why, &path));
    if (!entry) return;
    const MpiComm* c = entry();
    if (!c || c->abi != kMpiCommAbi) {
      why = std::string(spec.what) + " " + path + " is not this build's (rebuild it)";
      return;
    }
    comm = c;
  });
  if (!comm) throw BackendUnavailable(why + "; launch mode mpi and MPI sweeps need it");
  return *comm;
}

}  // namespace csim::mpi
