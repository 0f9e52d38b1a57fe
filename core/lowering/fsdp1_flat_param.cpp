// docs/memory.md, "FSDP1 flat parameters" (fsdp1_flat_param.hpp names the PyTorch sources).
#include "core/lowering/fsdp1_flat_param.hpp"

#include <algorithm>

namespace csim::core {

Fsdp1FlatParam fsdp1_flat_param(std::int64_t numel, int ranks) {
  Fsdp1FlatParam f;
  const std::int64_t n = std::max(1, ranks);
  f.numel = numel;
  f.shard = (numel + n - 1) / n;
  f.padded = f.shard * n;
  f.pad_copy = f.padded != numel ? f.padded : 0;
  f.sharded_grad = numel > 0 && n > 1 ? f.shard : 0;
  return f;
}

}  // namespace csim::core
