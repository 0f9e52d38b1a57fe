// model.transformer.mla (core/scenario/parse_transformer.hpp; docs/scenario.md,
// "model.transformer.mla"): multi-head latent attention's keys, and the rules an MlaConfig must
// follow (shared with the Hugging Face import of DeepSeek-V3, which fills the same MlaConfig).
#include <string>

#include "core/scenario/parse_transformer.hpp"

namespace csim::core::parse {

namespace {

std::string n(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::optional<TransformerProblem> mla_problem(const TransformerConfig& c) {
  using P = TransformerProblem;
  const MlaConfig& m = c.mla;
  if (!m.any()) return std::nullopt;
  if (m.q_lora_rank < 0)
    return P{"mla.q_lora_rank", "must be >= 0", "0 projects q straight from the hidden state"};
  if (m.qk_nope_head_dim < 1 || m.v_head_dim < 1)
    return P{m.qk_nope_head_dim < 1 ? "mla.qk_nope_head_dim" : "mla.v_head_dim", "must be >= 1",
             "DeepSeek-V3: qk_nope_head_dim 128, v_head_dim 128"};
  if (m.qk_rope_head_dim < 2 || m.qk_rope_head_dim % 2 != 0)
    return P{"mla.qk_rope_head_dim", n(m.qk_rope_head_dim) + " is not an even count >= 2",
             "RoPE rotates pairs of dimensions (DeepSeek-V3: 64)"};
  if (c.position != PositionKind::kRope)
    return P{"position",
             "multi-head latent attention carries its positions in qk_rope_head_dim rotated dims",
             "set position to rope"};
  if (c.rotary_fraction != 1.0)
    return P{"rotary_fraction", "MLA rotates exactly mla.qk_rope_head_dim dims of each head",
             "remove rotary_fraction"};
  if (c.kv_heads != 0 && c.kv_heads != c.heads)
    return P{"kv_heads",
             n(c.kv_heads) + " key/value heads: MLA gives every query head its own k and v",
             "remove kv_heads (or set it to heads)"};
  const std::int64_t dq = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (c.head_dim != 0 && c.head_dim != dq)
    return P{"head_dim", n(c.head_dim) + " is not qk_nope_head_dim + qk_rope_head_dim = " + n(dq),
             "remove head_dim: MLA's q/k heads are d_nope + d_rope wide"};
  if (c.qk_norm || c.qkv_bias)
    return P{c.qk_norm ? "qk_norm" : "qkv_bias",
             "applies to q/k/v attention, not to multi-head latent attention",
             "remove it (MLA norms its latents: mla.q_lora_rank, mla.kv_lora_rank)"};
  if (c.attention_kernel == AttentionKernel::kFlash2 && m.v_head_dim != dq)
    return P{"attention.kernel",
             "flash2 needs q, k and v heads of one width; MLA's are " + n(dq) + " and " +
                 n(m.v_head_dim),
             "use cudnn (Transformer Engine's fused attention, as Megatron-Core runs MLA), flash3 "
             "on Hopper, or eager"};
  return std::nullopt;
}

AttentionKernel mla_default_kernel(const TransformerConfig& c, AttentionKernel kernel) {
  // FlashAttention-2 requires one head width for q, k and v; Megatron-Core runs MLA through
  // Transformer Engine's cuDNN fused attention, which takes d_qk != d_v (docs/attention.md).
  if (c.mla.any() && kernel == AttentionKernel::kFlash2 &&
      c.mla.v_head_dim != c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim)
    return AttentionKernel::kCudnn;
  return kernel;
}

MlaConfig parse_mla(Ctx& ctx, const nlohmann::json& v, const std::string& path) {
  Obj o(ctx, v, path,
        {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
  MlaConfig m;
  m.q_lora_rank = o.integer("q_lora_rank", 0, 0, 1 << 20);
  m.kv_lora_rank = o.req_integer("kv_lora_rank", 1, 1 << 20);
  m.qk_nope_head_dim = o.req_integer("qk_nope_head_dim", 1, 1 << 14);
  m.qk_rope_head_dim = o.req_integer("qk_rope_head_dim", 2, 1 << 14);
  m.v_head_dim = o.req_integer("v_head_dim", 1, 1 << 14);
  return m;
}

}  // namespace csim::core::parse
