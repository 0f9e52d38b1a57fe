// simview: the desktop viewer (docs/simview.md). The command line lives in gui/app.cpp.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "gui/app.hpp"
#include "run/allocator.hpp"

int main(int argc, char** argv) {
  csim::run::configure_allocator();
  try {
    return csim::gui::simview_main(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                   std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "simview: internal error: " << e.what() << "\n";
    return csim::gui::kExitInternal;
  }
}
