// model.transformer (docs/scenario.md, "model.transformer"): the general decoder block read from
// scenario.json into a TransformerConfig, checked against the cluster's GPU, built by
// build_transformer. Internal to core/ (the scenario parser calls parse_transformer; the Hugging
// Face import, core/model/hf_config.cpp, reuses transformer_problem and build_checked_transformer).
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/scenario/parse_context.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core::parse {

// Why a TransformerConfig cannot be built or run on a GPU: the field it is about, named as its
// model.transformer key ("kv_heads", "ffn_hidden", "attention.kernel", ...), a message and a
// hint. A caller reading another format maps `key` to its own name.
struct TransformerProblem {
  std::string key;
  std::string message;
  std::string hint;
};

// Every rule of docs/scenario.md, "model.transformer" (kv_heads divides heads, swiglu has
// ffn_hidden, hidden / heads whole when head_dim is not given, a RoPE rotary part of >= 2
// dimensions, a learned table at least seq_len long, global_every only with a window, the
// attention kernel runnable on `gpu`, ...); nothing when the config is valid.
std::optional<TransformerProblem> transformer_problem(const TransformerConfig& c,
                                                      const GpuSpec& gpu);

// The mixture-of-experts rules (parse_moe.cpp; docs/scenario.md, "model.transformer.moe"): 2 or
// more experts, 1 <= top_k <= experts, SwiGLU experts, a dense prefix shorter than the model.
// transformer_problem includes them.
std::optional<TransformerProblem> moe_problem(const TransformerConfig& c);
// model.transformer.moe at `path`.
MoeConfig parse_moe(Ctx& ctx, const nlohmann::json& v, const std::string& path);
// moe.capacity_factor and moe.pad_to_capacity under the keys given (model.transformer.moe, or
// moe_capacity_factor / moe_pad_to_capacity beside model.hf_config): a factor > 0, padding only
// with a factor.
void parse_moe_capacity(Ctx& ctx, const Obj& o, const std::string& factor_key,
                        const std::string& pad_key, MoeConfig& m);
// moe.routing (model.transformer.moe.routing, or model.moe_routing beside model.hf_config): how
// tokens spread over the `experts` experts (docs/scenario.md, "Routing imbalance").
MoeRouting parse_moe_routing(Ctx& ctx, const nlohmann::json& v, const std::string& path,
                             int experts);

// Multi-head latent attention's rules (parse_mla.cpp; docs/scenario.md, "model.transformer.mla"):
// ranks and head widths >= 1, an even RoPE part, RoPE positions, no kv_heads / head_dim / qk_norm
// / qkv_bias of its own, a kernel that takes q/k and v heads of different widths.
// transformer_problem includes them.
std::optional<TransformerProblem> mla_problem(const TransformerConfig& c);
// The kernel MLA runs when none is named: cudnn where the GPU's default is flash2 (which takes one
// head width only); `kernel` otherwise.
AttentionKernel mla_default_kernel(const TransformerConfig& c, AttentionKernel kernel);
// model.transformer.mla at `path`.
MlaConfig parse_mla(Ctx& ctx, const nlohmann::json& v, const std::string& path);

// Checks `c` (a problem fails at path + "." + key), the layer count against limits.max_layers,
// and builds it.
ModelSpec build_checked_transformer(Ctx& ctx, const TransformerConfig& c, const std::string& path,
                                    int act_bytes, const GpuSpec& gpu);

// model.transformer at `path`; the attention kernel defaults to default_attention_kernel(gpu).
ModelSpec parse_transformer(Ctx& ctx, const nlohmann::json& v, const std::string& path,
                            int act_bytes, const GpuSpec& gpu);

// Tensor parallelism splits the embedding and the LM head by vocabulary rows: when tp does not
// divide the padded rows, they are padded further as Megatron pads (a multiple of 128 x tp) and
// the model rebuilt, with a warning (docs/scenario.md, "model.transformer"). No-op for other
// models and when tp divides them. True when the model was rebuilt: the caller runs the model
// passes (compile, eager kernels, FP8) again.
bool pad_transformer_vocab_for_tp(Ctx& ctx, ModelSpec& m, int tp, int act_bytes);

}  // namespace csim::core::parse
