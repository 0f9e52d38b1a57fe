// ZeRO stages 1-3 and FSDP (docs/program.md, "ZeRO and FSDP"; Rajbhandari et al. 2020, "ZeRO:
// Memory Optimizations Toward Training Trillion Parameter Models"; Zhao et al. 2023, "PyTorch
// FSDP"). Stage 1 shards the optimizer state over the data-parallel ranks, stage 2 also the
// gradients (a reduce-scatter per unit replaces the all-reduce), stage 3 also the parameters (an
// all-gather per unit before its forward and again before its backward). FSDP full_shard is stage
// 3, shard_grad_op keeps the gathered parameters from forward to backward (stage 2 at rest). The
// ops are emitted by lower_hybrid (hybrid_3d.cpp).
#include "core/lowering/lowering.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

int optimizer_bytes_per_param(const TrainingSpec& t) {
  // docs/scenario.md, "training.precision": fp32 master copy + Adam's two fp32 moments (8) or
  // SGD momentum (4).
  int k = precision_bytes(t.precision, t.amp_dtype).master;
  if (t.optimizer == OptimizerKind::kAdam) k += 8;
  if (t.optimizer == OptimizerKind::kSgd && t.sgd_momentum > 0) k += 4;
  return k;
}

ModelStateBytes model_state_bytes(std::int64_t params, const TrainingSpec& t, int zero_stage,
                                  int dp) {
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const std::int64_t shard = (params + dp - 1) / dp;  // ceil(Psi / N)
  const Bytes k = optimizer_bytes_per_param(t);
  ModelStateBytes out;
  out.params = (zero_stage >= 3 ? shard : params) * pb.weights;
  out.grads = (zero_stage >= 2 ? shard : params) * pb.grads;
  out.optimizer = (zero_stage >= 1 ? shard : params) * k;
  return out;
}

Program lower_zero(const Scenario& s) {
  const ParallelSpec& ps = s.strategy.parallel;
  return lower_hybrid(
      s, "zero stage " + std::to_string(ps.zero_stage) + " (dp " + std::to_string(ps.dp) + ")");
}

Program lower_fsdp(const Scenario& s) {
  const ParallelSpec& ps = s.strategy.parallel;
  return lower_hybrid(
      s, std::string("fsdp ") + to_string(ps.fsdp) + " (dp " + std::to_string(ps.dp) + ")");
}

}  // namespace csim::core
