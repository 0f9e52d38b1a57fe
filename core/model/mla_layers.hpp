// Multi-head latent attention (TransformerConfig::mla; DeepSeek-V2 section 2.1, DeepSeek-V3
// section 2.1.1; docs/transformer.md, "Multi-head latent attention"): the layers of one block's
// attention between ln_1 and the residual add, its FLOPs and its per-head widths. Training runs
// the projections as written (no weight absorption: that is an inference rewrite), so the core is
// ordinary multi-head attention with q/k heads of d_nope + d_rope and v heads of d_v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model/attention_kernels.hpp"
#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// d_qk = qk_nope_head_dim + qk_rope_head_dim: the width of each head's q and k.
std::int64_t mla_qk_head_dim(const MlaConfig& m);

// The layers: q_down, q_norm, q_up (one q projection when q_lora_rank is 0), kv_down, kv_norm,
// kv_up, rope (with the concatenations of the positional parts), the attention core of `core`'s
// shape (heads q/k heads of d_qk, v heads of d_v), the output projection. `p` is the block's name
// prefix ("h.3."), s tokens per sample, e bytes per activation element.
void add_mla_attention(std::vector<LayerSpec>& out, const TransformerConfig& c,
                       const AttentionShape& core, const std::string& p, double s, double e);

// Layers add_mla_attention adds, given the attention core's layer count.
int mla_attention_layer_count(const TransformerConfig& c, int core_layers);

// Forward FLOPs of one block's MLA projections (q, k/v down and up, output) for one sample of s
// tokens: 2 s times their parameters less the two norms'.
double mla_projection_flops(const TransformerConfig& c, double s);

}  // namespace csim::core
