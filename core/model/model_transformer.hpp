// The general decoder-only transformer (core/scenario/transformer_config.hpp) as a layer list: GQA
// / MQA, head_dim != hidden / heads, GELU or SwiGLU MLPs, LayerNorm or RMSNorm, learned / RoPE /
// ALiBi / no positions, tied embeddings, biases, QK-norm, parallel residual, sliding windows,
// vocabulary padding. Every layer's parameters, FLOPs, traffic, saved activations and output: docs/
// transformer.md; the attention core comes from attention_core_layers
// (core/model/attention_kernels.hpp, docs/attention.md).
#pragma once

#include <cstdint>
#include <string>

#include "core/scenario/scenario.hpp"
#include "core/scenario/transformer_config.hpp"

namespace csim::core {

// Derived sizes of a TransformerConfig, defaults resolved (docs/transformer.md, "Shapes").
struct TransformerDims {
  std::int64_t kv_heads = 0;      // g: kv_heads, or heads when 0
  std::int64_t head_dim = 0;      // d: head_dim, or hidden / heads when 0
  std::int64_t ffn_hidden = 0;    // f: ffn_hidden, or 4h when 0 (gelu)
  std::int64_t padded_vocab = 0;  // Vp = ceil(V / vocab_pad_multiple) * vocab_pad_multiple
  std::int64_t rotary_dim = 0;    // RoPE: int(rotary_fraction * d) rounded down to even; else 0
  std::int64_t positions = 0;     // learned: max_positions, or seq_len when 0; else 0
};
TransformerDims transformer_dims(const TransformerConfig& c);

// True when block `block` (0-based) attends through the sliding window: a window is set and the
// block is not one of the every-k-th global blocks ((block + 1) % global_every == 0).
bool block_is_windowed(const TransformerConfig& c, int block);

// Layers build_transformer makes for `c` (the parser checks it against limits.max_layers).
std::int64_t transformer_layer_count(const TransformerConfig& c);

// One decoder block appended to m.layers: shaped as block `like` (its MLP a mixture of experts or
// dense, its attention windowed or not), its layers named `prefix` + "ln_1", ... and tagged
// `block`. build_transformer calls it per block; the multi-token-prediction depths
// (core/model/mtp_layers.hpp) for theirs. `e`: bytes of one activation element.
void add_decoder_block(ModelSpec& m, const TransformerConfig& c, int like, int block,
                       const std::string& prefix, double e);

// The layer list. Throws std::invalid_argument on sizes that cannot be built (the parser checks
// every one first and names its key). `act_bytes`: bytes of one activation element.
ModelSpec build_transformer(const TransformerConfig& c, int act_bytes);

}  // namespace csim::core
