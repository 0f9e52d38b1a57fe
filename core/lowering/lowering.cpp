#include "core/lowering/lowering.hpp"

#include "core/error.hpp"
#include "core/model/flops.hpp"

namespace csim::core {

Program lower(const Scenario& scenario, Progress* progress) {
  Program p;
  switch (scenario.strategy.kind) {
    case StrategyKind::kSingle:
      p = lower_single(scenario, progress);
      break;
    case StrategyKind::kDataParallel:
      p = lower_data_parallel(scenario, progress);
      break;
    case StrategyKind::kDdp:
      p = lower_ddp(scenario, progress);
      break;
    case StrategyKind::kModelParallel:
      p = lower_model_parallel(scenario, progress);
      break;
    case StrategyKind::kPipeline:
      p = lower_pipeline(scenario, progress);
      break;
    case StrategyKind::kTensorParallel:
      p = lower_tensor_parallel(scenario, progress);
      break;
    case StrategyKind::k3d:
      p = lower_3d(scenario, progress);
      break;
    case StrategyKind::kZero:
      p = lower_zero(scenario, progress);
      break;
    case StrategyKind::kFsdp:
      p = lower_fsdp(scenario, progress);
      break;
  }
  // The memory switches (docs/memory.md, "Scenario switches") are lowered by every strategy.
  // MFU / HFU numerators (core/model/flops.hpp).
  p.model_flops_per_step = model_flops_per_step(scenario);
  p.hardware_flops_per_step = hardware_flops_per_step(scenario);
  // The processes' allocator configuration, for the caching-allocator model.
  p.expandable_segments = scenario.training.expandable_segments;
  const std::string problem = validate_program(p);
  CSIM_ASSERT_MSG(problem.empty(), problem.c_str());
  return p;
}

std::vector<std::int64_t> torch_chunk_sizes(std::int64_t batch, int n) {
  std::vector<std::int64_t> sizes;
  if (batch <= 0 || n <= 0) return sizes;
  // torch.chunk: every chunk has ceil(B/n) rows except the last, which gets what is left; a
  // chunk is only made while rows remain, so fewer than n chunks can come out.
  const std::int64_t chunk = (batch + n - 1) / n;
  for (std::int64_t done = 0; done < batch; done += chunk)
    sizes.push_back(std::min(chunk, batch - done));
  return sizes;
}

std::vector<std::vector<int>> assign_buckets(const std::vector<Bytes>& sizes_in_order,
                                             Bytes first_cap_bytes, Bytes cap_bytes) {
  // As torch's compute_bucket_assignment_by_size: add tensors to the open bucket; once the
  // bucket's size reaches the current limit, close it and move to the next limit (the first
  // limit is used once, then the last one repeats).
  std::vector<std::vector<int>> buckets;
  std::vector<int> open;
  Bytes open_bytes = 0;
  for (int i = 0; i < static_cast<int>(sizes_in_order.size()); ++i) {
    open.push_back(i);
    open_bytes += sizes_in_order[i];
    const Bytes limit = buckets.empty() ? first_cap_bytes : cap_bytes;
    if (open_bytes >= limit) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  return buckets;
}

}  // namespace csim::core
