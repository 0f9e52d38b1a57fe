// What the optimizer step allocates for itself, by the framework that runs it (docs/memory.md,
// "Optimizer step temporaries"), and DeepSpeed ZeRO-3's model-state bytes (docs/memory.md,
// "Model-state bytes by framework").
//
//   PyTorch torch.optim.Adam (kinds single, data_parallel, ddp, model_parallel, fsdp without
//   Megatron-FSDP): the default foreach implementation (torch/optim/adam.py,
//   _multi_tensor_adam) builds exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs), one tensor
//   the size of the second moment for every parameter at once:
//       + n x S bytes during the step, S = the state's element bytes (the updated copy's: the
//         fp32 master where the recipe keeps one, else the weights)
//     and before PyTorch 2.0 (training.pytorch_version) the for-loop's denom =
//     exp_avg_sq.sqrt(), one parameter tensor at a time (torch/optim/_functional.py adam at
//     v1.8.0; transformers.AdamW.step at v4.3.0):
//       + min(n, the largest parameter tensor) x 4 bytes during the step
//   Megatron (3d, pipeline, tensor_parallel, distributed_optimizer, megatron_fsdp): Transformer
//   Engine's / Apex's FusedAdam, one multi-tensor kernel in place: nothing.
//   DeepSpeed ZeRO-3 (kind zero, zero_stage 3): FusedAdam in place, but each optimizer sub-group's
//   gradient partition is converted to fp32 for the step (stage3.py, _prepare_sub_group /
//   fp32_partitioned_groups_flat[i].grad):
//       + min(n, sub_group_size 1e9) x 4 bytes during the step
//   DeepSpeed ZeRO-1/2 (kind zero, zero_stage 1 or 2): per parameter group, the flattened
//   gradient partition converted to fp32 (stage_1_and_2.py, step: `single_grad_partition =
//   flat_grad_partition.to(fp32)`, freed after _optimizer_step(i)); one group assumed:
//       + n x 4 bytes during the step
//   SGD: nothing (foreach momentum updates in place, weight decay not modelled).
// n = the parameters the rank's optimizer updates (its shard where the state is sharded).
#pragma once

#include <cstdint>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// The strategies whose optimizer is torch.optim's: the PyTorch-native kinds and FSDP (FSDP1,
// FSDP2), not Megatron-FSDP (docs/memory.md, "Optimizer step temporaries").
bool runs_torch_optim(const Scenario& s);

struct OptimizerTemporary {
  Bytes bytes = 0;
  const char* name = "";  // the alloc / free op name
};
OptimizerTemporary optimizer_step_temporary(const Scenario& s, std::int64_t params_updated);

// DeepSpeed ZeRO-3 keeps gradients in the model's dtype (stage3.py: the IPG bucket and
// grad_partitions_flat_buffer are allocated with dtype=self.dtype) and reduce-scatters them in it
// (communication_data_type defaults to the model dtype): G = W. bf16 + Adam:
//   params W Psi/N + grads W Psi/N + fp32 master 4 Psi/N + Adam 8 Psi/N = 16 Psi / N
// (the ZeRO paper's 2 + 2 + 12), where Megatron's fp32 main grads make it 18. ZeRO-1/2 likewise
// (framework_states.hpp).
bool deepspeed_zero3(const Scenario& s);
int deepspeed_grad_bytes(const PrecisionBytes& pb);

// Megatron's fp32 copy of fp16 gradients made inside step(): framework_states.hpp
// (ModelStateBytes::step_main_grads).

}  // namespace csim::core
