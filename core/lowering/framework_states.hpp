// What each training framework holds for a rank's model states (parameters, gradients, optimizer
// state), and when it allocates them (docs/memory.md, "Model-state bytes by framework"). One
// place for the lowering (Emitter::model_states, hybrid_emitter.cpp) and tune's memory bound
// (sweep/tune.cpp, memory_bound).
//
// Per parameter updated by the rank (Psi its parameters after the TP split, N = dp, a shard
// ceil(Psi / N)), W / G = the recipe's weight / gradient bytes (precision_bytes), Adam:
//
//   Megatron-LM (kinds 3d, pipeline, tensor_parallel; distributed_optimizer), Megatron-LM
//   commit d98e8a64dd:
//     params     W Psi, at construction (the module's weights; with the distributed optimizer
//                views of ParamAndGradBuffer.param_data)
//     grads      G Psi, at construction and kept: ParamAndGradBuffer.grad_data =
//                torch.zeros(numel, dtype=grad_dtype) (megatron/core/distributed/
//                param_and_grad_buffer.py, _ParamAndGradBuffer.__init__), zeroed by
//                zero_grad_buffer() each step, never freed; grad_dtype = fp32 when
//                accumulate_allreduce_grads_in_fp32 (arguments.py: forced on for bf16, off for
//                fp16), else the param dtype: bf16 G = 4, fp16 G = 2
//     master     4 Psi (4 Psi / N distributed), at construction: Float16OptimizerWithFloat16Params
//                .__init__ `main_param = param.detach().clone().float()` (optimizer.py),
//                DistributedOptimizer._build_model_and_main_param_groups
//                `shard_main_param = shard_model_param.clone().float()` (distrib_optimizer.py)
//     Adam       8 Psi (8 Psi / N), at the first step() (TE / Apex FusedAdam's lazy state;
//                init_state_fn only runs when loading a checkpoint)
//     fp16 only  4 Psi (4 Psi / N): `main_param.grad = model_param.main_grad.float()`
//                (_copy_model_grads_to_main_grads, run by step() -> prepare_grads) makes an fp32
//                copy of the fp16 gradients every step; optimizer.zero_grad(set_to_none=True) at
//                the start of the next train_step (megatron/training/training.py) drops it. Not at
//                rest: absent from every forward and backward. (With fp32 main_grad, bf16,
//                `.float()` returns the same tensor: nothing.)
//     => at rest bf16 2 + 4 + 12 = 18 (6 + 12/N), fp16 2 + 2 + 12 = 16 (4 + 12/N), plus the fp16
//        main-grad copy inside step(): the 20 (4 + 16/N) of Megatron's dist_optimizer.md table
//        is the step()'s peak, not the forward / backward one.
//   DeepSpeed ZeRO (kind zero without distributed_optimizer), DeepSpeed commit edaa72212:
//     grads in the model dtype, G = W at every stage (stage_1_and_2.py: grads_in_partition and the
//     IPG buckets with dtype=self.dtype; stage3.py likewise; engine.py picks this optimizer for
//     bf16 unless data_types.grad_accum_dtype is fp32 with stage 1), so Rajbhandari et al.'s
//     2 + 2 + 12 = 16 per stage's sharding; the fp32 partition (`single_partition_of_fp32_groups`,
//     stage3 `_create_fp32_partitions`) at construction, Adam lazily; the fp32 copy of the
//     gradient partition inside step() is optimizer_step_temporary's (optimizer_memory.hpp)
//   FSDP1 / FSDP2: the sharded fp32 parameters are the master copy (fsdp1_state_bytes,
//     fsdp2_state_bytes): nothing at construction but the shard, Adam lazily
// Other layouts of the hybrid kinds (3d / pipeline / tensor_parallel with zero_stage >= 2, which
// Megatron does not offer): model_state_bytes, PyTorch's timing.
#pragma once

#include <cstdint>

#include "core/lowering/parallel_plan.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

// Megatron's model states (kinds 3d, pipeline, tensor_parallel, or the distributed optimizer;
// not Megatron-FSDP, which the FSDP2 lowering models).
bool megatron_states(const Scenario& s);
// DeepSpeed ZeRO (kind zero without Megatron's distributed optimizer).
bool deepspeed_states(const Scenario& s);
// The strategy with the spellings the lowering cannot tell apart made one (tune's duplicates,
// docs/sweep.md "Duplicates"): `distributed_optimizer` without Megatron-FSDP is read only
// through megatron_states and the zero_stage 1 the parser gives it, so where the kind alone
// makes the states Megatron's (3d, pipeline, tensor_parallel) the flag is cleared. Two
// strategies equal after it lower to the same Program.
StrategySpec strategy_as_lowered(const Scenario& s);
// Bytes per gradient element as the framework keeps and reduces it: W for DeepSpeed, else G.
int framework_grad_bytes(const Scenario& s);

// The rank's model states for `params` parameters under `plan` (sharding_plan of the scenario),
// ZeRO's shards taken over `shard_over` ranks (0: dp x cp, the dense layers'; a mixture of experts'
// routed experts under expert parallelism: the expert-data-parallel ranks, docs/memory.md).
ModelStateBytes rank_model_states(const Scenario& s, const ShardingPlan& plan, std::int64_t params,
                                  int shard_over = 0);
// a + b, field by field (the dense and the expert states of one rank).
ModelStateBytes operator+(const ModelStateBytes& a, const ModelStateBytes& b);

}  // namespace csim::core
