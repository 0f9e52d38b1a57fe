// Context parallelism's keys (core/scenario/parse_parallel.hpp; docs/scenario.md, "strategy:
// context parallelism"): strategy.cp (read with the grid), cp_comm and cp_a2a. The sequence is
// split into 2 cp chunks (each rank holds chunks i and 2cp - 1 - i, Megatron / Transformer Engine's
// load-balanced layout), so cp needs a sequence divisible by 2 cp, a model with a fused attention
// core (Transformer Engine runs CP inside its FlashAttention / cuDNN attention), and for the
// all-to-all exchanges heads and kv_heads divisible by the ranks they are spread over.
#include "core/model/attention_kernels.hpp"
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

const std::vector<std::string> kCpCommNames = {"p2p", "all_gather", "a2a", "a2a+p2p"};

void check_heads(const ParallelInput& in, const ParallelSpec& ps, int ranks, const char* why) {
  const ModelSpec& m = in.model;
  const int kv = m.transformer.kv_heads > 0 ? m.transformer.kv_heads : m.transformer.heads;
  for (const auto& [key, n] : {std::pair<const char*, int>{"heads", m.transformer.heads},
                               std::pair<const char*, int>{"kv_heads", kv}}) {
    if (n % ranks == 0) continue;
    in.ctx.fail_conflict(
        {in.o.at("cp_comm"), model_key_path(in.ctx, key)},
        std::string("strategy.cp_comm ") + to_string(ps.cp_comm) + " spreads the heads over " +
            why + " = " + std::to_string(ranks) + " ranks, which does not divide " + key + " " +
            std::to_string(n),
        "use cp_comm p2p or all_gather (no head split), or a cp whose product with tp divides "
        "heads and kv_heads");
  }
}

}  // namespace

std::string model_key_path(const Ctx& ctx, const std::string& key) {
  const json* model =
      ctx.doc != nullptr && ctx.doc->contains("model") ? &(*ctx.doc)["model"] : nullptr;
  if (model != nullptr && model->is_object()) {
    if (model->contains("hf_config")) {
      if (key == "seq_len") return "model.seq_len";
      if (key == "moe.routing") return "model.moe_routing";
      if (key == "moe.capacity_factor") return "model.moe_capacity_factor";
      return "model.hf_config";
    }
    if (model->contains("gpt")) return "model.gpt." + key;
  }
  return "model.transformer." + key;
}

void validate_context_parallel(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const ModelSpec& m = in.model;
  ps.cp_comm = static_cast<CpComm>(o.choice("cp_comm", kCpCommNames, 0));
  // At cp 1 the exchange keys are read (a misspelt value is still an error) and change nothing,
  // so a sweep over strategy.cp may keep them.
  if (ps.cp <= 1) {
    ps.cp_a2a = static_cast<int>(o.integer("cp_a2a", 1, 1, 1 << 16));
    return;
  }
  // The attention core the exchange wraps: a fused kernel (core/model/attention_kernels.hpp).
  bool attention = false, fused = false;
  for (const LayerSpec& l : m.layers) {
    if (l.kind != ComputeKind::kAttention) continue;
    attention = true;
    fused = fused || is_fused_attention_core(l);
  }
  if (!attention) {
    ctx.fail(o.at("cp"),
             "context parallelism splits the sequence around attention, and model '" + m.name +
                 "' has no attention layer",
             "remove strategy.cp (use dp or tp for this model)");
  }
  if (!fused) {
    ctx.fail(o.at("cp"),
             "context parallelism runs inside a fused attention kernel (Transformer Engine's "
             "FlashAttention / cuDNN paths); model '" +
                 m.name + "' uses eager attention",
             "use a fused kernel: model.transformer.attention.kernel (model.attention.kernel "
             "with model.hf_config) flash2, flash3 or cudnn");
  }
  const std::int64_t s = m.transformer.seq_len;
  if (s % (2 * ps.cp) != 0) {
    ctx.fail_conflict({o.at("cp"), model_key_path(ctx, "seq_len")},
                      "cp " + std::to_string(ps.cp) +
                          " splits the sequence into 2 cp = " + std::to_string(2 * ps.cp) +
                          " chunks, which do not divide seq_len " + std::to_string(s),
                      "pick a cp with seq_len divisible by 2 cp (each rank holds chunks i and "
                      "2cp-1-i)");
  }
  if (in.kind == StrategyKind::kZero && ps.zero_stage == 3) {
    ctx.fail_conflict({o.at("cp"), o.at("zero_stage")},
                      "context parallelism with DeepSpeed ZeRO-3 is not modelled",
                      "use kind fsdp with fsdp_version 2, or zero_stage 1 or 2");
  }
  ps.cp_a2a = static_cast<int>(o.integer("cp_a2a", 1, 1, ps.cp));
  if (ps.cp_comm == CpComm::kA2a) check_heads(in, ps, ps.cp * ps.tp, "cp x tp");
  if (ps.cp_comm == CpComm::kA2aP2p) {
    if (!o.has("cp_a2a") || ps.cp_a2a <= 1 || ps.cp_a2a >= ps.cp || ps.cp % ps.cp_a2a != 0) {
      ctx.fail(o.has("cp_a2a") ? o.at("cp_a2a") : o.at("cp_comm"),
               "cp_comm a2a+p2p needs strategy.cp_a2a, the size of the all-to-all groups: a "
               "divisor of cp " +
                   std::to_string(ps.cp) + " between 2 and cp / 2",
               "e.g. cp_a2a 2 for an all-to-all over pairs and a ring of cp / 2 (Megatron's "
               "--hierarchical-context-parallel-sizes 2 " +
                   std::to_string(ps.cp / 2) + ")");
    }
    check_heads(in, ps, ps.cp_a2a * ps.tp, "cp_a2a x tp");
  } else if (o.has("cp_a2a")) {
    ctx.fail(o.at("cp_a2a"), "cp_a2a applies to cp_comm a2a+p2p",
             "remove cp_a2a or set cp_comm to \"a2a+p2p\"");
  }
}

}  // namespace csim::core::parse
