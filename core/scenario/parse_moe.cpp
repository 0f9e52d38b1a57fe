// model.transformer.moe (core/scenario/parse_transformer.hpp; docs/scenario.md,
// "model.transformer.moe"): the mixture-of-experts keys, and the rules a MoeConfig must follow
// (shared with the Hugging Face import, which fills the same MoeConfig).
#include <string>

#include "core/scenario/parse_transformer.hpp"

namespace csim::core::parse {

namespace {

std::string n(std::int64_t v) {
  return std::to_string(v);
}

}  // namespace

std::optional<TransformerProblem> moe_problem(const TransformerConfig& c) {
  using P = TransformerProblem;
  const MoeConfig& m = c.moe;
  if (!m.any()) return std::nullopt;
  if (m.experts < 2)
    return P{"moe.experts", n(m.experts) + " expert: a mixture needs at least 2",
             "remove moe for a dense model"};
  if (m.top_k < 1 || m.top_k > m.experts)
    return P{"moe.top_k",
             "top_k " + n(m.top_k) + " is not between 1 and experts (" + n(m.experts) + ")",
             "each token goes to top_k of the experts: 1 <= top_k <= experts (Mixtral: 2 of 8)"};
  if (c.mlp != MlpKind::kSwiglu)
    return P{"mlp", "the experts are modelled as SwiGLU MLPs (every MoE model bundled uses them)",
             "set mlp to swiglu"};
  if (m.every_k_layers < 1)
    return P{"moe.every_k_layers", "must be >= 1", "1 makes every block (past the dense ones) MoE"};
  if (m.first_dense_layers < 0 || m.first_dense_layers >= c.layers)
    return P{"moe.first_dense_layers",
             n(m.first_dense_layers) + " dense blocks leave no MoE block of " + n(c.layers),
             "fewer than layers (DeepSeek-V3 keeps 3 of 61 dense)"};
  if (m.shared_experts < 0) return P{"moe.shared_experts", "must be >= 0", "0: no shared expert"};
  return std::nullopt;
}

MoeConfig parse_moe(Ctx& ctx, const nlohmann::json& v, const std::string& path) {
  Obj o(ctx, v, path,
        {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_ffn_hidden",
         "first_dense_layers", "every_k_layers"});
  MoeConfig m;
  m.experts = static_cast<int>(o.req_integer("experts", 2, 1 << 16));
  m.top_k = static_cast<int>(o.req_integer("top_k", 1, 1 << 16));
  m.expert_ffn_hidden = o.integer("expert_ffn_hidden", 0, 1, 1 << 20);
  m.shared_experts = static_cast<int>(o.integer("shared_experts", 0, 0, 1 << 10));
  m.shared_ffn_hidden = o.integer("shared_ffn_hidden", 0, 1, 1 << 22);
  m.first_dense_layers = static_cast<int>(o.integer("first_dense_layers", 0, 0, 100000));
  m.every_k_layers = static_cast<int>(o.integer("every_k_layers", 1, 1, 100000));
  return m;
}

}  // namespace csim::core::parse
