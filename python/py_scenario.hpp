// A loaded scenario as the module holds it (python/bind_run.cpp makes it, bind_sweep.cpp sweeps
// and tunes it).
#pragma once

#include <memory>

#include "core/scenario/scenario.hpp"
#include "run/scenario_loader.hpp"

namespace csim::py {

// The loader (its document and overrides, for sweeps and tune) and the scenario it validated.
// Shared, so results keep the scenario they were run on alive.
struct PyScenario {
  std::shared_ptr<run::ScenarioLoader> loader;
  std::shared_ptr<const core::Scenario> scenario;
};

}  // namespace csim::py
