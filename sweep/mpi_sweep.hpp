// A sweep across MPI ranks (docs/sweep.md, "MPI"): under `mpirun -np N simrun sweep ...` rank r
// simulates the pending variants r, r + N, r + 2N, ... in rounds (each rank's threads as a
// single-process sweep); after every round the rows are gathered on rank 0, which checkpoints
// the results file, and the ranks agree whether to stop (a rank was interrupted). Rank 0's rows
// are then sorted and written like a single-process run's, so the file is the same.
#pragma once

#include <functional>

#include "sweep/sweep_runner.hpp"

namespace csim::sweep {

struct MpiSweepResult {
  SweepRunOutcome outcome;  // rank 0: every rank's rows; other ranks: their own
  bool writer = false;      // rank 0
  int rank = 0, size = 1;
  std::size_t simulated = 0;  // by this rank
  bool complete = true;       // every variant of every rank ran
};

MpiSweepResult run_variants_mpi(
    const nlohmann::json& doc, const std::string& scenario_name,
    const std::vector<std::string>& base_sets, const std::vector<Knob>& knobs,
    const std::vector<Variant>& pending, const SweepRunOptions& options,
    const std::function<void(const std::vector<VariantResult>&)>& checkpoint);

}  // namespace csim::sweep
