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
// defaults); returns num_nextn_predict_layers (the multi-token-prediction modules, not modelled).
int read_deepseek_v3(HfReader& r, TransformerConfig& c, const std::string& arch);

}  // namespace csim::core
