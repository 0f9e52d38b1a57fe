// FLOPs per step for MFU / HFU: formulas in core/model/flops.hpp and docs/program.md,
// "FLOPs utilisation".
#include "core/model/flops.hpp"
#include "core/model/recompute_modules.hpp"

#include <algorithm>
#include "core/model/transformer_flops.hpp"

namespace csim::core {
namespace {

// Per-sample forward FLOPs of the GEMMs of one block and of the logits (Narayanan et al. 2021,
// appendix): QKV 6sh^2, scores 2s^2h, attention x values 2s^2h, projection 2sh^2, MLP 4shf.
struct GptForward {
  double block = 0;      // one transformer block, per sample
  double logits = 0;     // LM head, per sample
  double attention = 0;  // of which QK^T and AV in one block (what selective recompute redoes)
  double sac_op = 0;     // what selective_op redoes: the attention core, the 2nd and 4th GEMMs
};

GptForward gpt_forward(const TransformerShape& t) {
  const double s = static_cast<double>(t.seq_len), h = static_cast<double>(t.hidden);
  const double f = static_cast<double>(t.ffn_hidden > 0 ? t.ffn_hidden : 4 * t.hidden);
  const double v = static_cast<double>(t.vocab);
  GptForward g;
  g.attention = 4.0 * s * s * h;
  g.block = 8.0 * s * h * h + 4.0 * s * h * f + g.attention;
  g.logits = 2.0 * s * h * v;
  // torchtitan's op policy keeps the outputs of QKV and the MLP's first GEMM; the attention
  // projection (2sh^2), the MLP's second GEMM (2shf) and the eager core run again.
  g.sac_op = g.attention + 2.0 * s * h * h + 2.0 * s * h * f;
  return g;
}

}  // namespace

double model_flops_per_step(const Scenario& s) {
  const double batch = static_cast<double>(s.training.global_batch);
  const TransformerShape& t = s.model.transformer;
  if (s.model.transformer_config.layers > 0) {
    // The general block (docs/transformer.md, "Model FLOPs"): 3 B (sum of blocks + logits).
    const TransformerForwardFlops f = transformer_forward_flops(s.model.transformer_config);
    return 3.0 * batch * (f.blocks + f.logits);
  }
  if (t.layers > 0) {
    // model = 3 B (l * block + logits) = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) for f = 4h.
    const GptForward g = gpt_forward(t);
    return 3.0 * batch * (t.layers * g.block + g.logits);
  }
  double fwd = 0;
  for (const LayerSpec& l : s.model.layers) fwd += l.fwd_flops_per_sample;
  return 3.0 * batch * fwd;  // forward + backward (2x forward)
}

double hardware_flops_per_step(const Scenario& s) {
  const double model = model_flops_per_step(s);
  const TransformerShape& t = s.model.transformer;
  const bool parallel_kind = s.strategy.kind != StrategyKind::kSingle &&
                             s.strategy.kind != StrategyKind::kDataParallel &&
                             s.strategy.kind != StrategyKind::kDdp;
  if (t.layers == 0 || !parallel_kind) return model;
  const double batch = static_cast<double>(s.training.global_batch);
  if (s.model.transformer_config.layers > 0) {
    // docs/transformer.md, "Model FLOPs": selective re-runs Q K^T and A V of an eager core (a
    // fused core saves no s^2 tensor and is not re-run: docs/attention.md, "Selective
    // recompute"), full every block.
    const TransformerForwardFlops f = transformer_forward_flops(s.model.transformer_config);
    // Megatron's other recompute modules re-run their layers' forward (docs/program.md,
    // "Recompute modules").
    if (s.strategy.parallel.recompute == RecomputeMode::kSelective)
      return (s.model.transformer_config.attention_kernel == AttentionKernel::kEager &&
                      (s.strategy.parallel.recompute_modules & recompute_module::kCoreAttn)
                  ? model + batch * f.attention
                  : model) +
             batch *
                 recompute_modules_flops_per_sample(s.model, s.strategy.parallel.recompute_modules);
    if (s.strategy.parallel.recompute == RecomputeMode::kFull) return model + batch * f.blocks;
    return model;
  }
  const GptForward g = gpt_forward(t);
  switch (s.strategy.parallel.recompute) {
    case RecomputeMode::kNone:
      return model;
    case RecomputeMode::kSelective:  // + 4 B s^2 h l with core_attn
      return ((s.strategy.parallel.recompute_modules & recompute_module::kCoreAttn)
                  ? model + batch * t.layers * g.attention
                  : model) +
             batch *
                 recompute_modules_flops_per_sample(s.model, s.strategy.parallel.recompute_modules);
    case RecomputeMode::kFull: {
      // Every k-th block (k = 1: 96 B s l h^2 (1 + s/6h + V/16lh)): floor(l / k) blocks.
      const int every = std::max(1, s.strategy.parallel.recompute_every);
      return model + batch * static_cast<double>(t.layers / every) * g.block;
    }
    case RecomputeMode::kSelectiveOp:
      return model + batch * t.layers * g.sac_op;  // + B l (4 s^2 h + 2 s h^2 + 2 s h f)
  }
  return model;
}

}  // namespace csim::core
