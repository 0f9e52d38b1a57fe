// The mixture-of-experts MLP (core/model/moe_layers.hpp). Every formula: docs/transformer.md,
// "Mixture of experts".
#include "core/model/moe_layers.hpp"

#include <utility>

#include "core/model/model_builders.hpp"

namespace csim::core {

namespace {

using i64 = std::int64_t;
using CK = ComputeKind;

// A GEMM layer of `params` parameters, of which `inactive` unused by a token; `flops` forward,
// `in` and `out` activation elements read and written (traffic e (in + out)); saves its input.
LayerSpec gemm_layer(std::string name, TpRole role, i64 params, i64 inactive, double flops,
                     double in, double out, double e, GemmShape shape) {
  LayerSpec l = make_layer(std::move(name), CK::kGemm, role, params, flops, e * (in + out), e * in,
                           e * out, 1);
  l.inactive_params = inactive;
  l.gemm = shape;
  return l;
}

// Routing (docs/transformer.md, "Router"): the scores over the E logits, softmax 5 FLOPs/elem or
// sigmoid 4; top-k (1); the load-balancing loss's per-expert fractions and mean probabilities (2).
// Reads the logits three times and writes the scores (4e s E), writes k indices (int64) and
// weights per token; saves the scores (their backward) and the indices; 6 kernels (scores, topk,
// the weights' renormalisation, the loss's 3). A score-correction bias adds 1 FLOP/elem and one
// kernel reading the scores and writing the biased copy the selection reads (2e s E); group-limited
// selection (DeepSeek-V3's n_group, topk_group) adds the group scores (the sum of each group's top
// 2: 2 FLOPs/elem), the top groups and the mask over the other groups' experts (1 FLOP/elem),
// reading and writing the scores once more (2e s E), 3 kernels.
LayerSpec route_spec(const TransformerConfig& c, const std::string& p, double s, double e) {
  const MoeRouter& rt = c.moe.router;
  const double de = c.moe.experts, t = s * c.moe.top_k, se = s * de;
  double flops = ((rt.score == RouterScore::kSigmoid ? 4.0 : 5.0) + 3.0) * se;
  double bytes = 4.0 * e * se + t * (8.0 + e);
  int kernels = 6;
  if (rt.bias) {
    flops += se;
    bytes += 2.0 * e * se;
    kernels += 1;
  }
  if (rt.groups > 1) {
    flops += 3.0 * se;
    bytes += 2.0 * e * se;
    kernels += 3;
  }
  return make_layer(p + "mlp.route", CK::kElementwise, TpRole::kReplicated, 0, flops, bytes,
                    e * se + 8.0 * t, e * t, kernels);
}

}  // namespace

bool block_is_moe(const TransformerConfig& c, int block) {
  const MoeConfig& m = c.moe;
  if (!m.any() || block < m.first_dense_layers) return false;
  return m.every_k_layers <= 1 || (block + 1) % m.every_k_layers == 0;
}

i64 expert_ffn_hidden(const TransformerConfig& c) {
  return c.moe.expert_ffn_hidden > 0 ? c.moe.expert_ffn_hidden : c.ffn_hidden;
}

i64 shared_ffn_hidden(const TransformerConfig& c) {
  if (c.moe.shared_ffn_hidden > 0) return c.moe.shared_ffn_hidden;
  return static_cast<i64>(c.moe.shared_experts) * expert_ffn_hidden(c);
}

LayerSpec swiglu_spec(std::string name, double n, double e, TpRole role) {
  // silu 5 FLOPs/elem (sigmoid 4, times x 1), mul 1; traffic silu 2e n + mul 3e n; saved: gate
  // (silu's input), up and silu(gate) (mul's inputs) = 3 e n.
  LayerSpec l = make_layer(std::move(name), CK::kElementwise, role, 0, 6.0 * n, 5.0 * e * n,
                           3.0 * e * n, e * n, 2);
  // Backward: mul's reads dy, up and silu(gate) and writes both input gradients (5e n); silu's
  // reads gate and its gradient and writes d gate (3e n).
  l.bwd_bytes_per_sample = 8.0 * e * n;
  return l;
}

int moe_mlp_layer_count(const TransformerConfig& c) {
  // router, route, permute, experts fc / swiglu / proj, unpermute; the shared experts' 3.
  return 7 + (shared_ffn_hidden(c) > 0 ? 3 : 0);
}

double moe_mlp_gemm_flops(const TransformerConfig& c, double s) {
  const double h = static_cast<double>(c.hidden), ne = c.moe.experts, k = c.moe.top_k;
  return 2.0 * s * h * ne + 6.0 * s * h *
                                (k * static_cast<double>(expert_ffn_hidden(c)) +
                                 static_cast<double>(shared_ffn_hidden(c)));
}

void add_moe_mlp(std::vector<LayerSpec>& out, const TransformerConfig& c, const std::string& p,
                 double s, double e) {
  const i64 h = c.hidden, ne = c.moe.experts, k = c.moe.top_k;
  const i64 fe = expert_ffn_hidden(c), fsh = shared_ffn_hidden(c);
  const double dh = static_cast<double>(h), de = static_cast<double>(ne);
  const double t = s * static_cast<double>(k);  // routed token copies per sample
  const double dfe = static_cast<double>(fe);
  const std::size_t first = out.size();

  if (fsh > 0) {
    // Shared experts: one SwiGLU MLP of width f_shared over every token (as the dense MLP), on
    // ln_2's output beside the router: first in the list, so that under tensor parallelism the
    // all-gather before shared.fc moves ln_2's output (shard_layer reads the previous layer's).
    const double dfs = static_cast<double>(fsh);
    out.push_back(gemm_layer(p + "mlp.shared.fc", TpRole::kColumn, h * 2 * fsh, 0,
                             2.0 * s * dh * 2.0 * dfs, s * dh, s * 2.0 * dfs, e,
                             GemmShape{1, static_cast<i64>(s), 2 * fsh, h}));
    out.push_back(swiglu_spec(p + "mlp.shared.swiglu", s * dfs, e, TpRole::kSharded));
    out.push_back(gemm_layer(p + "mlp.shared.proj", TpRole::kRow, fsh * h, 0, 2.0 * s * dfs * dh,
                             s * dfs, s * dh, e, GemmShape{1, static_cast<i64>(s), h, fsh}));
    // Megatron's "shared_experts" recompute module (moe_layer.py, shared_experts_recompute).
    for (std::size_t j = out.size() - 3; j < out.size(); ++j)
      out[j].recompute_modules = recompute_module::kSharedExperts;
  }
  // Router: logits = x W_r over the E experts (no bias), a GEMM h -> E on every token. With a
  // score-correction bias (DeepSeek-V3) the router holds E more parameters, counted as parameters
  // as DeepSeek's model.py holds them (transformers registers them as a buffer:
  // docs/transformer.md, "Router").
  const MoeRouter& rt = c.moe.router;
  LayerSpec router = gemm_layer(p + "mlp.router", TpRole::kReplicated, h * ne, 0, 2.0 * s * dh * de,
                                s * dh, s * de, e, GemmShape{1, static_cast<i64>(s), ne, h});
  if (rt.bias) {
    router.params += ne;
    router.second_tensor_params = ne;
  }
  if (fsh > 0) router.activation_bytes_per_sample = 0;  // ln_2's output, saved by shared.fc
  out.push_back(std::move(router));
  out.push_back(route_spec(c, p, s, e));
  // Permutation: each token's k copies gathered into expert order (an argsort of the expert ids
  // and an index_select: 2 kernels), reading and writing e t h; its backward scatters the
  // gradients back (2e t h). The indices are saved by the routing.
  LayerSpec perm = make_layer(p + "mlp.permute", CK::kElementwise, TpRole::kReplicated, 0, 0,
                              2.0 * e * t * dh + 8.0 * t, 0, e * t * dh, 2);
  perm.bwd_bytes_per_sample = 2.0 * e * t * dh + 8.0 * t;
  out.push_back(std::move(perm));
  // The experts as grouped GEMMs (one launch each, Megatron's GroupedMLP / TE's grouped linear):
  // E GEMMs of t / E tokens each under balanced routing. A token uses k of the E experts: the
  // other (E - k) experts' weights are inactive for it.
  // Under expert parallelism the three are split over the ep ranks (ExpertRole; the token
  // dispatch before experts.fc, the combine after experts.proj: core/lowering/expert_parallel.cpp).
  const bool even = static_cast<i64>(t) % ne == 0;
  const i64 per_expert = static_cast<i64>(t) / ne;
  // With expert biases (GPT-OSS's gate_up_proj_bias, down_proj_bias) each expert's matrices carry
  // one: E 2 f_e and E h more parameters, the inactive experts' among them (the bias adds are in
  // the grouped GEMMs' epilogue: no FLOPs of their own here).
  const bool eb = c.moe.expert_bias;
  out.push_back(
      gemm_layer(p + "mlp.experts.fc", TpRole::kColumn, ne * h * 2 * fe + (eb ? ne * 2 * fe : 0),
                 (ne - k) * (h * 2 * fe + (eb ? 2 * fe : 0)), 2.0 * t * dh * 2.0 * dfe, t * dh,
                 t * 2.0 * dfe, e, even ? GemmShape{ne, per_expert, 2 * fe, h} : GemmShape{}));
  if (eb) out.back().second_tensor_params = ne * 2 * fe;
  out.back().expert_role = ExpertRole::kFirst;
  out.push_back(swiglu_spec(p + "mlp.experts.swiglu", t * dfe, e, TpRole::kSharded));
  out.back().expert_role = ExpertRole::kInner;
  // The routing weights are applied in the activation (Megatron-Core experts.py, TEGroupedMLP
  // bias_act_func: weighted_bias_swiglu_impl / act(x) * permuted_probs), which saves the t FP32
  // weights for their gradient (fused_bias_swiglu.py, WeightedSwiGLUFunction.forward,
  // save_for_backward(input, weights); DeepEP takes FP32 probs): 4 t (docs/transformer.md,
  // "Mixture of experts", "Where the routing weights are applied").
  out.back().activation_bytes_per_sample += 4.0 * t;
  // Megatron's "moe_act" recompute module (experts.py, GroupedMLP / TEGroupedMLP
  // activation_recompute: the activation under CheckpointWithoutOutput).
  out.back().recompute_modules = recompute_module::kMoeAct;
  out.push_back(gemm_layer(p + "mlp.experts.proj", TpRole::kRow, ne * fe * h + (eb ? ne * h : 0),
                           (ne - k) * (fe * h + (eb ? h : 0)), 2.0 * t * dfe * dh, t * dfe, t * dh,
                           e, even ? GemmShape{ne, per_expert, h, fe} : GemmShape{}));
  if (eb) out.back().second_tensor_params = ne * h;
  out.back().expert_role = ExpertRole::kLast;
  // Un-permutation: the k expert outputs of each token weighted by its routing weights and summed
  // back in token order (2 FLOPs per copied element), plus the shared experts' output (1 per
  // token element); reads e t h, the weights and the shared output, writes e s h; 2 kernels.
  // It saves nothing: the weights were applied in experts.swiglu, so Megatron-Core's unpermute
  // runs without probs (token_dispatcher.py, every dispatcher's combine: unpermute(...) with no
  // probs=; moe_utils.py, unpermute: a scatter_add over sorted_indices, or TE's fused_unpermute
  // with merging_probs=None), whose backward is a gather by the indices the routing saved
  // (docs/transformer.md, "Where the routing weights are applied").
  const double shared_in = fsh > 0 ? s * dh : 0.0;
  out.push_back(make_layer(p + "mlp.unpermute", CK::kElementwise, TpRole::kReplicated, 0,
                           2.0 * t * dh + shared_in, e * (t * dh + t + shared_in + s * dh), 0,
                           e * s * dh, 2));
  // Megatron's "moe" recompute module: the whole MoE layer, router to combine (moe_layer.py,
  // moe_layer_recompute, tensor_parallel.checkpoint over its forward).
  for (std::size_t j = first; j < out.size(); ++j)
    out[j].recompute_modules |= recompute_module::kMoe;
}

}  // namespace csim::core
