// A sweep's knobs checked before any variant runs (docs/sweep.md, "Variants"): simrun sweep and the
// Python module's sweep refuse a knob whose key the scenario format does not have, since it would
// make every variant invalid.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/variant_space.hpp"

namespace csim::sweep {

// Throws the parser's InputError (which names the key and the keys allowed there) when a knob's
// key is unknown to the scenario format: the document `doc` named `name`, with `base_sets`, then
// the knob's first value. Other errors (a value the parser refuses) are the variants' own.
void check_knobs(const nlohmann::json& doc, const std::string& name,
                 const std::vector<std::string>& base_sets, const std::vector<Knob>& knobs);

}  // namespace csim::sweep
