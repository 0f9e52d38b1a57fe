// The one scenario loader of the front ends (docs/scenario.md, "Overrides"; docs/calibration.md,
// "Profile"): a scenario file (read once) or a JSON document already parsed, a device profile's
// overrides, then the command line's --set overrides, then any further ones (a sweep variant, an
// OOM-advice change), validated by core's strict parser. The file and the profile are read once,
// when the loader is made; each load() validates one variant of the document.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario/device_profile.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::run {

class ScenarioLoader {
 public:
  // Reads the device profile (when `device_profile` is not empty), then the scenario file, then
  // the Hugging Face config `hf_config` (when not empty: every front end's --hf-config). Throws
  // InputError for any of them: a config that cannot be read or is refused (a mixture of experts,
  // core/model/hf_config.hpp) names the config file before anything else is checked. The config
  // then replaces the scenario's model as the first override (core::hf_config_model_override: the
  // scenario's seq_len and python_hooks kept), before `overrides` (--set), so that every load()
  // and every document + overrides() pair (sweeps, tune) sees the same model.
  static ScenarioLoader from_file(const std::string& path, const std::string& device_profile = {},
                                  std::vector<std::string> overrides = {},
                                  const std::string& hf_config = {});
  // A scenario document already parsed; `name` stands for the file in messages.
  static ScenarioLoader from_document(nlohmann::json doc, std::string name,
                                      const std::string& device_profile = {},
                                      std::vector<std::string> overrides = {});

  // The scenario with the profile's overrides, then the loader's, then `extra` applied (the later
  // win). An error in a profile value names the profile file and `overrides["PATH"]`. Warns when
  // the profile is not a measurement (the stand-in) or replaces the scenario's GPU.
  core::Scenario load(const std::vector<std::string>& extra = {}) const;

  const nlohmann::json& document() const { return *doc_; }
  const std::string& name() const { return name_; }
  // The command line's overrides, --hf-config's first: with document(), the scenario as load()
  // reads it (without the device profile).
  const std::vector<std::string>& overrides() const { return overrides_; }

 private:
  ScenarioLoader() = default;
  void read_profile(const std::string& device_profile);
  void note_own_gpu();

  std::shared_ptr<const nlohmann::json> doc_;  // shared: copies of a loader are cheap
  std::string name_;
  std::vector<std::string> overrides_;
  std::optional<core::DeviceProfile> profile_;
  std::string own_gpu_;  // the document's GPU before any override ("" when it does not parse)
};

// A document held elsewhere (a sweep's, validated once per variant without copying it), with
// `overrides` and no profile: what ScenarioLoader::load does for a loader without one.
core::Scenario load_scenario_document(const nlohmann::json& doc, const std::string& name,
                                      const std::vector<std::string>& overrides = {});

// ScenarioLoader::from_file(path, device_profile, overrides).load().
core::Scenario load_scenario(const std::string& path, const std::string& device_profile = {},
                             const std::vector<std::string>& overrides = {});

}  // namespace csim::run
