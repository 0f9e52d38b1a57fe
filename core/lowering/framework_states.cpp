// Model states by framework (framework_states.hpp, which cites the sources; docs/memory.md,
// "Model-state bytes by framework").
#include "core/lowering/framework_states.hpp"

#include <algorithm>

#include "core/lowering/fsdp1_flat_param.hpp"
#include "core/lowering/optimizer_offload.hpp"

namespace csim::core {

bool megatron_states(const Scenario& s) {
  const StrategyKind k = s.strategy.kind;
  const ParallelSpec& ps = s.strategy.parallel;
  if (ps.fsdp2.enabled) return false;
  return k == StrategyKind::k3d || k == StrategyKind::kPipeline ||
         k == StrategyKind::kTensorParallel || ps.distributed_optimizer;
}

StrategySpec strategy_as_lowered(const Scenario& s) {
  StrategySpec st = s.strategy;
  const StrategyKind k = st.kind;
  const bool megatron_kind =
      k == StrategyKind::k3d || k == StrategyKind::kPipeline || k == StrategyKind::kTensorParallel;
  if (megatron_kind && !st.parallel.fsdp2.enabled) st.parallel.distributed_optimizer = false;
  return st;
}

bool deepspeed_states(const Scenario& s) {
  return s.strategy.kind == StrategyKind::kZero && !megatron_states(s);
}

int framework_grad_bytes(const Scenario& s) {
  const PrecisionBytes pb = precision_bytes(s.training.precision, s.training.amp_dtype);
  return deepspeed_states(s) ? pb.weights : pb.grads;
}

ModelStateBytes operator+(const ModelStateBytes& a, const ModelStateBytes& b) {
  ModelStateBytes m = a;
  m.params += b.params;
  m.grads += b.grads;
  m.optimizer += b.optimizer;
  m.optimizer_at_setup += b.optimizer_at_setup;
  m.grads_at_setup = a.grads_at_setup || b.grads_at_setup;
  m.step_main_grads += b.step_main_grads;
  m.offloaded_params += b.offloaded_params;
  m.host_bytes += b.host_bytes;
  return m;
}

ModelStateBytes rank_model_states(const Scenario& s, const ShardingPlan& plan, std::int64_t params,
                                  int shard_over) {
  const TrainingSpec& t = s.training;
  const ParallelSpec& ps = s.strategy.parallel;
  // FSDP2 with expert parallelism: the routed experts sharded over edp (`shard_over`, torchtitan's
  // efsdp mesh), the rest over the shard group.
  if (ps.fsdp2.enabled)
    return fsdp2_state_bytes(params, t, shard_over > 0 ? shard_over : plan.shard_ranks,
                             ps.fsdp2.megatron);
  if (s.strategy.kind == StrategyKind::kFsdp && ps.fsdp_version == 1)
    return fsdp1_state_bytes(params, t, plan.shard_ranks);
  const int n = shard_over > 0 ? shard_over : ps.dp_cp();
  ModelStateBytes m = model_state_bytes(params, t, plan.state_stage, n);
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const std::int64_t shard = (params + n - 1) / n;  // ceil(Psi / N)
  // The parameters the optimizer updates: its shard from stage 1 on.
  const std::int64_t updated = plan.state_stage >= 1 ? shard : params;
  if (deepspeed_states(s)) {
    // Gradients in the model dtype (G = W) at every stage; the fp32 partition built with the
    // optimizer, Adam's moments at the first step().
    m.grads = (plan.state_stage >= 2 ? shard : params) * pb.weights;
    m.optimizer_at_setup = updated * pb.master;
    return m;
  }
  if (megatron_states(s) && plan.state_stage <= 1) {
    // The grad buffer and the fp32 main parameters exist from construction; Adam's moments from
    // the first step(); fp16's fp32 copy of the gradients only inside each step().
    m.grads_at_setup = true;
    m.optimizer_at_setup = updated * pb.master;
    if (pb.master > 0 && pb.grads < 4) m.step_main_grads = updated * 4;
  }
  if (megatron_states(s) && ps.optimizer_offload > 0) {
    // Megatron's HybridDeviceOptimizer (optimizer_offload.hpp; docs/program.md, "Optimizer
    // offload"): the offloaded parameters' fp32 master copy and Adam moments, K = 12 bytes each,
    // are pinned host tensors, built with the optimizer; their fp32 gradient goes to the host
    // instead of being copied inside step() on the GPU.
    const std::int64_t off = offloaded_params(s, updated);
    m.optimizer -= off * optimizer_bytes_per_param(t);
    m.optimizer_at_setup = std::max<Bytes>(0, m.optimizer_at_setup - off * pb.master);
    if (m.step_main_grads > 0) m.step_main_grads -= off * 4;
    m.offloaded_params = off;
    m.host_bytes = offload_host_bytes(s, updated);
  }
  return m;
}

}  // namespace csim::core
