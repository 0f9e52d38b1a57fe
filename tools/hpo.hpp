// simrun hpo (docs/hpo.md): cost a hyper-parameter search. Every distinct knob combination is
// simulated once for its step time; hpo/ places the trials on the scenario's cluster under
// FIFO or ASHA and reports wall time, GPU idle time and which trials stop early.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "hpo/schedule.hpp"
#include "hpo/search_space.hpp"
#include "profiler/trace.hpp"

namespace csim::app {

// The schedule as a trace: one process per GPU, one event per job ("trial 7 r0->r1"), completed
// trials as compute, trials stopped early as other (docs/hpo.md, "Trace").
prof::Trace hpo_trace(const hpo::Schedule& s, const std::vector<hpo::Assignment>& knobs,
                      int gpus_per_node, const nlohmann::json& metadata);

// `simrun hpo SCENARIO [...]`; args without the leading "hpo".
int hpo_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
