// Multi-head latent attention's layers (core/model/mla_layers.hpp). Every formula:
// docs/transformer.md, "Multi-head latent attention".
#include "core/model/mla_layers.hpp"

#include <utility>

#include "core/model/block_layers.hpp"
#include "core/model/model_builders.hpp"

namespace csim::core {

namespace {
using i64 = std::int64_t;
}  // namespace

i64 mla_qk_head_dim(const MlaConfig& m) {
  return m.qk_nope_head_dim + m.qk_rope_head_dim;
}

void add_mla_attention(std::vector<LayerSpec>& out, const TransformerConfig& c,
                       const AttentionShape& core, const std::string& p, double s, double e) {
  const MlaConfig& m = c.mla;
  const i64 h = c.hidden, a = c.heads, dn = m.qk_nope_head_dim, dr = m.qk_rope_head_dim;
  const i64 dv = m.v_head_dim, dq = dn + dr, qr = m.q_lora_rank, kvr = m.kv_lora_rank;
  // Megatron-Core's MLASelfAttention (multi_latent_attention.py): the down projections are
  // duplicated over tensor-parallel ranks, the up projections column-parallel by heads, the
  // output projection row-parallel.
  if (qr > 0) {
    // q = W_uq RMSNorm(W_dq x): h -> q_lora_rank -> a d_qk.
    out.push_back(linear_spec(p + "attn.q_down", h, qr, false, s, e, TpRole::kReplicated));
    out.push_back(
        norm_spec(p + "attn.q_norm", NormKind::kRmsNorm, qr, s, e, false, TpRole::kReplicated));
    out.push_back(linear_spec(p + "attn.q_up", qr, a * dq, false, s, e, TpRole::kColumn));
  } else {
    out.push_back(linear_spec(p + "attn.q", h, a * dq, false, s, e, TpRole::kColumn));
  }
  // Megatron's "mla_up_proj" recompute module (multi_latent_attention.py,
  // qkv_up_proj_and_rope_apply under CheckpointWithoutOutput): linear_q_up_proj (linear_q_proj
  // without a q LoRA), linear_kv_up_proj and the RoPE with the q / k concatenation.
  out.back().recompute_modules = recompute_module::kMlaUpProj;
  // [c_kv, k_rope] = W_dkv x: h -> kv_lora_rank + d_rope; x is ln_1's output, already saved by
  // the q projection above, so this one saves nothing of its own.
  LayerSpec kv_down =
      linear_spec(p + "attn.kv_down", h, kvr + dr, false, s, e, TpRole::kReplicated);
  kv_down.activation_bytes_per_sample = 0;
  out.push_back(std::move(kv_down));
  out.push_back(
      norm_spec(p + "attn.kv_norm", NormKind::kRmsNorm, kvr, s, e, false, TpRole::kReplicated));
  // [k_nope, v] = W_ukv c_kv: kv_lora_rank -> a (d_nope + d_v).
  out.push_back(linear_spec(p + "attn.kv_up", kvr, a * (dn + dv), false, s, e, TpRole::kColumn));
  out.back().recompute_modules = recompute_module::kMlaUpProj;
  // RoPE on q's d_rope dims of every head and on k_rope (one per token, shared by the heads): 3
  // FLOPs/elem over s (a + 1) d_rope, reading and writing them and the cos / sin tables; then q =
  // [q_nope, q_rope] and k = [k_nope, k_rope expanded to a heads] made contiguous for the core:
  // cat(q) reads and writes s a d_qk, cat(k) reads s a d_nope + s d_rope and writes s a d_qk.
  // 4 kernels; nothing saved (the core saves q, k and v).
  const double rot = s * static_cast<double>((a + 1) * dr);
  const double qk = s * static_cast<double>(a * dq);
  const double bytes = 2.0 * e * rot + 2.0 * e * s * static_cast<double>(dr) + 2.0 * e * qk +
                       e * (s * static_cast<double>(a * dn + dr) + qk);
  out.push_back(make_layer(p + "attn.rope", ComputeKind::kElementwise, TpRole::kSharded, 0,
                           3.0 * rot, bytes, 0, e * s * static_cast<double>(a * (2 * dq + dv)), 4));
  out.back().recompute_modules = recompute_module::kMlaUpProj;
  for (LayerSpec& l : attention_core_layers(c.attention_kernel, core, e, p))
    out.push_back(std::move(l));
  out.push_back(linear_spec(p + "attn.proj", a * dv, h, c.attn_out_bias, s, e, TpRole::kRow));
}

int mla_attention_layer_count(const TransformerConfig& c, int core_layers) {
  // q (1 or 3), kv_down, kv_norm, kv_up, rope, the core, proj.
  return (c.mla.q_lora_rank > 0 ? 3 : 1) + 4 + core_layers + 1;
}

double mla_projection_flops(const TransformerConfig& c, double s) {
  const MlaConfig& m = c.mla;
  const double h = static_cast<double>(c.hidden), a = c.heads;
  const double dn = static_cast<double>(m.qk_nope_head_dim);
  const double dr = static_cast<double>(m.qk_rope_head_dim);
  const double dv = static_cast<double>(m.v_head_dim), dq = dn + dr;
  const double qr = static_cast<double>(m.q_lora_rank), kvr = static_cast<double>(m.kv_lora_rank);
  const double q = m.q_lora_rank > 0 ? h * qr + qr * a * dq : h * a * dq;
  return 2.0 * s * (q + h * (kvr + dr) + kvr * a * (dn + dv) + a * dv * h);
}

}  // namespace csim::core
