// MpiLauncher over backends/mpi (csim_run_mpi).
#include "run/mpi_launch.hpp"

#include "backends/mpi/mpi_launcher.hpp"

namespace csim::run {
namespace {

class BackendMpiLauncher final : public MpiLauncher {
 public:
  bool started_by_mpirun() const override { return mpi::started_by_mpirun(); }
  int world_rank() const override { return mpi::mpi_world().rank; }
  int world_size() const override { return mpi::mpi_world().size; }
  core::ExecutionResult launch(const core::Program& program, const real::RuntimeFactory& factory,
                               real::RealOptions options, const core::RunControl& control,
                               const real::LaunchOptions& launch, real::LaunchReport* report,
                               bool* writer) const override {
    return mpi::launch_mpi(program, factory, options, control, launch, report, writer);
  }
};

}  // namespace

const MpiLauncher& mpi_launcher() {
  static const BackendMpiLauncher launcher;
  return launcher;
}

}  // namespace csim::run
