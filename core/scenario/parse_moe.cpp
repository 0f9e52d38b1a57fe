// model.transformer.moe (core/scenario/parse_transformer.hpp; docs/scenario.md,
// "model.transformer.moe"): the mixture-of-experts keys, and the rules a MoeConfig must follow
// (shared with the Hugging Face import, which fills the same MoeConfig).
#include <string>
#include <vector>

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
  const MoeRouter& r = m.router;
  if (r.groups < 1 || m.experts % r.groups != 0)
    return P{"moe.router.groups",
             n(r.groups) + " groups do not split the " + n(m.experts) + " experts evenly",
             "a divisor of experts (DeepSeek-V3: 8 groups of 32 of its 256)"};
  if (r.group_top_k < 1 || r.group_top_k > r.groups)
    return P{"moe.router.group_top_k",
             n(r.group_top_k) + " is not between 1 and groups (" + n(r.groups) + ")",
             "the groups a token may choose its experts from (DeepSeek-V3: 4 of 8)"};
  if (static_cast<std::int64_t>(r.group_top_k) * (m.experts / r.groups) < m.top_k)
    return P{"moe.router.group_top_k",
             n(r.group_top_k) + " groups of " + n(m.experts / r.groups) +
                 " experts hold fewer than top_k (" + n(m.top_k) + ")",
             "raise group_top_k so that group_top_k x experts / groups >= top_k"};
  return std::nullopt;
}

MoeRouting parse_moe_routing(Ctx& ctx, const nlohmann::json& v, const std::string& path,
                             int experts) {
  const std::vector<std::string> kinds = {"balanced", "zipf", "dirichlet", "histogram"};
  MoeRouting r;
  if (v.is_string()) {  // "balanced" (or a kind whose parameters all default)
    r.kind = static_cast<RoutingKind>(Obj(ctx, empty_object(), path, {}).to_choice(v, path, kinds));
    if (r.kind == RoutingKind::kHistogram)
      ctx.fail(path, "a histogram needs its tokens per expert",
               "{\"kind\": \"histogram\", \"tokens\": [one number per expert]}");
    return r;
  }
  Obj o(ctx, v, path, {"kind", "skew", "concentration", "tokens", "seed"});
  r.kind = static_cast<RoutingKind>(o.choice("kind", kinds, 0));
  r.skew = o.number("skew", 1.0, 0.0, 10.0);
  r.concentration = o.number("concentration", 1.0, 1e-3, 1e6);
  r.seed = static_cast<std::uint64_t>(o.integer("seed", 0, 0, std::int64_t{1} << 53));
  const bool histogram = r.kind == RoutingKind::kHistogram;
  if (histogram != o.has("tokens")) {
    ctx.fail(o.at(histogram ? "kind" : "tokens"),
             histogram ? "a histogram needs its tokens per expert"
                       : "tokens is the histogram's (kind " + kinds[static_cast<int>(r.kind)] + ")",
             histogram ? "add \"tokens\": [one number per expert]"
                       : "set \"kind\": \"histogram\", or remove tokens");
  }
  if (!histogram) return r;
  const json& t = require_array(ctx, o.raw("tokens"), o.at("tokens"), true);
  if (static_cast<int>(t.size()) != experts) {
    ctx.fail(o.at("tokens"),
             std::to_string(t.size()) + " entries for " + std::to_string(experts) + " experts",
             "one entry per routed expert, in expert order");
  }
  double sum = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    r.tokens.push_back(o.to_num(t[i], o.at("tokens") + "[" + std::to_string(i) + "]", 0.0, 1e18));
    sum += r.tokens.back();
  }
  if (!(sum > 0))
    ctx.fail(o.at("tokens"), "every expert has 0 tokens", "give at least one positive entry");
  return r;
}

void parse_moe_capacity(Ctx& ctx, const Obj& o, const std::string& factor_key,
                        const std::string& pad_key, MoeConfig& m) {
  if (o.has(factor_key)) {
    m.capacity_factor = o.number(factor_key, 0.0, -1e9, 1e9);
    if (!(m.capacity_factor > 0))
      ctx.fail(o.at(factor_key),
               "a capacity factor of " + o.raw(factor_key).dump() + " keeps no token",
               "a factor > 0 (1.0: each expert takes its balanced share; Switch Transformer used "
               "1.0 to 1.25), or remove it for dropless routing");
  }
  m.pad_to_capacity = o.boolean(pad_key, false);
  if (m.pad_to_capacity && m.capacity_factor <= 0)
    ctx.fail(o.at(pad_key), "padding to capacity needs a capacity factor",
             "give " + factor_key + " (e.g. 1.0), or remove " + pad_key);
}

MoeRouter parse_moe_router(Ctx& ctx, const nlohmann::json& v, const std::string& path) {
  Obj o(ctx, v, path, {"score", "bias", "groups", "group_top_k"});
  MoeRouter r;
  r.score = static_cast<RouterScore>(o.choice("score", {"softmax", "sigmoid"}, 0));
  r.bias = o.boolean("bias", false);
  r.groups = static_cast<int>(o.integer("groups", 1, 1, 1 << 16));
  r.group_top_k = static_cast<int>(o.integer("group_top_k", r.groups, 1, 1 << 16));
  return r;
}

MoeConfig parse_moe(Ctx& ctx, const nlohmann::json& v, const std::string& path) {
  Obj o(ctx, v, path,
        {"experts", "top_k", "expert_ffn_hidden", "shared_experts", "shared_ffn_hidden",
         "first_dense_layers", "every_k_layers", "expert_bias", "capacity_factor",
         "pad_to_capacity", "router", "routing"});
  MoeConfig m;
  m.experts = static_cast<int>(o.req_integer("experts", 2, 1 << 16));
  m.top_k = static_cast<int>(o.req_integer("top_k", 1, 1 << 16));
  m.expert_ffn_hidden = o.integer("expert_ffn_hidden", 0, 1, 1 << 20);
  m.shared_experts = static_cast<int>(o.integer("shared_experts", 0, 0, 1 << 10));
  m.shared_ffn_hidden = o.integer("shared_ffn_hidden", 0, 1, 1 << 22);
  m.first_dense_layers = static_cast<int>(o.integer("first_dense_layers", 0, 0, 100000));
  m.every_k_layers = static_cast<int>(o.integer("every_k_layers", 1, 1, 100000));
  m.expert_bias = o.boolean("expert_bias", false);
  parse_moe_capacity(ctx, o, "capacity_factor", "pad_to_capacity", m);
  if (o.has("router")) m.router = parse_moe_router(ctx, o.raw("router"), o.at("router"));
  if (o.has("routing"))
    m.routing = parse_moe_routing(ctx, o.raw("routing"), o.at("routing"), m.experts);
  return m;
}

}  // namespace csim::core::parse
