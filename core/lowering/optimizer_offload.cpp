// Optimizer-state offload (optimizer_offload.hpp, which cites the sources; docs/program.md,
// "Optimizer offload").
#include "core/lowering/optimizer_offload.hpp"

#include <algorithm>
#include <cmath>

#include "core/lowering/optimizer_kernels.hpp"
#include "core/lowering/parallel_plan.hpp"

namespace csim::core {

std::int64_t offloaded_params(const Scenario& s, std::int64_t updated) {
  const double f = s.strategy.parallel.optimizer_offload;
  if (f <= 0 || updated <= 0) return 0;
  if (f >= 1) return updated;
  return std::min(updated, static_cast<std::int64_t>(std::ceil(f * static_cast<double>(updated))));
}

OffloadStep offload_step(const Scenario& s, std::int64_t updated) {
  OffloadStep o;
  o.params = offloaded_params(s, updated);
  if (o.params == 0) return o;
  const PrecisionBytes pb = precision_bytes(s.training.precision, s.training.amp_dtype);
  // The CPU gradient copy is fp32 (the fp32 CPU parameter's dtype); the H2D lands in the model's
  // parameter dtype (optimizer_offload.hpp).
  o.d2h_bytes = o.params * 4;
  o.h2d_bytes = o.params * pb.weights;
  // The rank's share of the node's cores: one training process per GPU.
  const double cores =
      std::max(1.0, static_cast<double>(s.host.cpu_cores) / std::max(1, s.cluster.gpus_per_node));
  o.host_adam_s = static_cast<double>(o.params) / (kHostAdamParamsPerCoreS * cores);
  o.chunks = static_cast<int>(
      std::min<std::int64_t>(kMaxOffloadChunks, parameter_tensors_of_share(s.model, o.params)));
  return o;
}

Bytes offload_host_bytes(const Scenario& s, std::int64_t updated) {
  return offloaded_params(s, updated) * (optimizer_bytes_per_param(s.training) + 4);
}

}  // namespace csim::core
