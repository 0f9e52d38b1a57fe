// simview: the desktop viewer (docs/simview.md). The command line lives in gui/app.cpp.
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "gui/app.hpp"
#include "run/allocator.hpp"

int main(int argc, char** argv) {
  csim::run::configure_allocator();
  try {
    return csim::gui::simview_main(std::vector<std::string>(argv + 1, argv + argc), std::cout,
                                   std::cerr);
  } catch (const csim::InputError& e) {  // bad input found past the command line's own checks
    std::cerr << "simview: " << e.what() << "\n";
    return csim::gui::kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "simview: out of memory (hint: a trace takes about 10x its uncompressed size in "
                 "memory; open fewer or smaller traces)\n";
    return csim::gui::kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "simview: internal error: " << e.what() << "\n";
    return csim::gui::kExitInternal;
  }
}
