// Device profiles (docs/calibration.md, "Profile"): what simrun calibrate writes (metadata, the
// raw series, the fits, and "overrides" in the form --set takes) and what simrun
// --device-profile reads back into a scenario.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/calibration/calibration.hpp"
#include "core/scenario.hpp"

namespace csim::calibration {

inline constexpr const char* kProfileFormat = "csim-device-profile";
inline constexpr int kProfileFormatVersion = 1;

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

// A profile read back (--device-profile).
struct DeviceProfile {
  std::string file;
  std::string gpu;      // metadata.gpu, "" when absent
  std::string backend;  // metadata.backend, "" when absent
  bool measured = true;  // metadata.measured (absent: true)
  std::vector<std::pair<std::string, nlohmann::json>> overrides;  // applied in this order
};

// Reads and checks `path`. Throws InputError (file, JSON path, hint) for an unreadable file,
// broken JSON, a wrong "format"/"format_version", or a missing or malformed "overrides".
DeviceProfile read_device_profile(const std::string& path);

// "PATH=VALUE" strings, as --set takes them.
std::vector<std::string> override_strings(const DeviceProfile& p);

// parse_scenario_file(scenario_path, profile overrides + `overrides`): the profile's overrides go
// first, so the command line's --set win. An error the scenario validation finds in a profile
// value names the profile file and `overrides["PATH"]...`. Adds scenario warnings when the
// profile is not a measurement (the stand-in) or replaces the scenario's GPU with another one.
// An empty profile_path parses the scenario alone.
core::Scenario parse_scenario_with_profile(const std::string& scenario_path,
                                           const std::string& profile_path,
                                           const std::vector<std::string>& overrides);

}  // namespace csim::calibration
