// docs/memory.md, "FSDP1 flat parameters" (fsdp1_flat_param.hpp names the PyTorch sources).
#include "core/lowering/fsdp1_flat_param.hpp"

#include <algorithm>

namespace csim::core {

Fsdp1FlatParam fsdp1_flat_param(std::int64_t numel, int ranks, bool param_mixed_precision) {
  Fsdp1FlatParam f;
  const std::int64_t n = std::max(1, ranks);
  f.numel = numel;
  f.shard = (numel + n - 1) / n;
  f.padded = f.shard * n;
  f.pad_copy = f.padded != numel ? f.padded : 0;
  f.sharded_grad = numel > 0 && n > 1 ? f.shard : 0;
  // post_unshard frees _mp_shard only for sharded strategies; one rank (NO_SHARD-like) computes
  // on it directly and is not all-gathered, which this model does not lower.
  f.mp_shard = param_mixed_precision && numel > 0 && n > 1 ? f.shard : 0;
  return f;
}

ModelStateBytes fsdp1_state_bytes(std::int64_t params, const TrainingSpec& t, int shard_ranks) {
  const PrecisionBytes pb = precision_bytes(t.precision, t.amp_dtype);
  const std::int64_t n = std::max(1, shard_ranks);
  const std::int64_t shard = (params + n - 1) / n;            // S = ceil(Psi / N)
  const Bytes orig = pb.master > 0 ? pb.master : pb.weights;  // O
  ModelStateBytes out;
  out.params = shard * orig;  // _local_shard, the optimizer's fp32 copy under mixed precision
  out.grads = shard * orig;   // _saved_grad_shard / .grad after _cast_grad_to_param_dtype
  out.optimizer = shard * (optimizer_bytes_per_param(t) - pb.master);  // Adam's moments only
  return out;
}

}  // namespace csim::core
