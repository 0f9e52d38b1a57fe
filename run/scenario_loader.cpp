// run/scenario_loader.hpp.
#include "run/scenario_loader.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/model/hf_config.hpp"
#include "core/scenario/scenario_parser.hpp"

namespace csim::run {

ScenarioLoader ScenarioLoader::from_file(const std::string& path, const std::string& device_profile,
                                         std::vector<std::string> overrides,
                                         const std::string& hf_config) {
  ScenarioLoader l;
  l.read_profile(device_profile);  // the profile's errors first, as simrun has always reported
  l.doc_ = std::make_shared<const nlohmann::json>(core::read_scenario_document(path));
  l.name_ = path;
  if (!hf_config.empty()) {
    // Read once here so that a missing, malformed or refused config is named before the
    // scenario's own keys are checked (the parser checks seq_len before it reads the config).
    core::check_hf_config_option(hf_config);
    overrides.insert(overrides.begin(), core::hf_config_model_override(*l.doc_, hf_config));
  }
  l.overrides_ = std::move(overrides);
  l.note_own_gpu();
  return l;
}

ScenarioLoader ScenarioLoader::from_document(nlohmann::json doc, std::string name,
                                             const std::string& device_profile,
                                             std::vector<std::string> overrides) {
  ScenarioLoader l;
  l.read_profile(device_profile);
  l.doc_ = std::make_shared<const nlohmann::json>(std::move(doc));
  l.name_ = std::move(name);
  l.overrides_ = std::move(overrides);
  l.note_own_gpu();
  return l;
}

void ScenarioLoader::read_profile(const std::string& device_profile) {
  if (!device_profile.empty()) profile_ = core::read_device_profile(device_profile);
}

void ScenarioLoader::note_own_gpu() {
  if (!profile_ || profile_->gpu.empty()) return;
  // The scenario's own GPU, to warn when the profile replaces it: the document alone (the command
  // line's --set may only make sense on top of the profile).
  try {
    own_gpu_ = core::parse_scenario_document(*doc_, name_).cluster.gpu.name;
  } catch (const InputError&) {
    // Reported by load(), the parse that counts.
  }
}

core::Scenario ScenarioLoader::load(const std::vector<std::string>& extra) const {
  std::vector<std::string> user = overrides_;
  user.insert(user.end(), extra.begin(), extra.end());
  if (!profile_) return load_scenario_document(*doc_, name_, user);
  const core::DeviceProfile& prof = *profile_;
  // The profile's values as the JSON they are (no "PATH=JSON" text read back); an error in one
  // names the profile and its key, unless the command line set the same path (it won).
  std::vector<core::FileOverride> from_profile;
  from_profile.reserve(prof.overrides.size());
  for (const auto& [key, value] : prof.overrides) {
    from_profile.push_back({key, value, prof.file, "overrides[\"" + key + "\"]",
                            "the profile does not fit this scenario; rerun simrun calibrate"});
  }
  core::Scenario s = core::parse_scenario_document(*doc_, name_, from_profile, user);
  if (!prof.measured)
    s.warnings.push_back("device profile " + prof.file + " comes from the " +
                         (prof.backend.empty() ? std::string("CPU stand-in") : prof.backend) +
                         ": its constants are the simulator's own, not a measurement");
  if (!prof.gpu.empty() && !own_gpu_.empty() && prof.gpu != own_gpu_)
    s.warnings.push_back("device profile " + prof.file + " was measured on " + prof.gpu +
                         ": it replaces this scenario's GPU " + own_gpu_);
  return s;
}

core::Scenario load_scenario_document(const nlohmann::json& doc, const std::string& name,
                                      const std::vector<std::string>& overrides) {
  return core::parse_scenario_document(doc, name, overrides);
}

core::Scenario load_scenario(const std::string& path, const std::string& device_profile,
                             const std::vector<std::string>& overrides) {
  return ScenarioLoader::from_file(path, device_profile, overrides).load();
}

}  // namespace csim::run
