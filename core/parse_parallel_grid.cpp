// The rank grid of a parallel strategy (core/parse_parallel.hpp): strategy.dp, tp and pp — each
// only where strategy.kind has that dimension, the kind's free dimension filling the GPUs — and
// strategy.rank_order (docs/scenario.md, "strategy: model, pipeline, tensor, 3D, ZeRO, FSDP").
#include <algorithm>
#include <set>

#include "core/parse_parallel.hpp"

namespace csim::core::parse {

namespace {

// "tp-dp-pp": fastest-varying first (Megatron's default: tensor fastest, pipeline outermost).
std::vector<ParallelDim> parse_rank_order(const ParallelInput& in) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  const std::string text = o.string("rank_order", "tp-dp-pp");
  std::vector<ParallelDim> order;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t dash = text.find('-', pos);
    const std::string part =
        text.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
    if (part == "tp")
      order.push_back(ParallelDim::kTp);
    else if (part == "dp")
      order.push_back(ParallelDim::kDp);
    else if (part == "pp")
      order.push_back(ParallelDim::kPp);
    else
      ctx.fail(o.at("rank_order"), "'" + part + "' is not tp, dp or pp",
               "e.g. \"tp-dp-pp\" (fastest-varying first)");
    if (dash == std::string::npos) break;
    pos = dash + 1;
  }
  std::set<ParallelDim> seen(order.begin(), order.end());
  if (order.size() != 3 || seen.size() != 3) {
    ctx.fail(o.at("rank_order"), "'" + text + "' must name tp, dp and pp once each",
             "e.g. \"tp-dp-pp\" (Megatron's default: tensor fastest, pipeline outermost)");
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
  auto fill = [&](int& free_dim, int a, int b, const char* key) {
    const int known = std::max(a, 1) * std::max(b, 1);
    if (free_dim == 0) {
      if (n % known != 0) {
        ctx.fail(o.at(key),
                 std::to_string(n) + " GPUs do not split into " + std::to_string(known) +
                     " groups of the other dimensions",
                 "give strategy.dp, strategy.tp and strategy.pp with dp * tp * pp = GPUs");
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
  if (ps.dp * ps.tp * ps.pp != n) {
    ctx.fail(o.at("dp"),
             "dp * tp * pp = " + std::to_string(ps.dp) + " * " + std::to_string(ps.tp) + " * " +
                 std::to_string(ps.pp) + " = " + std::to_string(ps.dp * ps.tp * ps.pp) +
                 " but strategy.device_ids has " + std::to_string(n) + " GPUs",
             "make strategy.dp * strategy.tp * strategy.pp equal the GPUs used");
  }
  if (o.has("rank_order")) ps.rank_order = parse_rank_order(in);
}

}  // namespace csim::core::parse
