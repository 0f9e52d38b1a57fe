// simrun calibrate (docs/calibration.md): measure the scenario's GPU and node through the
// DeviceRuntime + RealExecutor a real run uses, fit the cost model's constants (calibration/)
// and write a device profile that simrun --device-profile reads.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "calibration/calibration.hpp"
#include "core/program/executor.hpp"

namespace csim::app {

// The stand-in stretches each micro-Program so that its timed op keeps a CPU thread busy this
// long: well above sleep and wake-up noise (tens of us), short enough for a whole calibration
// in seconds (docs/calibration.md, "Stand-in").
inline constexpr TimeNs kStandinOpNs = 5 * kNsPerMs;

// Runs micro-Programs of `node` on `backend` ("cuda" or "standin"), one device runtime per
// Program (make_device_runtime). Throws BackendUnavailable when the backend cannot run here.
calibration::MicroRunner make_micro_runner(const core::Scenario& node, const std::string& backend,
                                           const core::RunControl& control);

// `simrun calibrate SCENARIO [...]`; args without the leading "calibrate".
int calibrate_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace csim::app
