// training.fp8 (docs/scenario.md, "training.fp8"; docs/fp8.md, "Support matrix").
#include "core/scenario/parse_fp8.hpp"

#include "core/model/fp8_recipe.hpp"

namespace csim::core::parse {

Fp8Spec parse_fp8(Ctx& ctx, const Obj& o, Precision p, const GpuSpec& gpu) {
  Fp8Spec f;
  if (p != Precision::kFp8) {
    if (o.has("fp8")) ctx.warn(o.at("fp8"), std::string("ignored: precision is ") + to_string(p));
    return f;
  }
  // The path blamed for a recipe the GPU cannot run: the recipe when given, else the precision
  // (the default recipe, delayed, was chosen by it).
  std::string recipe_path = o.at("precision");
  if (o.has("fp8")) {
    Obj x(ctx, o.raw("fp8"), o.at("fp8"),
          {"recipe", "lm_head", "attention", "fp8_all_gather", "amax_history_len", "moe_dispatch",
           "moe_act_input"});
    const std::vector<std::string> keys(kFp8RecipeKeys, kFp8RecipeKeys + kNumFp8Recipes);
    f.recipe = static_cast<Fp8Recipe>(x.choice("recipe", keys, 0));
    f.lm_head = x.boolean("lm_head", false);
    f.attention = x.boolean("attention", false);
    f.fp8_all_gather = x.boolean("fp8_all_gather", false);
    // docs/fp8.md, "MoE in FP8".
    f.moe_dispatch = x.boolean("moe_dispatch", false);
    f.moe_act_input = x.boolean("moe_act_input", false);
    f.amax_history_len =
        static_cast<int>(x.integer("amax_history_len", f.amax_history_len, 1, 1 << 20));
    if (x.has("amax_history_len") && f.recipe != Fp8Recipe::kDelayed) {
      ctx.warn(x.at("amax_history_len"), std::string("ignored: recipe ") +
                                             fp8_traits(f.recipe).key +
                                             " keeps no amax history (delayed scaling does)");
    }
    if (x.has("recipe")) recipe_path = x.at("recipe");
  }
  // Transformer Engine's support matrix (docs/fp8.md, "Support matrix"): the GPU, the recipe and
  // the compute capability it needs, in one line.
  const std::string refusal = fp8_recipe_refusal(f.recipe, gpu);
  if (!refusal.empty()) {
    ctx.fail(recipe_path, refusal,
             "use precision bf16, or a recipe and GPU of docs/fp8.md, \"Support matrix\"");
  }
  if (f.attention) {
    const std::string no_attn = fp8_attention_refusal(gpu);
    if (!no_attn.empty())
      ctx.fail(o.at("fp8") + ".attention", no_attn, "set attention to false (bf16 attention)");
  }
  // FP8 tensor cores: an inline GPU of a recent compute capability still needs its FP8 peak.
  if (!(gpu.peak_fp8_flops_per_s > 0)) {
    ctx.fail(o.at("precision"),
             "fp8 is not supported by " + gpu.name + " (no fp8 peak in its figures)",
             "set cluster.gpu.peak_fp8_tflops (dense), or use precision bf16");
  }
  return f;
}

namespace {

// docs/fp8.md, "MoE in FP8": DeepEP's FP8 dispatch takes per-token 1x128 scales (the block
// recipe's activation tiles); the other dispatchers move bf16 (Megatron-Core's fused_a2a.py).
void validate_fp8_moe_dispatch(Ctx& ctx, const Scenario& sc) {
  if (sc.training.fp8.recipe != Fp8Recipe::kBlock) {
    ctx.fail("training.fp8.moe_dispatch",
             std::string("FP8 dispatch quantises tokens in 1x128 tiles; recipe ") +
                 fp8_traits(sc.training.fp8.recipe).key + " has none",
             "use recipe block, or set moe_dispatch to false");
  }
  // Under another dispatcher (or without expert parallelism) it is ignored with a warning, so
  // that a sweep or an override of strategy.moe_dispatcher still runs.
  const StrategySpec& s = sc.strategy;
  if (!is_parallel_kind(s.kind) || s.parallel.ep <= 1 ||
      s.parallel.moe_dispatcher != MoeDispatcher::kDeepEp) {
    ctx.warn("training.fp8.moe_dispatch",
             "ignored: FP8 dispatch is DeepEP's (expert parallelism with strategy.moe_dispatcher "
             "deepep); the exchanges move bf16");
  }
}

}  // namespace

void validate_fp8_scenario(Ctx& ctx, const Scenario& sc) {
  const TrainingSpec& t = sc.training;
  if (t.precision != Precision::kFp8) return;
  bool any = false;
  for (const LayerSpec& l : sc.model.layers) any = any || runs_in_fp8(l, t);
  if (!any) {
    ctx.warn("training.precision",
             "fp8: no layer runs in FP8 (FP8 GEMMs are the linear layers of transformer blocks, "
             "model.gpt): every kernel runs in bf16");
  }
  if (t.fp8.moe_dispatch) validate_fp8_moe_dispatch(ctx, sc);
  if (t.fp8.fp8_all_gather) {
    const StrategySpec& s = sc.strategy;
    const bool sharded_params =
        s.kind == StrategyKind::kFsdp || (is_parallel_kind(s.kind) && s.parallel.zero_stage == 3);
    if (!sharded_params) {
      ctx.fail("training.fp8.fp8_all_gather",
               std::string("needs sharded parameters to all-gather; strategy ") +
                   to_string(s.kind) + " keeps whole parameters on every rank",
               "use strategy fsdp (or zero with zero_stage 3), or set fp8_all_gather to false");
    }
  }
}

}  // namespace csim::core::parse
