// tracediff: see tools/tracediff_app.hpp and `tracediff --help`.
#include <iostream>

#include "tools/tracediff_app.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return csim::app::tracediff_main(args, std::cout, std::cerr);
}
