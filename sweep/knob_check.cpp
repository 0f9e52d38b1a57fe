#include "sweep/knob_check.hpp"

#include "core/error.hpp"
#include "run/scenario_loader.hpp"

namespace csim::sweep {

void check_knobs(const nlohmann::json& doc, const std::string& name,
                 const std::vector<std::string>& base_sets, const std::vector<Knob>& knobs) {
  for (const Knob& k : knobs) {
    std::vector<std::string> sets = base_sets;
    sets.push_back(k.key + "=" + k.values.front());
    try {
      (void)run::load_scenario_document(doc, name, sets);
    } catch (const InputError& e) {
      if (e.message().rfind("unknown key", 0) == 0) throw;
    }
  }
}

}  // namespace csim::sweep
