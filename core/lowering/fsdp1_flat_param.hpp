// PyTorch FSDP1's flat parameter, per unit (docs/memory.md, "FSDP1 flat parameters"), after
// torch/distributed/fsdp/_flat_param.py (FlatParamHandle) and _runtime_utils.py (_reduce_grad):
//   shard        = ceil(P / N) elements per rank: FlatParamHandle._get_shard pads the flat
//                  parameter to N x ceil(P / N) (numel_to_pad) and keeps chunk `rank`
//   padded       = N x shard: _full_param_padded, the all-gather destination
//                  (init_flat_param_attributes: padded_unsharded_numel = flat_param.numel() x
//                  world_size), so the gathered buffer and the all-gather carry padded x W bytes
//   pad copy     = padded elements when P % N != 0: _get_reduce_scatter_tensors' F.pad of the
//                  unsharded gradient, a new tensor; none when P divides evenly
//   sharded grad = shard elements: the reduce-scatter's output (new_sharded_grad =
//                  torch.empty_like(chunks[0]))
//   mp shard     = shard elements under parameter mixed precision (MixedPrecision.param_dtype,
//                  the recipes with an fp32 master: bf16, fp16, fp8), else 0: _mp_shard, the
//                  low-precision copy of the local shard that is all-gathered
//                  (_use_low_precision_shard: _alloc_storage(_mp_shard, _local_shard.size())
//                  in pre_unshard; freed in post_unshard, _free_low_precision_sharded_param,
//                  with record_stream on the unshard stream)
// P = the unit's parameters on this rank (after the TP split), N = the ranks it is sharded over.
//
// At rest (fsdp1_state_bytes) the sharded flat parameter _local_shard keeps the parameters'
// original dtype: under mixed precision it is the fp32 copy the optimizer updates, not a
// low-precision copy beside an fp32 master (init_flat_param_attributes allocates only _mp_shard,
// _full_param_padded and _full_prec_full_param_padded besides it, the three freed until used; the
// last is all-gathered only when full precision is forced, summon_full_params, never in a
// training step). The gradient shard is cast back to the flat parameter's dtype after the
// reduce-scatter (_runtime_utils.py, _cast_grad_to_param_dtype: "so that the optimizer step runs
// with that dtype"). With S = ceil(Psi / N) and O = the original dtype's bytes (the recipe's
// master bytes where it keeps one, else its weight bytes):
//   params = S O,  grads = S O,  optimizer = S (K - master)
// bf16 + Adam: 4 + 4 + 8 = 16 Psi / N (model_state_bytes at stage 3: 2 + 4 + 12 = 18 Psi / N).
#pragma once

#include <cstdint>

#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

struct Fsdp1FlatParam {
  std::int64_t numel = 0;         // P
  std::int64_t shard = 0;         // ceil(P / N)
  std::int64_t padded = 0;        // N x shard
  std::int64_t pad_copy = 0;      // padded if P % N != 0, else 0
  std::int64_t sharded_grad = 0;  // shard
  std::int64_t mp_shard = 0;      // shard under parameter mixed precision with N > 1, else 0
};

// `param_mixed_precision`: the recipe keeps an fp32 master (PrecisionBytes::master > 0), which
// FSDP1 runs as MixedPrecision(param_dtype = the weights' dtype) over fp32 parameters.
Fsdp1FlatParam fsdp1_flat_param(std::int64_t numel, int ranks, bool param_mixed_precision = false);

// FSDP1's model state per rank at rest, for `params` parameters sharded over `shard_ranks`.
ModelStateBytes fsdp1_state_bytes(std::int64_t params, const TrainingSpec& t, int shard_ranks);

}  // namespace csim::core
