// DeepSeek-V3's config.json (core/model/hf_config_deepseek.hpp). Each default is
// DeepseekV3Config's (transformers, src/transformers/models/deepseek_v3/
// configuration_deepseek_v3.py); the modelling follows modeling_deepseek_v3.py and DeepSeek's own
// inference/model.py (DeepSeek-V3 repository).
#include "core/model/hf_config_deepseek.hpp"

#include <cstdint>

namespace csim::core {

int read_deepseek_v3(HfReader& r, TransformerConfig& c, const std::string& arch) {
  using i64 = std::int64_t;
  // Multi-head latent attention (DeepseekV3Attention): q through a rank-q_lora_rank bottleneck
  // (none when q_lora_rank is null), k and v from one rank-kv_lora_rank latent; no q/k/v bias.
  MlaConfig& m = c.mla;
  m.q_lora_rank = r.opt_int("q_lora_rank", 1536, 1, 1 << 20);
  if (r.present("q_lora_rank") && !r.given("q_lora_rank")) m.q_lora_rank = 0;  // null: no q_a
  m.kv_lora_rank = r.opt_int("kv_lora_rank", 512, 1, 1 << 20);
  m.qk_nope_head_dim = r.opt_int("qk_nope_head_dim", 128, 1, 1 << 14);
  m.qk_rope_head_dim = r.opt_int("qk_rope_head_dim", 64, 2, 1 << 14);
  m.v_head_dim = r.opt_int("v_head_dim", 128, 1, 1 << 14);
  if (m.qk_rope_head_dim % 2 != 0)
    r.fail("qk_rope_head_dim", "an odd count: RoPE rotates pairs of dimensions",
           "DeepSeek-V3 gives 64");
  // MLA gives each head its own k and v; head_dim (if given) is the nope + rope width.
  c.kv_heads = 0;
  c.head_dim = 0;
  if (r.boolean("attention_bias", false))
    r.fail("attention_bias", "biases on MLA's projections are not modelled",
           "remove it (DeepSeek-V3 trains without them)");

  // The experts (DeepseekV3MoE): n_routed_experts of moe_intermediate_size, n_shared_experts
  // of the same width every token uses, blocks 0..first_k_dense_replace-1 dense.
  MoeConfig& e = c.moe;
  e.experts = static_cast<int>(r.req_int({"n_routed_experts"}, 2, 1 << 16, arch));
  e.expert_ffn_hidden = r.req_int({"moe_intermediate_size"}, 1, 1 << 22, arch);
  e.shared_experts = static_cast<int>(r.opt_int("n_shared_experts", 1, 0, 1 << 10));
  e.top_k = static_cast<int>(r.opt_int("num_experts_per_tok", 8, 1, e.experts));
  e.first_dense_layers = static_cast<int>(r.opt_int("first_k_dense_replace", 3, 0, 100000));
  if (r.opt_int("moe_layer_freq", 1, 1, 100000) != 1)
    r.fail("moe_layer_freq", "MoE blocks at a stride other than 1 after the dense prefix",
           "DeepSeek-V3 gives 1 (every block past first_k_dense_replace); describe other layouts "
           "with model.transformer.moe");
  // The router (DeepseekV3TopkRouter): sigmoid scores, a score-correction bias the selection adds
  // (topk_method noaux_tc: auxiliary-loss-free balancing), experts chosen within the topk_group
  // best of n_group groups.
  MoeRouter& rt = e.router;
  const std::string score = r.string("scoring_func", "sigmoid");
  if (score != "sigmoid" && score != "softmax")
    r.fail("scoring_func", "'" + score + "' is not a router score modelled",
           "sigmoid (DeepSeek-V3) or softmax");
  rt.score = score == "sigmoid" ? RouterScore::kSigmoid : RouterScore::kSoftmax;
  const std::string method = r.string("topk_method", "noaux_tc");
  rt.bias = method == "noaux_tc";
  rt.groups = static_cast<int>(r.opt_int("n_group", 8, 1, e.experts));
  rt.group_top_k = static_cast<int>(r.opt_int("topk_group", 4, 1, rt.groups));
  if (e.experts % rt.groups != 0)
    r.fail("n_group",
           std::to_string(rt.groups) + " groups do not split the " + std::to_string(e.experts) +
               " experts evenly",
           "a divisor of n_routed_experts (DeepSeek-V3: 8)");
  // Read without a cost effect: the scaling of the routed output, the weights' normalisation
  // and the sequence-wise auxiliary loss's coefficient (its kernels are the routing's).
  for (const char* quiet : {"routed_scaling_factor", "norm_topk_prob", "aux_loss_alpha", "seq_aux",
                            "ep_size", "rope_interleave"})
    r.present(quiet);
  return static_cast<int>(r.opt_int("num_nextn_predict_layers", 0, 0, 64));
}

}  // namespace csim::core
