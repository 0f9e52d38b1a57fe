// A Hugging Face transformers config.json read as a TransformerConfig
// (core/scenario/transformer_config.hpp): the decoder-only dense architectures LlamaForCausalLM,
// MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, GPT2LMHeadModel and GPTNeoXForCausalLM.
// Every field read, its default per architecture (the one the architecture's transformers code
// applies when the field is absent) and every refusal: docs/scenario.md, "model.hf_config".
//
// Refused (csim::InputError naming the config file and the field): mixture-of-experts models (a
// later issue), architectures not in the list, and values this model cannot represent that would
// change the cost (an activation it does not know, head counts that do not divide, a per-layer
// pattern of sliding windows it cannot express, a quantized checkpoint). Fields with no cost
// effect (rope_theta, rope_scaling, the norms' eps, token ids, torch_dtype: precision is the
// scenario's training.precision) are accepted and not used.
//
// The config has no training sequence length: seq_len is left 0 for the scenario to give
// (model.seq_len, core/scenario/parse_hf_model.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// The architectures transformer_config_from_hf maps, in the order messages list them.
const std::vector<std::string>& hf_supported_architectures();

// One config.json as read: the TransformerConfig (seq_len 0: the scenario gives it; the attention
// kernel left at its default: the scenario's GPU decides) and what it says besides.
struct HfModel {
  TransformerConfig config;
  std::string architecture;                  // architectures[0], or the model_type's architecture
  std::int64_t max_position_embeddings = 0;  // a RoPE model's context (0: not given); learned
                                             // positions are config.max_positions instead
  std::vector<std::string> warnings;  // "FIELD: message": fields not read, a window no block uses
  // Multi-token-prediction modules the checkpoint holds (DeepSeek-V3's num_nextn_predict_layers):
  // the scenario says whether it trains with them (model.mtp_layers, core/model/mtp_layers.hpp).
  int mtp_layers = 0;
};

// Maps one parsed config.json; `file` names the config in errors.
HfModel hf_model_from_json(const nlohmann::json& cfg, const std::string& file);

// Reads `path` as strict JSON (an error names the file and the parse error's line and column)
// and maps it.
HfModel read_hf_model(const std::string& path);

// hf_model_from_json(cfg, file).config, its warnings appended to `warnings` when given.
TransformerConfig transformer_config_from_hf(const nlohmann::json& cfg, const std::string& file,
                                             std::vector<std::string>* warnings = nullptr);

// `simrun --hf-config FILE`: the --set override ("model={...}") that replaces the scenario's model
// with FILE, keeping the scenario's sequence length (model.seq_len, model.transformer.seq_len or
// model.gpt.seq_len, when it has one) and model.python_hooks.
std::string hf_config_model_override(const nlohmann::json& scenario, const std::string& path);

// `--hf-config FILE` checked before the override is built: a FILE that cannot be read (missing,
// a directory, binary) is an InputError naming "--hf-config FILE" and the OS error, one that is
// not JSON, nests too deeply or is refused (an MoE config) an InputError naming FILE (read once
// here: run::ScenarioLoader::from_file calls it), rather than an error about a scenario
// key the config would have replaced (model.seq_len).
void check_hf_config_option(const std::string& path);

}  // namespace csim::core
