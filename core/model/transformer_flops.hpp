// FLOPs counts of the general decoder block (ModelSpec::transformer_config, built by
// build_transformer): the model FLOPs behind MFU and three published per-token counts, each
// named for who uses it. Formulas and sources: docs/transformer.md, "FLOPs per token".
#pragma once

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// Model FLOPs of one sample's forward (2 per multiply-accumulate), GEMMs only, causal attention
// counted as the attended half (Megatron-LM's convention) and sliding windows as the pairs they
// attend (attended_pairs, core/model/attention_kernels.hpp; docs/transformer.md, "Model FLOPs").
struct TransformerForwardFlops {
  double blocks = 0;     // sum over the blocks: projections, MLP and attention
  double attention = 0;  // of which Q K^T and A V (what selective recompute re-runs)
  double logits = 0;     // the LM head, 2 s h Vp, once more per multi-token-prediction depth
  // Of blocks + logits, the multi-token-prediction depths' (D blocks, D eh_proj 4 s h^2, D heads
  // 2 s h Vp; docs/transformer.md, "Multi-token prediction"); 0 without them.
  double mtp = 0;
};
TransformerForwardFlops transformer_forward_flops(const TransformerConfig& c);

// The attention core's width per token and attended key, summed over the query heads: a (d_qk +
// d_v), = 2 a d without multi-head latent attention (docs/transformer.md, "Model FLOPs").
double attention_head_width(const TransformerConfig& c);

struct FlopsPerToken {
  double model = 0;            // 3 x transformer_forward_flops / s: the MFU numerator per token
  double six_n_attention = 0;  // 6 N + 12 l a d s (Chowdhery et al. 2022, PaLM, appendix B)
  double megatron = 0;         // Megatron-LM num_floating_point_operations / (B s)
  double torchtitan = 0;       // 6 (N - N_embedding) + 12 l a d s (torchtitan)
};
// Per-token counts of a model built by build_transformer (all zero for any other model).
FlopsPerToken transformer_flops_per_token(const ModelSpec& m);

}  // namespace csim::core
