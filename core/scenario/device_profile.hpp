// A device profile read back (docs/calibration.md, "Profile"): what `simrun calibrate` writes
// (calibration/device_profile.hpp) as scenario overrides, in the form --set takes them. Scenario
// input like the GPU catalog, so it lives in core/: run/'s scenario loader applies it
// (run/scenario_loader.hpp) without depending on the calibration that produced it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace csim::core {

inline constexpr const char* kProfileFormat = "csim-device-profile";
inline constexpr int kProfileFormatVersion = 1;

struct DeviceProfile {
  std::string file;
  std::string gpu;       // metadata.gpu, "" when absent
  std::string backend;   // metadata.backend, "" when absent
  bool measured = true;  // metadata.measured (absent: true)
  std::vector<std::pair<std::string, nlohmann::json>> overrides;  // applied in this order
};

// Reads and checks `path`. Throws InputError (file, JSON path, hint) for an unreadable file,
// broken JSON, a wrong "format"/"format_version", or a missing or malformed "overrides".
// Its overrides reach the parser as JSON values (core::FileOverride, run/scenario_loader.cpp).
DeviceProfile read_device_profile(const std::string& path);

}  // namespace csim::core
