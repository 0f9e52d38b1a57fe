// Collectives across nodes (docs/cost-model.md, "Rails", "Hierarchical all-reduce", "CollNet"):
// rings spread over the NICs, the pipelined hierarchical all-reduce, in-network reduction.
//
// Index: [SECTION] Node blocks and rails, [SECTION] Hierarchical, [SECTION] CollNet
#include <algorithm>
#include <cmath>

#include "core/cost/collective_builder.hpp"
#include "core/error.hpp"

namespace csim::core::detail {

// [SECTION] Node blocks and rails ----------------------------------------------------------------

std::vector<std::vector<int>> node_blocks(const Topology& topo, const std::vector<int>& ring,
                                          std::size_t min_per_node) {
  std::vector<std::vector<int>> by_node;
  for (int gpu : ring) {
    if (by_node.empty() || topo.node_of(by_node.back().front()) != topo.node_of(gpu)) {
      by_node.push_back({});
    }
    by_node.back().push_back(gpu);
  }
  if (by_node.empty()) return {};
  const std::size_t g = by_node.front().size();
  if (by_node.size() < 2 || g < min_per_node) return {};
  for (const std::vector<int>& n : by_node) {
    if (n.size() != g) return {};
  }
  return by_node;
}

// docs/cost-model.md, "Rails": NCCL's search gives every channel its own NIC where it can (one
// channel per NIC and speed, src/graph/search.cc); a GPU reaches the network through NIC (local
// index mod nics), so ring c leaves each node from block[c-1] and enters the next at block[c].
// Ring c crosses every node boundary on NIC (c-1) out and NIC c in: k = min(g, nics) rings load
// k distinct NICs each way per node.
std::vector<std::vector<int>> rail_rings(const Topology& topo, const std::vector<int>& ring) {
  const std::vector<std::vector<int>> blocks = node_blocks(topo, ring, 1);
  if (blocks.empty()) return {ring};
  const int g = static_cast<int>(blocks.front().size());
  const int k = std::min(g, topo.nics_per_node());
  if (k <= 1) return {ring};
  std::vector<std::vector<int>> out;
  out.reserve(k);
  for (int c = 0; c < k; ++c) {
    std::vector<int> r;
    r.reserve(ring.size());
    for (const std::vector<int>& b : blocks)
      for (int i = 0; i < g; ++i) r.push_back(b[(c + i) % g]);
    out.push_back(std::move(r));
  }
  return out;
}

// [SECTION] Hierarchical -------------------------------------------------------------------------

namespace {

// Appends `from`'s flows to `to`.
void take_flows(TransferPlan& to, const TransferPlan& from) {
  to.flows.insert(to.flows.end(), from.flows.begin(), from.flows.end());
}

}  // namespace

// docs/cost-model.md, "Hierarchical all-reduce": (1) reduce-scatter inside every node, (g-1)/g S
// per ring edge; (2) g all-reduces across the nodes, one per local index j over GPU j of every
// node (its own NIC, i.e. its rail), each of S/g: rings 2(N-1)/N S/g per edge, or a double binary
// tree of S/g; (3) all-gather inside every node, (g-1)/g S. NCCL pipelines such stages chunk by
// chunk over its channels, so all three stages' flows run at once: the bandwidth part is that of
// their union, and the latency is the pipeline's fill: one base plus every stage's hops.
TransferPlan hierarchical_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                               const std::vector<std::vector<int>>& by_node, double bytes,
                               bool tree_across) {
  const std::size_t g = by_node.front().size();
  const double gd = static_cast<double>(g), nd = static_cast<double>(by_node.size());
  std::vector<std::vector<int>> across(g);
  for (std::size_t j = 0; j < g; ++j) {
    for (const std::vector<int>& n : by_node) across[j].push_back(n[j]);
  }
  const double cap_in = channel_busbw_cap(topo, params, by_node.front(), proto, false, bytes);
  const double cap_x =
      channel_busbw_cap(topo, params, across.front(), proto, tree_across, bytes / gd);
  TransferPlan plan = parallel_rings(topo, params, proto, by_node, (gd - 1) / gd, bytes,
                                     CollectiveAlgo::kHierarchical, cap_in);
  const double base = static_cast<double>(plan.latency_ns);
  const TransferPlan ag = plan;  // stage 3: the same rings, the same bytes
  double across_latency = 0;
  if (tree_across) {
    for (const std::vector<int>& order : across) {
      TransferPlan t = tree_plan(topo, params, proto, order, bytes / gd, cap_x / 4);
      across_latency = std::max(across_latency, static_cast<double>(t.latency_ns));
      take_flows(plan, t);
    }
  } else {
    TransferPlan r = parallel_rings(topo, params, proto, across, 2 * (nd - 1) / nd, bytes / gd,
                                    CollectiveAlgo::kHierarchical, cap_x);
    across_latency = static_cast<double>(r.latency_ns);
    take_flows(plan, r);
  }
  take_flows(plan, ag);
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  const double one_base = b.base();
  // Latency: stage 1's (base + its hops), then stages 2 and 3 without their own base.
  b.latency_ns = base + (across_latency - one_base) + (base - one_base);
  b.plan.flows = std::move(plan.flows);
  b.plan.algo = CollectiveAlgo::kHierarchical;
  return b.finish();
}

// [SECTION] CollNet ------------------------------------------------------------------------------

// docs/cost-model.md, "CollNet": NCCL's CollNet with SHARP switches. Inside each node a
// reduce-scatter leaves GPU j with its node's sum of share j (S/g); GPU j sends it up its NIC to
// the switch, which reduces across the nodes and sends the result down every node's NIC j; an
// all-gather inside the node completes it. Expressed as flows GPU j of node n -> GPU j of node
// n+1 of S/g (each loads one NIC up and one NIC down, as the switch reduction does), plus the two
// intra-node stages; pipelined like the hierarchical plan. Latency = base + the intra stages'
// hops + one network crossing; Simple only (tuning.cc disables CollNet's LL and LL128).
TransferPlan collnet_plan(const Topology& topo, const CommParams& params,
                          const std::vector<std::vector<int>>& by_node, double bytes) {
  const NcclProto proto = NcclProto::kSimple;
  const std::size_t g = by_node.front().size();
  const double gd = static_cast<double>(g);
  const std::size_t nodes = by_node.size();
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  double intra_hops = 0;
  if (g > 1) {
    const double cap_in = channel_busbw_cap(topo, params, by_node.front(), proto, false, bytes);
    TransferPlan rs = parallel_rings(topo, params, proto, by_node, (gd - 1) / gd, bytes,
                                     CollectiveAlgo::kCollnet, cap_in);
    intra_hops = static_cast<double>(rs.latency_ns) - b.base();
    take_flows(b.plan, rs);
    take_flows(b.plan, rs);  // stage 3, the all-gather: the same flows
  }
  double crossing = 0;
  for (std::size_t n = 0; n < nodes; ++n) {
    for (std::size_t j = 0; j < g; ++j) {
      const int a = by_node[n][j], c = by_node[(n + 1) % nodes][j];
      crossing = std::max(crossing, b.alpha(a, c));
      b.flow(a, c, bytes / gd);
    }
  }
  // docs/cost-model.md, "Network hops": CollNetDirect's NET latency ratio (tuning.cc: 31 us
  // against tree LL's 5.0).
  b.latency_ns = b.base() + 2 * intra_hops + crossing * params.collnet_net_factor;
  b.plan.algo = CollectiveAlgo::kCollnet;
  return b.finish();
}

}  // namespace csim::core::detail
