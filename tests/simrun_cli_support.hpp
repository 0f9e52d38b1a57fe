// Running simrun's command line in-process from a test.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "tools/simrun_app.hpp"

namespace csim::test {

struct CliResult {
  int code;
  std::string out, err;
};

inline CliResult run_simrun(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = app::simrun_main(args, out, err);
  return {code, out.str(), err.str()};
}

}  // namespace csim::test
