// DeepSeek-V3's config.json fields beyond the common ones (core/model/hf_config.cpp reads the
// shape, the dense MLP and the embeddings): multi-head latent attention and the mixture of experts
// with its sigmoid, bias-corrected, group-limited router. Mapping: docs/scenario.md,
// "model.hf_config".
#pragma once

#include <string>
#include <vector>

#include "core/model/hf_reader.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// Fills c.mla and c.moe from DeepseekV3Config's fields (configuration_deepseek_v3.py and its
// defaults); `notes` gets what is read but not modelled (the multi-token-prediction layers).
void read_deepseek_v3(HfReader& r, TransformerConfig& c, const std::string& arch,
                      std::vector<std::string>& notes);

}  // namespace csim::core
