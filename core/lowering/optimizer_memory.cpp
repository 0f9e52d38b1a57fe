// Optimizer step temporaries and DeepSpeed ZeRO-3's gradient dtype (optimizer_memory.hpp;
// docs/memory.md, "Optimizer step temporaries", "Model-state bytes by framework").
#include "core/lowering/optimizer_memory.hpp"

#include <algorithm>

#include "core/lowering/optimizer_kernels.hpp"

namespace csim::core {

namespace {

// DeepSpeed's stage3_sub_group_size default (deepspeed/runtime/zero/config.py, sub_group_size
// 1e9): the optimizer steps the partition in sub-groups of at most this many elements.
constexpr std::int64_t kDeepSpeedSubGroupNumel = 1'000'000'000;

}  // namespace

// The strategies whose optimizer is torch.optim's (docs/memory.md, "Optimizer step
// temporaries"): the PyTorch-native kinds and FSDP (FSDP1, FSDP2), not Megatron-FSDP.
bool runs_torch_optim(const Scenario& s) {
  switch (s.strategy.kind) {
    case StrategyKind::kSingle:
    case StrategyKind::kDataParallel:
    case StrategyKind::kDdp:
    case StrategyKind::kModelParallel:
      return true;
    case StrategyKind::kFsdp:
      return !s.strategy.parallel.fsdp2.megatron;
    default:
      return false;
  }
}

bool deepspeed_zero3(const Scenario& s) {
  return s.strategy.kind == StrategyKind::kZero && s.strategy.parallel.zero_stage == 3;
}

int deepspeed_grad_bytes(const PrecisionBytes& pb) {
  return pb.weights;
}

OptimizerTemporary optimizer_step_temporary(const Scenario& s, std::int64_t params_updated) {
  // docs/memory.md, "Optimizer step temporaries".
  OptimizerTemporary t;
  if (s.training.optimizer != OptimizerKind::kAdam || params_updated <= 0) return t;
  const PrecisionBytes pb = precision_bytes(s.training.precision, s.training.amp_dtype);
  if (runs_torch_optim(s) && optimizer_runs_for_loop(s.training)) {
    // A for-loop Adam's denom = exp_avg_sq.sqrt(), one tensor at a time: the largest.
    t.bytes = std::min(params_updated, largest_parameter_tensor(s.model)) * 4;
    t.name = "adam for-loop denom";
  } else if (runs_torch_optim(s)) {
    const int state = pb.master > 0 ? pb.master : pb.weights;
    t.bytes = params_updated * state;
    t.name = "adam foreach exp_avg_sq_sqrt";
  } else if (deepspeed_zero3(s)) {
    t.bytes = std::min(params_updated, kDeepSpeedSubGroupNumel) * 4;
    t.name = "zero3 fp32 grad partition";
  } else if (s.strategy.kind == StrategyKind::kZero && !s.strategy.parallel.distributed_optimizer &&
             (s.strategy.parallel.zero_stage == 1 || s.strategy.parallel.zero_stage == 2)) {
    t.bytes = params_updated * 4;
    t.name = "zero fp32 grad partition";
  }
  return t;
}

}  // namespace csim::core
