// A Hugging Face transformers config.json read as a TransformerConfig (core/transformer_config.hpp):
// the decoder-only dense architectures LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM, GPT2LMHeadModel and GPTNeoXForCausalLM. Every field read, its default per
// architecture (the one the architecture's transformers code applies when the field is absent) and
// every refusal: docs/scenario.md, "model.hf_config".
//
// Refused (csim::InputError naming the config file and the field): mixture-of-experts models (a
// later issue), architectures not in the list, and values this model cannot represent that would
// change the cost (an activation it does not know, head counts that do not divide, a per-layer
// pattern of sliding windows it cannot express, a quantized checkpoint). Fields with no cost
// effect (rope_theta, rope_scaling, the norms' eps, token ids, torch_dtype: precision is the
// scenario's training.precision) are accepted and not used.
//
// The config has no training sequence length: seq_len is left 0 for the scenario to give
// (model.seq_len, core/parse_hf_model.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/transformer_config.hpp"

namespace csim::core {

// The architectures transformer_config_from_hf maps, in the order messages list them.
const std::vector<std::string>& hf_supported_architectures();

// Maps one parsed config.json. `file` names the config in errors. `warnings`, when given,
// receives "FIELD: message" lines for accepted-but-noteworthy input (fields no architecture
// reads, a sliding window no layer uses).
TransformerConfig transformer_config_from_hf(const nlohmann::json& cfg, const std::string& file,
                                             std::vector<std::string>* warnings = nullptr);

// Reads `path` as strict JSON (an error names the file and the parse error's line and column)
// and maps it.
TransformerConfig read_hf_config(const std::string& path,
                                 std::vector<std::string>* warnings = nullptr);

}  // namespace csim::core
