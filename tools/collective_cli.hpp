// simrun collective (docs/collective.md): wiring only; the sizes, timings and table live in
// run/collective_bench.hpp.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace csim::app {

// `simrun collective CLUSTER.json [...]`; args without the leading "collective".
int collective_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
