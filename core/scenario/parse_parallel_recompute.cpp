// Activation recompute's keys (core/scenario/parse_parallel.hpp): none, selective, full or
// selective_op (torchtitan's per-op policy), and recompute_every (full: every k-th block,
// torchtitan's selective_ac_option "<k>"); they work on transformer blocks, so recompute needs
// model.gpt. recompute_modules: Megatron-Core's --recompute-modules under selective
// (transformer_config.py, recompute_modules; default core_attn), each module one the model's
// layers are tagged with (core/model/recompute_modules.hpp).
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

// Where a module is missing, why (its layers are not in the model).
const char* absent_reason(int bit) {
  switch (1u << bit) {
    case recompute_module::kMoeAct:
    case recompute_module::kMoe:
      return "the model has no mixture-of-experts block";
    case recompute_module::kSharedExperts:
      return "the model's mixture of experts has no shared experts";
    case recompute_module::kMlaUpProj:
      return "the model has no multi-head latent attention";
    case recompute_module::kMlp:
      return "the model has no dense MLP block";
    default:
      return "the model's blocks have no such layer";
  }
}

void validate_recompute_modules(const ParallelInput& in, ParallelSpec& ps) {
  const Obj& o = in.o;
  // null is the default (the OOM advice's full-recompute candidate sets it so).
  if (!o.has("recompute_modules") || o.raw("recompute_modules").is_null()) return;
  if (ps.recompute != RecomputeMode::kSelective) {
    in.ctx.fail_conflict({o.at("recompute_modules"), o.at("recompute")},
                         "recompute_modules applies to recompute selective (Megatron's "
                         "--recompute-modules with --recompute-granularity selective)",
                         "set recompute \"selective\"");
  }
  std::vector<std::string> names;
  for (int b = 0; b < recompute_module::kCount; ++b) names.push_back(recompute_module::name(b));
  const json& v =
      require_array(in.ctx, o.raw("recompute_modules"), o.at("recompute_modules"), false);
  std::uint8_t tagged = 0;  // the modules the model's layers belong to
  for (const LayerSpec& l : in.model.layers)
    tagged = static_cast<std::uint8_t>(tagged | l.recompute_modules);
  ps.recompute_modules = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string path = o.at("recompute_modules") + "[" + std::to_string(i) + "]";
    const int bit = o.to_choice(v[i], path, names);
    const auto mod = static_cast<std::uint8_t>(1u << bit);
    // core_attn is Megatron's default and a no-op where the core is fused (nothing s^2 saved).
    if (mod != recompute_module::kCoreAttn && (tagged & mod) == 0) {
      in.ctx.fail(path,
                  std::string("recompute module '") + names[static_cast<std::size_t>(bit)] +
                      "' has nothing to recompute: " + absent_reason(bit),
                  "remove it (docs/program.md, \"Recompute modules\")");
    }
    ps.recompute_modules = static_cast<std::uint8_t>(ps.recompute_modules | mod);
  }
}

}  // namespace

void validate_recompute(const ParallelInput& in, ParallelSpec& ps) {
  const Obj& o = in.o;
  ps.recompute = static_cast<RecomputeMode>(
      o.choice("recompute", {"none", "selective", "full", "selective_op"}, 0));
  if (ps.recompute != RecomputeMode::kNone && !in.gpt()) {
    in.ctx.fail(o.at("recompute"),
                "activation recompute works on transformer blocks: it needs model.gpt",
                "use recompute none");
  }
  ps.recompute_every = static_cast<int>(o.integer("recompute_every", 1, 1, 1 << 20));
  if (o.has("recompute_every") && ps.recompute != RecomputeMode::kFull) {
    in.ctx.fail_conflict({o.at("recompute_every"), o.at("recompute")},
                         "recompute_every applies to recompute full",
                         "set recompute \"full\" to checkpoint every k-th block");
  }
  if (ps.recompute == RecomputeMode::kFull && ps.recompute_every > in.model.transformer.layers) {
    in.ctx.fail_conflict({o.at("recompute_every"), "model.gpt.layers"},
                         "recompute_every " + std::to_string(ps.recompute_every) + " exceeds the " +
                             std::to_string(in.model.transformer.layers) +
                             " blocks: no block would be checkpointed",
                         "use recompute none, or k <= layers");
  }
  validate_recompute_modules(in, ps);
}

}  // namespace csim::core::parse
