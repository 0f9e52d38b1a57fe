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
// P = the unit's parameters on this rank (after the TP split), N = the ranks it is sharded over.
#pragma once

#include <cstdint>

namespace csim::core {

struct Fsdp1FlatParam {
  std::int64_t numel = 0;         // P
  std::int64_t shard = 0;         // ceil(P / N)
  std::int64_t padded = 0;        // N x shard
  std::int64_t pad_copy = 0;      // padded if P % N != 0, else 0
  std::int64_t sharded_grad = 0;  // shard
};

Fsdp1FlatParam fsdp1_flat_param(std::int64_t numel, int ranks);

}  // namespace csim::core
