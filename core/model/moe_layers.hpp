// The mixture-of-experts MLP of the decoder block (TransformerConfig::moe; docs/transformer.md,
// "Mixture of experts"): the router's GEMM, the routing kernels (softmax, top-k, the load-balancing
// loss), the permutation of each token's k copies into expert order, the experts as grouped GEMMs
// with their SwiGLU, the weighted un-permutation, and the shared experts every token uses.
// Balanced routing: every expert gets s k / E tokens of a sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// Whether block `block`'s MLP is a mixture of experts: moe.experts > 0, past the first dense
// blocks, and (block + 1) a multiple of moe.every_k_layers (Qwen-MoE's decoder_sparse_step).
bool block_is_moe(const TransformerConfig& c, int block);
std::int64_t expert_ffn_hidden(const TransformerConfig& c);  // f_e: moe.expert_ffn_hidden or f
std::int64_t shared_ffn_hidden(const TransformerConfig& c);  // the shared experts' total width

// The layers of an MoE block's MLP, after its ln_2 and before its residual add; `p` is the
// block's name prefix ("h.3."), s the tokens per sample, e the bytes per activation element.
void add_moe_mlp(std::vector<LayerSpec>& out, const TransformerConfig& c, const std::string& p,
                 double s, double e);
int moe_mlp_layer_count(const TransformerConfig& c);  // layers add_moe_mlp adds

// Model FLOPs of one MoE MLP's GEMMs for one sample of s tokens, forward: the router 2 s h E, the
// routed experts 3 x 2 s k h f_e and the shared experts 3 x 2 s h f_shared.
double moe_mlp_gemm_flops(const TransformerConfig& c, double s);

// silu(gate) * up over n elements, eager PyTorch (F.silu then mul: 2 kernels): the dense MLP's
// activation and each expert's (docs/transformer.md, "MLP").
LayerSpec swiglu_spec(std::string name, double n, double e, TpRole role);

}  // namespace csim::core
