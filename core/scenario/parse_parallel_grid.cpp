// The rank grid of a parallel strategy (core/scenario/parse_parallel.hpp): strategy.dp, tp, cp and
// pp — each only where strategy.kind has that dimension, the kind's free dimension filling the GPUs
// — and strategy.rank_order (docs/scenario.md, "strategy: model, pipeline, tensor, 3D, ZeRO,
// FSDP").
#include <algorithm>
#include <set>

#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

// "tp-cp-ep-dp-pp": fastest-varying first (Megatron's RankGenerator; tensor fastest, pipeline
// outermost). Any permutation of the dimensions the strategy uses: tp, dp and pp always, cp when
// strategy.cp > 1; an unused dimension (size 1) may be left out.
std::vector<ParallelDim> parse_rank_order(const ParallelInput& in, const ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const std::string text = o.string("rank_order", "tp-cp-ep-dp-pp");
  const std::string hint =
      "a permutation of tp, cp, ep, dp, pp, fastest-varying first, e.g. "
      "\"tp-cp-ep-dp-pp\" (Megatron's default) or \"tp-cp-pp-dp\" (Llama 3's)";
  std::vector<ParallelDim> order;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t dash = text.find('-', pos);
    const std::string part =
        text.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
    bool known = false;
    for (ParallelDim d : {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kEp, ParallelDim::kDp,
                          ParallelDim::kPp}) {
      if (part != to_string(d)) continue;
      known = true;
      if (std::find(order.begin(), order.end(), d) != order.end())
        ctx.fail(o.at("rank_order"), "'" + text + "' names " + part + " twice", hint);
      order.push_back(d);
    }
    if (!known) ctx.fail(o.at("rank_order"), "'" + part + "' is not tp, cp, ep, dp or pp", hint);
    if (dash == std::string::npos) break;
    pos = dash + 1;
  }
  std::vector<ParallelDim> used{ParallelDim::kTp, ParallelDim::kDp, ParallelDim::kPp};
  if (ps.cp > 1) used.push_back(ParallelDim::kCp);
  for (ParallelDim d : used) {
    if (std::find(order.begin(), order.end(), d) == order.end()) {
      ctx.fail(o.at("rank_order"),
               "'" + text + "' leaves out " + to_string(d) +
                   (d == ParallelDim::kCp ? " (strategy.cp is " + std::to_string(ps.cp) + ")"
                                          : std::string()),
               hint);
    }
  }
  return order;
}

}  // namespace

void validate_rank_grid(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const StrategyKind kind = in.kind;
  const int n = in.gpus;
  const std::string kname = to_string(kind);
  // Dimensions: what the kind allows, then the defaults that fill the device count.
  auto dim = [&](const char* key, bool allowed) -> int {
    if (!o.has(key)) return 0;
    const int d = static_cast<int>(o.integer(key, 1, 1, 1 << 16));
    if (!allowed && d != 1) {
      ctx.fail(o.at(key), std::string("strategy.kind ") + kname + " has no " + key + " dimension",
               "use kind 3d to combine data, tensor and pipeline parallelism");
    }
    return d;
  };
  const bool mp = in.model_parallel();
  const bool fsdp2 = ps.fsdp_version == 2;  // FSDP2 composes with TP and PP (torchtitan)
  int dp = dim("dp", !mp);
  int tp = dim("tp", kind == StrategyKind::k3d || kind == StrategyKind::kTensorParallel || fsdp2);
  int pp = dim("pp", kind == StrategyKind::k3d || kind == StrategyKind::kPipeline || mp || fsdp2);
  // Context parallelism (parse_parallel_context.cpp checks the rest) composes with the strategies
  // that lower through the Emitter's layer loop, except DeepSpeed ZeRO-3 and FSDP1.
  const bool cp_allowed = kind == StrategyKind::k3d || kind == StrategyKind::kPipeline ||
                          kind == StrategyKind::kTensorParallel || kind == StrategyKind::kZero ||
                          fsdp2;
  if (o.has("cp") && !cp_allowed) {
    const int c = static_cast<int>(o.integer("cp", 1, 1, 1 << 16));
    if (c != 1) {
      ctx.fail(o.at("cp"),
               "strategy.kind " + kname +
                   (kind == StrategyKind::kFsdp ? " with fsdp_version 1" : std::string()) +
                   " has no cp dimension",
               "context parallelism composes with kinds 3d, pipeline, tensor_parallel, zero and "
               "fsdp with fsdp_version 2");
    }
  }
  const int cp = dim("cp", cp_allowed);
  ps.cp = std::max(cp, 1);
  auto fill = [&](int& free_dim, int a, int b, const char* key) {
    const int known = std::max(a, 1) * std::max(b, 1) * ps.cp;
    if (free_dim == 0) {
      if (n % known != 0) {
        ctx.fail(o.at(key),
                 std::to_string(n) + " GPUs do not split into " + std::to_string(known) +
                     " groups of the other dimensions",
                 "give strategy.dp, strategy.tp, strategy.cp and strategy.pp with dp * tp * cp * "
                 "pp = GPUs");
      }
      free_dim = n / known;
    }
  };
  switch (kind) {
    case StrategyKind::kModelParallel:
    case StrategyKind::kPipeline:
      fill(pp, dp, tp, "pp");
      break;
    case StrategyKind::kTensorParallel:
      fill(tp, dp, pp, "tp");
      break;
    default:
      fill(dp, tp, pp, "dp");
      break;
  }
  ps.dp = std::max(dp, 1);
  ps.tp = std::max(tp, 1);
  ps.pp = std::max(pp, 1);
  if (ps.dp * ps.tp * ps.cp * ps.pp != n) {
    const bool with_cp = ps.cp > 1;
    ctx.fail(o.at("dp"),
             std::string(with_cp ? "dp * tp * cp * pp = " : "dp * tp * pp = ") +
                 std::to_string(ps.dp) + " * " + std::to_string(ps.tp) + " * " +
                 (with_cp ? std::to_string(ps.cp) + " * " : std::string()) + std::to_string(ps.pp) +
                 " = " + std::to_string(ps.dp * ps.tp * ps.cp * ps.pp) +
                 " but strategy.device_ids has " + std::to_string(n) + " GPUs",
             with_cp ? "make strategy.dp * strategy.tp * strategy.cp * strategy.pp equal the GPUs "
                       "used"
                     : "make strategy.dp * strategy.tp * strategy.pp equal the GPUs used");
  }
  if (o.has("rank_order")) ps.rank_order = parse_rank_order(in, ps);
}

}  // namespace csim::core::parse
