// NCCL's NVLSTree all-reduce (docs/cost-model.md, "NVLSTree"): NVLS inside every node, a double
// binary tree per rail across the nodes, pipelined.
#include <algorithm>
#include <cmath>

#include "core/cost/collective_builder.hpp"
#include "core/error.hpp"

namespace csim::core::detail {

// docs/cost-model.md, "NVLSTree" (NCCL 2.2x src/device/all_reduce.h, RunWorkColl<AllReduce,
// NVLS_TREE>; src/graph/tuning.cc): inside every node the switch reduces and multicasts as in the
// NVLS all-reduce (flows GPU i -> GPU i+1 of S at nvls_efficiency); GPU j of every node carries the
// node's share j (S/g) over a double binary tree across the N nodes on its own NIC (its rail),
// S/(2g) up and down every tree edge. The stages are pipelined chunk by chunk: all flows run at
// once. NCCL's per-channel cap (tuning.cc perChMaxNVLSTreeBws, [arch][min(N,3)-1] GB/s) on the
// NVLS graph's g channels (search.cc: one per GPU) caps the busbw; every flow is capped to end
// when the busbw reaches it. Latency = base + NVLS setup + the slowest switch route + the trees'
// slowest leaf round trip, network hops priced at nvlstree_net_factor. Simple only.
TransferPlan nvlstree_plan(const Topology& topo, const CommParams& params,
                           const std::vector<std::vector<int>>& by_node, double bytes) {
  const std::size_t g = by_node.front().size();
  const std::size_t nodes = by_node.size();
  CSIM_ASSERT(g >= 2 && nodes >= 2);
  const double gd = static_cast<double>(g);
  const double ranks = gd * static_cast<double>(nodes);
  Builder b{topo, params, {}, 0};
  b.set_protocol(NcclProto::kSimple);
  // Inside the nodes: the NVLS all-reduce's flows.
  b.efficiency = params.nvls_efficiency;
  double worst_switch = 0;
  for (const std::vector<int>& node : by_node) {
    for (std::size_t i = 0; i < g; ++i) {
      const int a = node[i], c = node[(i + 1) % g];
      worst_switch = std::max(worst_switch, b.alpha(a, c));
      b.flow(a, c, bytes);
    }
  }
  b.efficiency = 1.0;
  // Across the nodes: one double binary tree per local index j, of S/g, its network hops at
  // NCCL's NVLSTree NET ratio (tree_plan prices them with net_tree).
  CommParams tp = params;
  tp.net_tree.simple = params.nvlstree_net_factor;
  Builder tb{topo, tp, {}, 0};
  tb.set_protocol(NcclProto::kSimple);
  double round_trip = 0;
  for (std::size_t j = 0; j < g; ++j) {
    std::vector<int> rail;
    rail.reserve(nodes);
    for (const std::vector<int>& node : by_node) rail.push_back(node[j]);
    const TransferPlan t = tree_plan(topo, tp, NcclProto::kSimple, rail, bytes / gd, 0);
    round_trip = std::max(round_trip, static_cast<double>(t.latency_ns) - tb.base());
    b.plan.flows.insert(b.plan.flows.end(), t.flows.begin(), t.flows.end());
  }
  // docs/cost-model.md, "Channels": the NVLSTree busbw cap, g channels x perChMaxNVLSTreeBw.
  if (params.channel_model) {
    const double cap = gd *
                       nccl_per_ch_nvls_tree_gbps(nccl_arch(topo.gpu_spec().compute_capability),
                                                  static_cast<int>(nodes)) *
                       1e9;
    const double factor = 2 * (ranks - 1) / ranks;
    for (FlowSpec& f : b.plan.flows)
      f.rate_cap_bytes_per_s = busbw_flow_cap(f.bytes, cap, factor, bytes);
  }
  b.latency_ns = params.nccl_base_latency_us * 1e3 + params.nvls_extra_latency_us * 1e3 +
                 worst_switch + round_trip;
  b.plan.algo = CollectiveAlgo::kNvlsTree;
  return b.finish();
}

}  // namespace csim::core::detail
