// strategy.optimizer_offload (parse_parallel.hpp; docs/scenario.md, "strategy.optimizer_offload"):
// Megatron-Core's --optimizer-cpu-offload with --optimizer-offload-fraction F. Megatron builds its
// HybridDeviceOptimizer (megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py) only inside
// its own optimizer (megatron/core/optimizer/__init__.py), with a CPU Adam for the offloaded part,
// so the key applies where the lowering models Megatron's optimizer
// (core/lowering/framework_states.hpp, megatron_states) and the optimizer is Adam.
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_optimizer_offload(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  if (!o.has("optimizer_offload")) return;
  // Megatron's --optimizer-offload-fraction: the share of the optimizer's parameters the CPU
  // updates, 0..1 (to_num names the path and the range when outside).
  ps.optimizer_offload = o.number("optimizer_offload", 0.0, 0.0, 1.0);
  if (ps.optimizer_offload == 0) return;
  const std::string at = o.at("optimizer_offload");
  const bool megatron_kind = in.kind == StrategyKind::k3d || in.kind == StrategyKind::kPipeline ||
                             in.kind == StrategyKind::kTensorParallel ||
                             (in.kind == StrategyKind::kZero && ps.distributed_optimizer);
  if (!megatron_kind) {
    ctx.fail(at,
             "optimizer_offload is Megatron-Core's --optimizer-cpu-offload: it applies to kinds "
             "3d, pipeline, tensor_parallel, or zero with distributed_optimizer",
             in.kind == StrategyKind::kZero
                 ? "add \"distributed_optimizer\": true (DeepSpeed's offload_optimizer is not "
                   "modelled)"
                 : "use kind 3d");
  }
  if (ps.fsdp2.enabled) {
    ctx.fail_conflict({at, o.at("megatron_fsdp")},
                      "optimizer offload with Megatron-FSDP is not modelled",
                      "remove megatron_fsdp or optimizer_offload");
  }
  if (ps.zero_stage > 1) {
    ctx.fail_conflict({at, o.at("zero_stage")},
                      "Megatron offloads its distributed optimizer's shard (zero_stage 0 or 1), "
                      "zero_stage is " +
                          std::to_string(ps.zero_stage),
                      "use distributed_optimizer true or zero_stage 1");
  }
  if (in.training.optimizer != OptimizerKind::kAdam) {
    ctx.fail(at, "optimizer_offload models Megatron's CPU Adam: training.optimizer is not adam",
             "set training.optimizer to \"adam\" or remove optimizer_offload");
  }
}

}  // namespace csim::core::parse
