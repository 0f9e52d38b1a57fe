// One rank of a Program, to run alone (docs/real-execution.md, "One rank of a large run"): the ops
// of the threads that drive one GPU, on a one-GPU Program, with the work that needs other GPUs
// (collectives, peer copies) replaced by fixed delays of their simulated durations. One real GPU
// can so run the compute, copies and allocations of one rank of a 1,000-GPU configuration at its
// true sizes, while the rest of the cluster is what the simulator says it is.
#pragma once

#include <string>
#include <vector>

#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::core {

struct RankSlice {
  Program program;   // one GPU (index 0), no collectives
  int gpu = -1;      // the GPU of the original Program whose ops these are
  int replaced = 0;  // collectives and peer copies turned into fixed delays
};

// The GPU whose ops `gpu`'s are under rank symmetry (itself without symmetry, or when it is a
// representative); -1 if the Program does not use `gpu`.
int representative_of(const Program& p, int gpu);

// Slices `gpu`'s threads out of `p`, given a simulation of `p` (for the replaced ops' durations:
// end - start on their stream, which includes waiting for the other members). `gpu` must have ops
// in `p` (a representative under rank symmetry).
RankSlice slice_rank(const Program& p, int gpu, const std::vector<OpTiming>& simulated);

}  // namespace csim::core
