// OOM advice (docs/memory.md, "OOM advice"): when a scenario does not fit, the changes that
// usually make it fit, each re-simulated so the advice says whether it fits and what it costs in
// step time, ranked: fitting changes first, fastest first; then the others by how close they
// come.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/program/executor.hpp"
#include "core/scenario/scenario.hpp"
#include "run/scenario_loader.hpp"

namespace csim::app {

struct AdviceItem {
  std::string change;                  // "DDP instead of DataParallel"
  std::vector<std::string> overrides;  // the simrun --set arguments that make it
  bool simulated = false;              // false: the variant is not a valid scenario (`error`)
  std::string error;
  bool fits = false;
  double worst_fill = 0;  // max over GPUs of peak / usable memory
  double step_time_s = 0;
};

// The candidate changes for `scenario`, each loaded by `loader` with the change's --set values
// applied last and run through run/ without a trace. Only changes that apply to the scenario's
// strategy and model are tried.
std::vector<AdviceItem> oom_advice(const run::ScenarioLoader& loader,
                                   const core::Scenario& scenario, const core::RunControl& control);

// The ranked table; `current_step_s` is the step time of the scenario as it is.
void print_oom_advice(const std::vector<AdviceItem>& items, double current_step_s,
                      std::ostream& out);

}  // namespace csim::app
