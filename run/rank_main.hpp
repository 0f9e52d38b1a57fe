// The rank side of launch mode processes (docs/real-execution.md, "Processes"): csim-rank, the
// rank executable the launcher starts by exec (backends/real/process_launcher.hpp), is this
// library's rank_main; launch mode mpi's ranks build their device runtimes the same way.
#pragma once

#include <string>

#include "backends/real/process_launcher.hpp"
#include "backends/real/rank_job.hpp"

namespace csim::run {

// The rank executable's file name, and the variable that names it instead of the search.
inline constexpr const char* kRankExecutable = "csim-rank";
inline constexpr const char* kRankExecutableEnv = "CSIM_RANK_EXE";

// Where csim-rank is: $CSIM_RANK_EXE when set, else in ../lib beside the object holding this code
// (simrun, or the clustersim module, by dladdr), beside it, the same beside the running binary,
// and in the build tree's lib/ (backends/common/module_loader.hpp). "" with *why one line when
// it is none of them.
std::string find_rank_executable(std::string* why);

// The device runtime each rank builds in its own process: the stand-in (its collectives meeting
// through the link's rendezvous) or the CUDA backend module (its NCCL unique ids shared through
// the link). `setup` must outlive the factory. The factory throws BackendUnavailable when the
// CUDA backend is not part of this build.
real::RuntimeFactory rank_runtime_factory(const real::RankSetup& setup);

// csim-rank's main: reads its command line and job (backends/real/rank_job.hpp), connects to the
// launcher and runs its share of the Program (real::run_rank). Returns the exit code: 0, 1 when
// it could not reach the launcher, 2 for a command line or job it cannot read (one line on
// stderr).
int rank_main(int argc, const char* const* argv);

}  // namespace csim::run
