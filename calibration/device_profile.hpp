// Device profiles (docs/calibration.md, "Profile"): what simrun calibrate writes (metadata, the
// raw series, the fits, and "overrides" in the form --set takes). simrun --device-profile reads
// it back through run/scenario_loader.hpp (core/scenario/device_profile.hpp).
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/calibration.hpp"
#include "core/scenario/device_profile.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::calibration {

// The format, and reading a profile back, are core/scenario/device_profile.hpp's.
using core::kProfileFormat;
using core::kProfileFormatVersion;

struct ProfileContext {
  std::string scenario_file;  // the scenario the node came from
  std::string when;           // UTC, ISO 8601 ("2025-05-01T12:00:00Z")
  bool quick = false;
};

// Now, UTC, ISO 8601 to the second.
std::string utc_now_iso8601();

// The "overrides" object: dotted scenario paths -> values, as --set PATH=VALUE takes them
// ("cluster.gpu": {"base": ..., "efficiency": {"gemm": {...}}, "mem_bw_efficiency": ...,
// "kernel_overhead_us": ...}, "host.launch_latency_us": ...). Only what was fitted, and only what
// the backend measures (the stand-in's launch latency is left out).
nlohmann::json profile_overrides(const core::Scenario& node, const Calibration& c, const Fits& f,
                                 const std::string& when);

// The whole profile document.
nlohmann::json profile_json(const core::Scenario& node, const Calibration& c, const Fits& f,
                            const ProfileContext& ctx);

// The short table simrun calibrate prints: series, points, fitted value, the scenario's value
// (catalog, or the simulator's model for copies and collectives), ratio.
void print_table(const core::Scenario& node, const Calibration& c, const Fits& f,
                 std::ostream& out);

}  // namespace csim::calibration
