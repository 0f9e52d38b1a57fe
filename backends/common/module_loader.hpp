// Finding and loading a module of this build: a shared object that the program dlopens only when a
// run needs it, so that the libraries it links are not mapped otherwise (the CUDA backend,
// run/cuda_loader.cpp; the MPI calls, backends/mpi/mpi_comm_loader.cpp). Looked for at $ENV_VAR
// when that is set, else in ../lib beside the object holding this code (the executable, or the
// clustersim Python module inside an interpreter; found by dladdr) and beside it, the same
// beside the running binary when that is another file, and in the build tree that built it.
#pragma once

#include <string>

namespace csim::backend {

struct ModuleSpec {
  const char* what = "";     // "the cuda backend module": how messages name it
  const char* file = "";     // "libcsim_cuda_backend.so"
  const char* env_var = "";  // "CSIM_CUDA_MODULE"
  const char* entry = "";    // the one exported symbol
  bool global = false;       // RTLD_GLOBAL: its libraries' symbols serve the plugins they dlopen
};

// The address of SPEC.entry in the first candidate that exists, or null with *why set to one line:
// what was looked for ("not found"), or dlopen's or dlsym's message. *PATH (when given) is the file
// loaded. A module is never dlclose'd.
void* load_module_entry(const ModuleSpec& spec, std::string* why, std::string* path = nullptr);

// The first candidate for SPEC.file that exists (the same places, in the same order; SPEC.entry
// is not used), or "" with *why one line naming every place looked at. For a helper executable of
// this build (csim-rank, run/rank_main.hpp) as for a module.
std::string find_module_file(const ModuleSpec& spec, std::string* why);

// The folder of the object that holds this code, found by dladdr (the first place looked in):
// the executable, or the clustersim Python module inside an interpreter; "" when dladdr fails.
std::string module_anchor_dir();

}  // namespace csim::backend
