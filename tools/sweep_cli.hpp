// simrun sweep and simrun tune (docs/sweep.md): wiring only; variants, runner, results file and
// the search live in sweep/.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace csim::app {

int sweep_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int tune_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
