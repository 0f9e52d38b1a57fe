// The attention core of a decoder block, per attention implementation (AttentionKernel in
// core/scenario/transformer_config.hpp): the layers between the q/k/v projections and the output
// projection, their FLOPs, memory traffic, saved activations and backward, and which GPUs can run
// each kernel. Formulas and sources: docs/attention.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

struct AttentionShape {
  std::int64_t seq_len = 0;     // s, tokens per sample
  int heads = 0;                // query heads (whole model, before tensor parallelism)
  int kv_heads = 0;             // key/value heads (GQA); == heads for MHA
  std::int64_t head_dim = 0;    // d, per head of q and k
  std::int64_t v_head_dim = 0;  // d_v, per head of v and the output (MLA: 128 with d 192); 0 = d
  std::int64_t window = 0;      // sliding window in tokens; 0 = full causal attention
  bool causal = true;           // decoder: the upper triangle is masked
  bool dropout = false;         // dropout on the probabilities (eager only; flash fuses it)
};

// The core's layers for one sample, in forward order, named prefix + "attn.<part>" (eager:
// attn.scores, attn.softmax, [attn.dropout], attn.av, as build_gpt; fused kernels: one layer
// attn.core). Every layer has tp_role kSharded (split by heads), selective_recompute set where
// Megatron's selective recompute re-runs it, and its backward figures.
std::vector<LayerSpec> attention_core_layers(AttentionKernel kernel, const AttentionShape& shape,
                                             double act_bytes, const std::string& prefix);

// The layer is a fused attention core (flash2, flash3, cudnn: one attn.core kernel), the layer
// context parallelism wraps (core/lowering/context_parallel.cpp).
inline bool is_fused_attention_core(const LayerSpec& l) {
  return l.kind == ComputeKind::kAttention && l.fused_attention.kernel != AttentionKernel::kEager;
}

// The fraction of the GPU's dense peak (for the op's dtype) that a fused attention kernel reaches
// for this shape, forward or backward: E(kernel, GPU generation, pass, head_dim) *
// k / (k + k_half) * u, k = keys per query, u = the useful share of the pairs a causal core's
// tiles cover (1 without the causal mask) (docs/attention.md, "Efficiency", "Causal diagonal
// tiles"; every figure there with its published kernel benchmark or kernel source). 0 for eager
// (the GPU's attention curve applies).
double fused_attention_max_efficiency(const GpuSpec& gpu, const FusedAttentionShape& shape,
                                      bool backward);

// Query-key pairs one head evaluates for one sample (docs/attention.md, "Work"): s^2 without the
// causal mask, ~s^2/2 with it (a fused kernel skips fully masked tiles), ~s*w - w^2/2 with a causal
// window of w tokens.
double attended_pairs(const AttentionShape& shape);

// "" when `gpu` can run `kernel`; else why not, naming the GPU and the compute capability the
// kernel needs (e.g. flash3 on an A100).
std::string attention_kernel_unsupported(AttentionKernel kernel, const GpuSpec& gpu);

// What PyTorch / the usual training stacks pick on this GPU when the user names none.
AttentionKernel default_attention_kernel(const GpuSpec& gpu);

}  // namespace csim::core
