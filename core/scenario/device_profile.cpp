// Device profiles read back (core/scenario/device_profile.hpp; docs/calibration.md, "Profile").
#include "core/scenario/device_profile.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_diagnostics.hpp"

namespace csim::core {

using json = nlohmann::json;

namespace {

constexpr const char* kProfileHint =
    "write a device profile with: simrun calibrate SCENARIO -o FILE";

}  // namespace

DeviceProfile read_device_profile(const std::string& path) {
  const json doc = parse_json_strict(
      read_text_file(path, "device profile", "check the path; " + std::string(kProfileHint)), path);
  if (!doc.is_object())
    throw InputError(path, "", "a device profile is a JSON object, got " + describe_value(doc),
                     kProfileHint);
  if (!doc.contains("format") || doc["format"] != kProfileFormat)
    throw InputError(path, "format",
                     std::string("expected \"") + kProfileFormat + "\", got " +
                         (doc.contains("format") ? describe_value(doc["format"]) : "nothing"),
                     kProfileHint);
  if (!doc.contains("format_version") || !doc["format_version"].is_number_integer() ||
      doc["format_version"].get<long long>() != kProfileFormatVersion)
    throw InputError(
        path, "format_version",
        "expected " + std::to_string(kProfileFormatVersion) + ", got " +
            (doc.contains("format_version") ? describe_value(doc["format_version"]) : "nothing"),
        "this simrun reads profile format version " + std::to_string(kProfileFormatVersion) +
            "; rerun simrun calibrate");
  DeviceProfile p;
  p.file = path;
  if (doc.contains("metadata") && doc["metadata"].is_object()) {
    const json& md = doc["metadata"];
    if (md.contains("gpu") && md["gpu"].is_string()) p.gpu = md["gpu"].get<std::string>();
    if (md.contains("backend") && md["backend"].is_string())
      p.backend = md["backend"].get<std::string>();
    if (md.contains("measured") && md["measured"].is_boolean())
      p.measured = md["measured"].get<bool>();
  }
  if (!doc.contains("overrides")) throw InputError(path, "overrides", "missing", kProfileHint);
  const json& ov = doc["overrides"];
  if (!ov.is_object())
    throw InputError(path, "overrides",
                     "must be an object of dotted scenario paths, got " + describe_value(ov),
                     "e.g. \"overrides\": {\"cluster.gpu\": {\"base\": \"H200\", ...}}");
  // json objects iterate in key order: a path comes before the paths under it.
  for (auto it = ov.begin(); it != ov.end(); ++it) {
    const std::string& key = it.key();
    const bool bad = key.empty() || key.find('=') != std::string::npos || key.front() == '.' ||
                     key.back() == '.';
    if (bad)
      throw InputError(path, "overrides[\"" + key + "\"]", "not a dotted scenario path",
                       "keys are paths as --set takes them, e.g. cluster.gpu or "
                       "host.launch_latency_us");
    p.overrides.emplace_back(key, it.value());
  }
  return p;
}

}  // namespace csim::core
