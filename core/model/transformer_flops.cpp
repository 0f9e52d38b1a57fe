// FLOPs counts of the general decoder block (core/model/transformer_flops.hpp). Formulas:
// docs/transformer.md, "Model FLOPs" and "FLOPs per token".
#include "core/model/transformer_flops.hpp"

#include "core/model/attention_kernels.hpp"
#include "core/model/mla_layers.hpp"
#include "core/model/model_transformer.hpp"
#include "core/model/moe_layers.hpp"
#include "core/model/mtp_layers.hpp"

namespace csim::core {

double attention_head_width(const TransformerConfig& c) {
  const TransformerDims d = transformer_dims(c);
  // Q K^T runs over d_qk per query head and P V over d_v: 2 a d with d_v = d.
  if (c.mla.any()) return c.heads * static_cast<double>(d.head_dim + c.mla.v_head_dim);
  return 2.0 * c.heads * static_cast<double>(d.head_dim);
}

TransformerForwardFlops transformer_forward_flops(const TransformerConfig& c) {
  const TransformerDims d = transformer_dims(c);
  const double s = static_cast<double>(c.seq_len), h = static_cast<double>(c.hidden);
  const double a = c.heads, g = static_cast<double>(d.kv_heads),
               hd = static_cast<double>(d.head_dim);
  const double f = static_cast<double>(d.ffn_hidden);
  const double mlp_mats = c.mlp == MlpKind::kSwiglu ? 3.0 : 2.0;
  // Per block and sample: q, k, v 2 s h (a + 2g) d; output 2 s a d h (MLA: its down and up
  // projections, mla_projection_flops); MLP 2 s h f per matrix, or a mixture of experts' router
  // and the experts a token uses (moe_mlp_gemm_flops).
  const double projections = c.mla.any() ? mla_projection_flops(c, s)
                                         : 2.0 * s * h * (a + 2.0 * g) * hd + 2.0 * s * a * hd * h;
  const double width = attention_head_width(c);
  const double dense_mlp = mlp_mats * 2.0 * s * h * f;
  TransformerForwardFlops out;
  // The main model's blocks, then each multi-token-prediction depth's block, shaped as the last
  // (core/model/mtp_layers.hpp).
  for (int b = 0; b < c.layers + c.mtp_layers; ++b) {
    const int i = b < c.layers ? b : mtp_block_like(c);
    const double gemms = projections + (block_is_moe(c, i) ? moe_mlp_gemm_flops(c, s) : dense_mlp);
    // Q K^T and A V: 2 d (2 d_v) FLOPs per attended pair each, per query head.
    AttentionShape sh;
    sh.seq_len = c.seq_len;
    sh.window = block_is_windowed(c, i) ? c.window : 0;
    const double attn = 2.0 * width * attended_pairs(sh);  // s^2/2 causal, s w - w^2/2 windowed
    out.attention += attn;
    out.blocks += gemms + attn;
    if (b >= c.layers) out.mtp += gemms + attn;
  }
  const double head = 2.0 * s * h * static_cast<double>(d.padded_vocab);
  // Multi-token prediction (docs/transformer.md, "Multi-token prediction"), per depth: eh_proj
  // 2 s (2h) h, counted with the blocks (full recompute re-runs it with the depth's block, as
  // Megatron-Core's MultiTokenPredictionLayer._checkpointed_forward does), and one more LM head.
  const double eh_proj = 4.0 * s * h * h * c.mtp_layers;
  out.blocks += eh_proj;
  out.logits = head * (1.0 + c.mtp_layers);
  out.mtp += eh_proj + head * c.mtp_layers;
  return out;
}

FlopsPerToken transformer_flops_per_token(const ModelSpec& m) {
  const TransformerConfig& c = m.transformer_config;
  FlopsPerToken t;
  if (c.layers <= 0 || c.seq_len <= 0) return t;
  const TransformerDims d = transformer_dims(c);
  const double s = static_cast<double>(c.seq_len), h = static_cast<double>(c.hidden);
  const double l = c.layers, a = c.heads, g = static_cast<double>(d.kv_heads);
  const double hd = static_cast<double>(d.head_dim), f = static_cast<double>(d.ffn_hidden);
  const double vp = static_cast<double>(d.padded_vocab);
  // A mixture of experts counts the parameters a token uses (docs/transformer.md, "FLOPs per
  // token"): 6 N_active, as the MoE papers and torchtitan's MoE count do.
  const double n = static_cast<double>(m.active_params());
  // nn.Embedding tables: the token table and, with learned positions, the position table.
  const double n_embedding = vp * h + static_cast<double>(d.positions) * h;
  const TransformerForwardFlops fw = transformer_forward_flops(c);
  t.model = 3.0 * (fw.blocks + fw.logits) / s;
  // Every block attends, the multi-token-prediction depths' too; no causal discount.
  const double attention_full = 6.0 * (l + c.mtp_layers) * attention_head_width(c) * s;
  t.six_n_attention = 6.0 * n + attention_full;
  t.torchtitan = 6.0 * (n - n_embedding) + attention_full;
  // Megatron-LM (megatron/training/training.py, num_floating_point_operations, transformer_flops):
  // 3 (fwd, wgrad, dgrad) x 2 (FMA) x [per layer: h (a d + 2 g d) + a d s / 2 x 2 + a d h
  //   + h f (3 gated, 2 otherwise)] + 3 x 2 x h Vp, per token; causal: half of s.
  // With MoE (moe_layer_freq): dense blocks h f, MoE blocks h (k f_e + f_shared) times the factor
  // (Megatron counts neither the router nor the routing kernels).
  const double ffn_factor = c.mlp == MlpKind::kSwiglu ? 3.0 : 2.0;
  // With MTP (mtp_num_layers) Megatron adds D blocks of the last block's kind (last_layer_is_moe),
  // per depth 3h (its norms) + 2h^2 (eh_proj), and D more LM heads.
  double ffn = 0;
  for (int b = 0; b < c.layers + c.mtp_layers; ++b) {
    const int i = b < c.layers ? b : mtp_block_like(c);
    ffn += block_is_moe(c, i)
               ? static_cast<double>(c.moe.top_k) * static_cast<double>(expert_ffn_hidden(c)) +
                     static_cast<double>(shared_ffn_hidden(c))
               : f;
  }
  // MLA (Megatron's multi_latent_attention branch): the latent projections' parameters in place
  // of q, k, v and o (mla_projection_flops / 2s), the core a (d_qk + d_v) s / 2 per token.
  const double projections =
      c.mla.any() ? mla_projection_flops(c, 1.0) / 2.0 : h * (a * hd + 2.0 * g * hd) + a * hd * h;
  const double mtp = c.mtp_layers;
  t.megatron = 6.0 * (l + mtp) * (projections + attention_head_width(c) * s / 2.0) +
               6.0 * h * ffn * ffn_factor + 6.0 * mtp * (3.0 * h + 2.0 * h * h) +
               6.0 * h * vp * (1.0 + mtp);
  return t;
}

}  // namespace csim::core
