// model.hf_config (docs/scenario.md, "model.hf_config"): a Hugging Face config.json named by the
// scenario, read by core/model/hf_config.cpp, completed by the keys next to it (seq_len, the
// attention kernel, vocabulary padding, name) and built by build_transformer after the checks of
// model.transformer (core/scenario/parse_transformer.hpp), each problem named by the field it comes
// from. Internal to core/: the scenario parser's parse_model calls it.
#pragma once

#include <nlohmann/json.hpp>

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core::parse {

// True when the model object names a Hugging Face config (it has the key hf_config).
bool is_hf_model(const nlohmann::json& model);

// The model object at "model" with hf_config. The config's path is relative to the scenario
// file's folder when the file gives it, to the working directory when the command line does
// (--set, simrun --hf-config); absolute paths are taken as they are.
ModelSpec parse_hf_model(Ctx& ctx, const nlohmann::json& model, const TrainingSpec& t,
                         const GpuSpec& gpu);

}  // namespace csim::core::parse
