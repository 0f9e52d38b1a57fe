// NVLS (NVLink SHARP) through one node's switch (docs/cost-model.md, "NVLS", "NVLS all-gather and
// reduce-scatter"): the plan shared by the NVLS all-reduce, all-gather and reduce-scatter.
#include <algorithm>

#include "core/cost/collective_builder.hpp"
#include "core/error.hpp"

namespace csim::core::detail {

// docs/cost-model.md, "NVLS": the NVSwitch reduces; in the all-reduce every GPU sends its S bytes
// up its switch port and receives S down. "NVLS all-gather and reduce-scatter": NCCL 2.2x runs
// both through the switch's multicast (src/device/all_gather.h, reduce_scatter.h,
// NCCL_ALGO_NVLS): an all-gather stores each GPU's share once into the multicast object and the
// switch writes it to every other GPU, so each GPU's down port carries (p-1)/p * S; a
// reduce-scatter reads each GPU's share reduced by the switch, which pulls it from the p-1
// others, so each up port carries (p-1)/p * S. The busy direction moves `flow_bytes` (S, or
// (p-1)/p * S) at nvls_efficiency of the port. Flows: GPU i -> GPU i+1 of `flow_bytes` (one up
// port, one down port each; the flow network has no multicast, so the idle direction is loaded
// as the busy one). Latency = base + the NVLS setup + one switch hop; Simple only (tuning.cc).
TransferPlan nvls_ring_plan(const Topology& topo, const CommParams& params,
                            const std::vector<int>& gpus, double flow_bytes) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(NcclProto::kSimple);
  b.efficiency = params.nvls_efficiency;
  const int p = static_cast<int>(gpus.size());
  CSIM_ASSERT(p >= 2);
  double worst = 0;
  for (int i = 0; i < p; ++i) {
    const int a = gpus[i], c = gpus[(i + 1) % p];
    worst = std::max(worst, b.alpha(a, c));
    b.flow(a, c, flow_bytes);
  }
  b.latency_ns = params.nccl_base_latency_us * 1e3 + params.nvls_extra_latency_us * 1e3 + worst;
  b.plan.algo = CollectiveAlgo::kNvls;
  return b.finish();
}

}  // namespace csim::core::detail
