// simrun replay (docs/replay.md): wiring only; the importer and the pipeline live in replay/.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace csim::app {

// `simrun replay TRACE.json[.gz]...|FOLDER [...]`; args without the leading "replay".
int replay_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
