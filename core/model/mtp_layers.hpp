// Multi-token prediction (DeepSeek-V3 technical report, arXiv 2412.19437, section 2.2; Megatron-
// Core megatron/core/transformer/multi_token_prediction.py, MultiTokenPredictionLayer): D more
// depths after the main model, depth k predicting the token k + 1 ahead. Each depth k, per sample:
//   mtp.k.embed    the shifted tokens' embedding, a lookup into the main model's table (shared:
//                  no parameters of its own)
//   mtp.k.enorm    RMSNorm of that embedding                                  h params
//   mtp.k.hnorm    RMSNorm of depth k-1's output (the main model's final norm output for k = 0)
//                                                                             h params
//   mtp.k.concat   torch.cat of the two along the hidden dimension, [s, 2h]
//   mtp.k.eh_proj  Linear 2h -> h, no bias                                    2 h^2 params
//   mtp.k.ln_1 ... one decoder block shaped as the main model's last (DeepSeek-V3: MLA and a
//                  mixture of experts, the checkpoint's model.layers.61)
//   mtp.k.ln_f     the depth's final norm (Megatron's final_layernorm, the checkpoint's
//                  shared_head.norm)                                          h params
//   mtp.k.lm_head  the main model's output head on it (shared: no parameters of its own)
//   mtp.k.loss     the depth's cross-entropy on its logits
// and the main LM head follows the last depth (Megatron's GPTModel runs the MTP block, then
// process_mtp_loss, then the output layer). The layers from enorm to ln_f carry block index
// layers + k, so that recompute, FSDP units and the expert lowering treat the depth as a block;
// the lookup, the shared head and the loss stay outside it (block -1), as the main model's
// embedding and head do. Formulas: docs/transformer.md, "Multi-token prediction".
#pragma once

#include <cstdint>

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// Layers of one depth besides its block: embed, enorm, hnorm, concat, eh_proj, ln_f, lm_head,
// loss.
inline constexpr std::int64_t kMtpLayersBesideBlock = 8;

// The block a depth is shaped as: the main model's last (Megatron-Core's num_floating_point_
// operations counts MTP layers as the last layer's kind, last_layer_is_moe).
inline int mtp_block_like(const TransformerConfig& c) {
  return c.layers - 1;
}

// Appends c.mtp_layers depths to m.layers (after the final norm, before the LM head); nothing
// when c.mtp_layers == 0. `e`: bytes of one activation element.
void add_mtp_modules(ModelSpec& m, const TransformerConfig& c, double e);

// True for a layer of a multi-token-prediction depth (its name starts "mtp.").
bool is_mtp_layer(const LayerSpec& l);

// Parameters of the multi-token-prediction depths (the layers is_mtp_layer names): `total` all of
// them, `active` those a token uses (less the unrouted experts). Zero without MTP.
struct MtpParams {
  std::int64_t total = 0;
  std::int64_t active = 0;
};
MtpParams mtp_params(const ModelSpec& m);

}  // namespace csim::core
