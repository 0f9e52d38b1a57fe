// simrun: see tools/simrun_app.hpp and `simrun --help`.
#include <iostream>

#include "run/allocator.hpp"
#include "tools/signals.hpp"
#include "tools/simrun_app.hpp"

int main(int argc, char** argv) {
  csim::run::configure_allocator();
  csim::app::install_signal_handlers();
  std::vector<std::string> args(argv + 1, argv + argc);
  return csim::app::simrun_main(args, std::cout, std::cerr);
}
