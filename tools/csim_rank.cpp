// csim-rank: one rank of launch mode processes, started by exec from simrun or the clustersim
// module (docs/real-execution.md, "Processes"); not meant to be run by hand.
#include "run/rank_main.hpp"

int main(int argc, char** argv) {
  return csim::run::rank_main(argc, argv);
}
