// The general decoder block (core/model/model_transformer.hpp). Every formula: docs/transformer.md,
// cited by section at the line that implements it.
//
// Index: [SECTION] Names, [SECTION] Shapes, [SECTION] Layer formulas, [SECTION] Block,
//        [SECTION] Model
#include "core/model/model_transformer.hpp"

#include <stdexcept>
#include <utility>
#include <vector>

#include "core/model/attention_kernels.hpp"
#include "core/model/block_layers.hpp"
#include "core/model/mla_layers.hpp"
#include "core/model/model_builders.hpp"
#include "core/model/moe_layers.hpp"
#include "core/model/mtp_layers.hpp"

namespace csim::core {

// [SECTION] Names --------------------------------------------------------------------------------

const char* to_string(MlpKind k) {
  switch (k) {
    case MlpKind::kGelu:
      return "gelu";
    case MlpKind::kSwiglu:
      return "swiglu";
  }
  return "?";
}

const char* to_string(NormKind k) {
  switch (k) {
    case NormKind::kLayerNorm:
      return "layernorm";
    case NormKind::kRmsNorm:
      return "rmsnorm";
  }
  return "?";
}

const char* to_string(PositionKind k) {
  switch (k) {
    case PositionKind::kLearned:
      return "learned";
    case PositionKind::kRope:
      return "rope";
    case PositionKind::kAlibi:
      return "alibi";
    case PositionKind::kNone:
      return "none";
  }
  return "?";
}

const char* to_string(AttentionKernel k) {
  switch (k) {
    case AttentionKernel::kEager:
      return "eager";
    case AttentionKernel::kFlash2:
      return "flash2";
    case AttentionKernel::kFlash3:
      return "flash3";
    case AttentionKernel::kCudnn:
      return "cudnn";
  }
  return "?";
}

// [SECTION] Shapes -------------------------------------------------------------------------------

TransformerDims transformer_dims(const TransformerConfig& c) {
  TransformerDims d;
  d.kv_heads = c.kv_heads > 0 ? c.kv_heads : c.heads;
  d.head_dim = c.head_dim > 0 ? c.head_dim : (c.heads > 0 ? c.hidden / c.heads : 0);
  d.ffn_hidden = c.ffn_hidden > 0 ? c.ffn_hidden : 4 * c.hidden;
  const std::int64_t m = c.vocab_pad_multiple > 1 ? c.vocab_pad_multiple : 1;
  d.padded_vocab = (c.vocab + m - 1) / m * m;
  if (c.mla.any()) {
    // Multi-head latent attention (docs/transformer.md, "Multi-head latent attention"): every q
    // head has its own k and v (kv_heads = heads); q and k are d_nope + d_rope wide, and RoPE
    // turns exactly the d_rope dims.
    d.kv_heads = c.heads;
    d.head_dim = mla_qk_head_dim(c.mla);
  }
  if (c.mla.any() && c.position == PositionKind::kRope) {
    d.rotary_dim = c.mla.qk_rope_head_dim;
  } else if (c.position == PositionKind::kRope) {
    // GPT-NeoX: rotary_ndims = int(head_dim * rotary_pct); the rotation pairs dimensions, so an
    // odd count is rounded down (docs/transformer.md, "Positions").
    const auto r = static_cast<std::int64_t>(c.rotary_fraction * static_cast<double>(d.head_dim));
    d.rotary_dim = r / 2 * 2;
  }
  if (c.position == PositionKind::kLearned)
    d.positions = c.max_positions > 0 ? c.max_positions : c.seq_len;
  return d;
}

bool block_is_windowed(const TransformerConfig& c, int block) {
  if (c.window <= 0) return false;
  return c.global_every <= 0 || (block + 1) % c.global_every != 0;
}

namespace {

using i64 = std::int64_t;
using CK = ComputeKind;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

AttentionShape attention_shape(const TransformerConfig& c, const TransformerDims& d, int block) {
  AttentionShape a;
  a.seq_len = c.seq_len;
  a.heads = c.heads;
  a.kv_heads = static_cast<int>(d.kv_heads);
  a.head_dim = d.head_dim;
  a.v_head_dim = c.mla.any() ? c.mla.v_head_dim : 0;
  a.window = block_is_windowed(c, block) ? c.window : 0;
  a.causal = true;
  a.dropout = c.attention_dropout;
  return a;
}

// [SECTION] Layer formulas -----------------------------------------------------------------------
// Per sample, forward; e = bytes per activation element; FLOPs = 2 per multiply-accumulate
// (docs/transformer.md, "Conventions").

LayerSpec make(std::string name, CK kind, TpRole role, i64 params, double flops, double bytes,
               double act, double out, int kernels) {
  return make_layer(std::move(name), kind, role, params, flops, bytes, act, out, kernels);
}

// Residual add of n elements (docs/transformer.md, "Residuals"): 1 FLOP/elem, reads two tensors
// and writes one (3e/elem), saves nothing. With hidden dropout first (GPT-2): + 2 FLOPs/elem, the
// 1-byte mask written and saved, 2 kernels (as build_gpt's attn.residual / mlp.residual).
// Its output is the residual stream, read again by the next residual add (output_reused: a fused
// group ending here still writes it; docs/compile.md).
LayerSpec residual_spec(std::string name, double n, double e, bool dropout) {
  LayerSpec l = dropout ? make(std::move(name), CK::kElementwise, TpRole::kReplicated, 0, 3.0 * n,
                               3.0 * e * n + n, n, e * n, 2)
                        : make(std::move(name), CK::kElementwise, TpRole::kReplicated, 0, n,
                               3.0 * e * n, 0, e * n, 1);
  // Backward (docs/transformer.md, "Backward traffic"): the residual stream's two gradients are
  // summed by one add (3e/elem); dropout's backward reads dy and the mask and writes dx (2e + 1).
  l.bwd_bytes_per_sample = 3.0 * e * n + (dropout ? 2.0 * e * n + n : 0.0);
  l.output_reused = true;
  return l;
}

// [SECTION] Block --------------------------------------------------------------------------------

// The attention branch from ln_1's output to the output projection, q/k/v attention
// (docs/transformer.md, "Block").
void add_attention(std::vector<LayerSpec>& layers, const TransformerConfig& c,
                   const TransformerDims& d, int i, const std::string& p, double s, double e) {
  const i64 h = c.hidden, a = c.heads, g = d.kv_heads, hd = d.head_dim;
  const i64 q_w = a * hd, kv_w = g * hd, qkv_w = q_w + 2 * kv_w;  // q, k, v widths
  // q, k, v as one column-parallel GEMM h -> (a + 2g) d (Megatron's linear_qkv; HF's q_proj,
  // k_proj, v_proj hold the same parameters): split by heads under tensor parallelism.
  layers.push_back(linear_spec(p + "attn.qkv", h, qkv_w, c.qkv_bias, s, e, TpRole::kColumn));
  if (c.qk_norm) {
    // Qwen3: RMSNorm over each head's q and k (weights of head_dim each, shared by the heads):
    // 2d params; 4 FLOPs/elem over s (a + g) d; saves q and k and the fp32 rstd per head and
    // position; one kernel each for q and k (docs/transformer.md, "QK-norm").
    const double n = s * static_cast<double>(q_w + kv_w);
    const double rows = s * static_cast<double>(a + g);
    layers.push_back(make(p + "attn.qk_norm", CK::kElementwise, TpRole::kSharded, 2 * hd, 4.0 * n,
                          2.0 * e * n, e * n + 4.0 * rows, e * n, 2));
    layers.back().second_tensor_params = hd;  // q_norm and k_norm: two weights of head_dim
  }
  if (c.position == PositionKind::kRope && d.rotary_dim > 0) {
    // RoPE on q and k over rotary_dim of each head: x cos + rotate_half(x) sin, 3 FLOPs/elem; reads
    // and writes the rotated part and reads the cos / sin tables (2 e s r); no parameters, nothing
    // saved per block (cos and sin are computed once per forward and shared by every block); one
    // fused kernel each for q and k (docs/transformer.md, "Positions").
    const double r = static_cast<double>(d.rotary_dim);
    const double n = s * static_cast<double>(a + g) * r;
    layers.push_back(make(p + "attn.rope", CK::kElementwise, TpRole::kSharded, 0, 3.0 * n,
                          2.0 * e * n + 2.0 * e * s * r, 0, e * s * static_cast<double>(qkv_w), 2));
  }
  // The attention core (core/model/attention_kernels.hpp, docs/attention.md). ALiBi's bias is added
  // inside it (docs/transformer.md, "Positions").
  std::vector<LayerSpec> core =
      attention_core_layers(c.attention_kernel, attention_shape(c, d, i), e, p);
  if (c.attention_sinks) {
    // Attention sinks (GPT-OSS): one learned logit per head joins each softmax row, a head-split
    // tensor of `a` parameters held by the layer that runs the softmax (the fused core, or eager's
    // attn.softmax); its cost is one more column per row (docs/transformer.md, "Attention
    // sinks").
    LayerSpec& holder = core.size() == 1 ? core.front() : core[1];
    holder.params += a;
    holder.second_tensor_params += a;
  }
  for (LayerSpec& l : core) layers.push_back(std::move(l));
  LayerSpec proj = linear_spec(p + "attn.proj", q_w, h, c.attn_out_bias, s, e, TpRole::kRow);
  layers.push_back(std::move(proj));
}

// Block `i`'s layers, named `p` and tagged `block` (= i for the main model's blocks; a
// multi-token-prediction depth's block is shaped as the last block and numbered after it:
// core/model/mtp_layers.hpp).
void add_block(ModelSpec& m, const TransformerConfig& c, const TransformerDims& d, int i, int block,
               const std::string& p, double e) {
  const i64 h = c.hidden, f = d.ffn_hidden;
  const double s = static_cast<double>(c.seq_len), sh = s * static_cast<double>(h);
  const bool gated = c.mlp == MlpKind::kSwiglu;
  const std::size_t first = m.layers.size();

  // Attention branch (docs/transformer.md, "Block"). ln_1 saves the block input x.
  m.layers.push_back(norm_spec(p + "ln_1", c.norm, h, s, e, false, TpRole::kReplicated));
  m.layers.back().recompute_modules = recompute_module::kLayernorm;  // Megatron's input_layernorm
  if (c.mla.any()) {
    // Multi-head latent attention in place of q, k, v (core/model/mla_layers.hpp).
    add_mla_attention(m.layers, c, attention_shape(c, d, i), p, s, e);
  } else {
    add_attention(m.layers, c, d, i, p, s, e);
  }
  if (!c.parallel_residual)
    m.layers.push_back(residual_spec(p + "attn.residual", sh, e, c.hidden_dropout));

  // MLP branch. With parallel_residual (GPT-NeoX) ln_2 reads the block input x, which ln_1
  // already saved: it saves only its statistics.
  m.layers.push_back(
      norm_spec(p + "ln_2", c.norm, h, s, e, c.parallel_residual, TpRole::kReplicated));
  m.layers.back().recompute_modules = recompute_module::kLayernorm;  // pre_mlp_layernorm
  const std::size_t mlp_first = m.layers.size();
  if (block_is_moe(c, i)) {
    // A mixture of experts in the MLP's place (core/model/moe_layers.hpp).
    add_moe_mlp(m.layers, c, p, s, e);
  } else {
    // gelu: fc h -> f. swiglu: gate and up as one column-parallel GEMM h -> 2f (Megatron's
    // linear_fc1 with a gated linear unit; HF's gate_proj and up_proj hold the same parameters).
    const i64 fc_w = gated ? 2 * f : f;
    m.layers.push_back(linear_spec(p + "mlp.fc", h, fc_w, c.mlp_bias, s, e, TpRole::kColumn));
    const double sf = s * static_cast<double>(f);
    if (gated) {
      // silu(gate) * up (docs/transformer.md, "MLP").
      m.layers.push_back(swiglu_spec(p + "mlp.swiglu", sf, e, TpRole::kSharded));
    } else {
      // GELU (tanh form, ~8 FLOPs/elem as build_gpt): reads and writes sf, saves its input.
      m.layers.push_back(make(p + "mlp.gelu", CK::kElementwise, TpRole::kSharded, 0, 8.0 * sf,
                              2.0 * e * sf, e * sf, e * sf, 1));
      m.layers.back().bwd_bytes_per_sample = 3.0 * e * sf;  // reads x and dy, writes dx
    }
    m.layers.push_back(linear_spec(p + "mlp.proj", f, h, c.mlp_bias, s, e, TpRole::kRow));
    // Megatron's "mlp" recompute module: the dense MLP (transformer_layer.py, recompute_mlp).
    for (std::size_t j = mlp_first; j < m.layers.size(); ++j)
      m.layers[j].recompute_modules = recompute_module::kMlp;
  }
  if (c.parallel_residual) {
    // x + attn + mlp: two adds (2 FLOPs/elem, 2 kernels of 3e/elem each); with hidden dropout
    // each branch is dropped first (its mask saved).
    LayerSpec r = make(p + "mlp.residual", CK::kElementwise, TpRole::kReplicated, 0, 2.0 * sh,
                       6.0 * e * sh, 0, e * sh, 2);
    // Backward: the block input's three gradients (ln_1's, ln_2's, the add's) summed by two adds
    // (6e sh); each dropout's backward 2e sh + sh.
    r.bwd_bytes_per_sample = 6.0 * e * sh;
    if (c.hidden_dropout) {
      r.fwd_flops_per_sample += 4.0 * sh;
      r.fwd_bytes_per_sample += 2.0 * sh;
      r.activation_bytes_per_sample += 2.0 * sh;
      r.kernels += 2;
      r.bwd_bytes_per_sample += 4.0 * e * sh + 2.0 * sh;
    }
    r.output_reused = true;  // the residual stream, read by the next block
    m.layers.push_back(std::move(r));
  } else {
    m.layers.push_back(residual_spec(p + "mlp.residual", sh, e, c.hidden_dropout));
  }
  for (std::size_t j = first; j < m.layers.size(); ++j) m.layers[j].block = block;
}

}  // namespace

void add_decoder_block(ModelSpec& m, const TransformerConfig& c, int like, int block,
                       const std::string& prefix, double e) {
  add_block(m, c, transformer_dims(c), like, block, prefix, e);
}

// [SECTION] Model --------------------------------------------------------------------------------

std::int64_t transformer_layer_count(const TransformerConfig& c) {
  AttentionShape tiny;
  tiny.seq_len = 2;
  tiny.heads = 1;
  tiny.kv_heads = 1;
  tiny.head_dim = 2;
  tiny.dropout = c.attention_dropout;
  const auto core =
      static_cast<i64>(attention_core_layers(c.attention_kernel, tiny, 2.0, "").size());
  const i64 attention =
      1 /* ln_1 */ +
      (c.mla.any() ? mla_attention_layer_count(c, static_cast<int>(core))
                   : 1 /* qkv */ + (c.qk_norm ? 1 : 0) +
                         (c.position == PositionKind::kRope ? 1 : 0) + core + 1 /* proj */) +
      (c.parallel_residual ? 0 : 1);
  auto block_layers = [&](int i) {
    return attention + 1 /* ln_2 */ + (block_is_moe(c, i) ? moe_mlp_layer_count(c) : 3) +
           1 /* residual */;
  };
  i64 blocks = 0;
  for (int i = 0; i < c.layers; ++i) blocks += block_layers(i);
  // Each multi-token-prediction depth: its own layers around a block shaped as the last one
  // (core/model/mtp_layers.hpp).
  const i64 mtp =
      c.layers >= 1 ? c.mtp_layers * (kMtpLayersBesideBlock + block_layers(c.layers - 1)) : 0;
  return 1 /* embed */ + blocks + 2 /* ln_f, lm_head */ + mtp;
}

ModelSpec build_transformer(const TransformerConfig& c, int act_bytes) {
  require(c.layers >= 1 && c.hidden >= 1 && c.heads >= 1 && c.seq_len >= 1 && c.vocab >= 1,
          "transformer sizes must be >= 1");
  const TransformerDims d = transformer_dims(c);
  require(d.head_dim >= 1, "head_dim must be >= 1 (hidden / heads is 0)");
  require(d.kv_heads >= 1 && c.heads % d.kv_heads == 0, "kv_heads must divide heads");
  require(c.mlp != MlpKind::kSwiglu || c.ffn_hidden > 0, "swiglu needs ffn_hidden");
  require(c.window >= 0 && c.global_every >= 0, "window and global_every must be >= 0");
  require(c.mtp_layers >= 0, "mtp_layers must be >= 0");
  require(
      !c.moe.any() || (c.moe.top_k >= 1 && c.moe.top_k <= c.moe.experts &&
                       c.mlp == MlpKind::kSwiglu && c.moe.every_k_layers >= 1),
      "a mixture of experts needs 1 <= top_k <= experts, swiglu experts and every_k_layers >= 1");
  const double e = act_bytes, s = static_cast<double>(c.seq_len);
  const double sh = s * static_cast<double>(c.hidden);
  const i64 h = c.hidden, vp = d.padded_vocab;

  ModelSpec m;
  m.name = !c.name.empty()
               ? c.name
               : "transformer-" + std::to_string(c.layers) + "L-" + std::to_string(h) + "h";
  m.source = "transformer";
  m.input_bytes_per_sample = 8.0 * s;  // int64 token ids

  // Embeddings (docs/transformer.md, "Embeddings"): the token table (Vp rows; a row gather reads
  // and writes sh, 1 kernel; saves the int64 ids), then with learned positions the position table
  // (positions x h: a gather 2e sh and the add 3e sh, 1 FLOP/elem, 2 kernels), then with hidden
  // dropout a dropout (1 FLOP/elem, reads and writes sh, its 1-byte mask written and saved).
  LayerSpec embed = make("embed", CK::kElementwise, TpRole::kVocabInput, vp * h, 0, 2.0 * e * sh,
                         8.0 * s, e * sh, 1);
  if (c.position == PositionKind::kLearned) {
    embed.params += d.positions * h;
    embed.second_tensor_params = d.positions * h;  // the position table beside the token table
    embed.fwd_flops_per_sample += sh;
    embed.fwd_bytes_per_sample += 5.0 * e * sh;
    embed.kernels += 2;
  }
  if (c.hidden_dropout) {
    embed.fwd_flops_per_sample += sh;
    embed.fwd_bytes_per_sample += 2.0 * e * sh + sh;
    embed.activation_bytes_per_sample += sh;
    embed.kernels += 1;
  }
  m.layers.push_back(std::move(embed));

  for (int i = 0; i < c.layers; ++i) add_block(m, c, d, i, i, "h." + std::to_string(i) + ".", e);

  // Final norm, then the LM head: logits = x W^T over the Vp rows, FLOPs 2 s h Vp; params 0 when
  // tied to the token embedding; saves its input; its output is the logits (the loss is added by
  // the lowering). Megatron splits both by vocabulary rows.
  m.layers.push_back(norm_spec("ln_f", c.norm, h, s, e, false, TpRole::kReplicated));
  // The multi-token-prediction depths read the final norm's output and hand it on to the LM head
  // (Megatron-Core's GPTModel runs the MTP block, then process_mtp_loss, then the output layer;
  // core/model/mtp_layers.hpp).
  add_mtp_modules(m, c, e);
  const double svp = s * static_cast<double>(vp);
  m.layers.push_back(make("lm_head", CK::kGemm, TpRole::kVocabOutput,
                          c.tied_embeddings ? 0 : vp * h, 2.0 * sh * static_cast<double>(vp),
                          e * (sh + svp), e * sh, e * svp, 1));
  m.layers.back().gemm = GemmShape{1, static_cast<i64>(s), vp, h};

  m.transformer = TransformerShape{
      c.layers, h, c.heads, c.seq_len, vp, d.ffn_hidden, static_cast<int>(d.kv_heads), d.head_dim};
  m.transformer_config = c;
  return m;
}

}  // namespace csim::core
