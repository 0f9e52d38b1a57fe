// Internal to core/cost: the plan builder and ring/tree building blocks shared by
// collective_cost.cpp (one-node algorithms, dispatch) and collective_multinode.cpp (rails,
// hierarchical, CollNet). docs/cost-model.md, "Communication".
#pragma once

#include <vector>

#include "core/cost/collective_cost.hpp"
#include "core/cost/nccl_channels.hpp"
#include "core/units.hpp"

namespace csim::core::detail {

struct Builder {
  const Topology& topo;
  const CommParams& params;
  TransferPlan plan;
  double latency_ns = 0;
  double efficiency = 1.0;  // the protocol's share of a line that is payload
  // Payload rate cap of every flow added (0: none): the channels' limit (docs/cost-model.md,
  // "Channels"); a flow of payload cap C moves at most C / efficiency wire bytes per second.
  double flow_cap_payload = 0;
  // Network hops are priced with NCCL's tree ratios (tree plans) instead of its ring ratios.
  bool tree_hops = false;

  double alpha(int a, int b) const {
    return topo.route_alpha_ns(Endpoint::gpu(a), Endpoint::gpu(b));
  }
  // A flow of `bytes` payload moves bytes / efficiency on the wire (docs/cost-model.md,
  // "Protocols").
  void flow(int a, int b, double bytes, double cap = 0) {
    if (!(bytes > 0)) return;
    if (cap == 0 && flow_cap_payload > 0) cap = flow_cap_payload / efficiency;
    plan.flows.push_back({Endpoint::gpu(a), Endpoint::gpu(b), bytes / efficiency, cap});
  }
  // Latency of a protocol: base + extra, and the hops' alphas times the protocol's factor.
  void set_protocol(NcclProto p) {
    plan.proto = p;
    efficiency = p == NcclProto::kLL      ? params.ll_efficiency
                 : p == NcclProto::kLL128 ? params.ll128_efficiency
                                          : 1.0;
  }
  double base() const {
    const double extra = plan.proto == NcclProto::kLL128    ? params.ll128_base_extra_us
                         : plan.proto == NcclProto::kSimple ? params.simple_base_extra_us
                                                            : 0.0;
    return params.nccl_base_latency_us * 1e3 + extra * 1e3;
  }
  // The protocol's latency of one hop a -> b: the route alpha times the protocol's factor, NCCL's
  // NVLink ratios inside a node and its NET ratios (ring or tree) for a hop between nodes
  // (docs/cost-model.md, "Protocols", "Network hops").
  double hop(int a, int b) const { return alpha(a, b) * hop_factor(a, b); }
  double hop_factor(int a, int b) const {
    const bool net = topo.node_of(a) != topo.node_of(b);
    if (!net)
      return plan.proto == NcclProto::kLL128    ? params.ll128_hop_factor
             : plan.proto == NcclProto::kSimple ? params.simple_hop_factor
                                                : 1.0;
    const CommParams::NetHopFactors& f = tree_hops ? params.net_tree : params.net_ring;
    return plan.proto == NcclProto::kLL128    ? f.ll128
           : plan.proto == NcclProto::kSimple ? f.simple
                                              : f.ll;
  }
  double p2p_cap(int a, int b) const {
    return params.p2p_bandwidth_fraction * topo.route_bandwidth(Endpoint::gpu(a), Endpoint::gpu(b));
  }
  // latency_ns -> TransferPlan: the one place this file turns floating time into ns.
  TransferPlan finish() {
    plan.latency_ns = round_to_ns(latency_ns * 1e-9);
    plan.predicted_ns = round_to_ns(latency_ns * 1e-9 + predict_bandwidth_s(topo, plan.flows));
    return plan;
  }
};

// The busbw cap (payload bytes/s) NCCL's channels put on a ring (tree = false) or tree collective
// of `bytes` over `gpus` with protocol `proto` (docs/cost-model.md, "Channels"); +inf when
// params.channel_model is off.
double channel_busbw_cap(const Topology& topo, const CommParams& params,
                         const std::vector<int>& gpus, NcclProto proto, bool tree, double bytes);

// Rings side by side, each edge carrying factor * bytes, flows capped at `cap_payload` each (0:
// none). Latency = base + factor * the slowest ring's alphas.
TransferPlan parallel_rings(const Topology& topo, const CommParams& params, NcclProto proto,
                            const std::vector<std::vector<int>>& rings, double factor, double bytes,
                            CollectiveAlgo algo, double cap_payload);

// Double binary tree over `order`, each flow capped at `cap_payload` (0: none).
TransferPlan tree_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                       const std::vector<int>& order, double bytes, double cap_payload);

// Rate cap (wire bytes/s) of a flow of `wire_bytes` in a collective of nccl-tests size `bytes`
// and bus-bandwidth factor `factor` so that, alone at the cap, it ends when the collective's
// busbw reaches `busbw_cap` (payload bytes/s): wire_bytes x busbw_cap / (factor x bytes). 0 (no
// cap) for an infinite cap or an empty collective (docs/cost-model.md, "Channels").
double busbw_flow_cap(double wire_bytes, double busbw_cap, double factor, double bytes);

// collective_nvls.cpp -----------------------------------------------------------------------------

// NVLS through one node's switch (docs/cost-model.md, "NVLS", "NVLS all-gather and
// reduce-scatter"), Simple only; the caller checks the gate: flows GPU i -> GPU i+1 of
// `flow_bytes` each at nvls_efficiency (all-reduce: S; all-gather, reduce-scatter: (p-1)/p S).
// Latency = base + NVLS setup + the slowest switch route's alpha.
TransferPlan nvls_ring_plan(const Topology& topo, const CommParams& params,
                            const std::vector<int>& gpus, double flow_bytes);

// collective_nvlstree.cpp -------------------------------------------------------------------------

// NCCL's NVLSTree all-reduce over N >= 2 nodes of g >= 2 GPUs (`by_node`, docs/cost-model.md,
// "NVLSTree"), Simple only; the caller checks the gate.
TransferPlan nvlstree_plan(const Topology& topo, const CommParams& params,
                           const std::vector<std::vector<int>>& by_node, double bytes);

// collective_pat.cpp ------------------------------------------------------------------------------

// True when NCCL would enable PAT for the group (tuning.cc ncclPatEnable): sm_60+, p >= 2 GPUs
// each on its own node (nNodes == nRanks).
bool pat_available(const Topology& topo, const std::vector<int>& gpus);

// NCCL's PAT all-gather / reduce-scatter (docs/cost-model.md, "PAT"), Simple only; the caller
// checks pat_available.
TransferPlan pat_plan(const Topology& topo, const CommParams& params, const std::vector<int>& gpus,
                      double bytes, bool reduce_scatter);

// collective_multinode.cpp ------------------------------------------------------------------------

// The group's GPUs per node, in ring order (nodes contiguous), when it is N >= 2 nodes of the same
// g >= min_per_node GPUs each; empty otherwise.
std::vector<std::vector<int>> node_blocks(const Topology& topo, const std::vector<int>& ring,
                                          std::size_t min_per_node);

// The rings of a ring collective across nodes, one per rail (docs/cost-model.md, "Rails"): ring c
// enters every node at its block's GPU c and leaves it from GPU c-1, so the channels spread over
// min(g, nics) NICs per node. One ring (`ring`) when the group is not N equal node blocks.
std::vector<std::vector<int>> rail_rings(const Topology& topo, const std::vector<int>& ring);

// Hierarchical all-reduce, its three stages pipelined (docs/cost-model.md, "Hierarchical
// all-reduce"); `tree_across`: the inter-node stage is a double binary tree instead of rings.
TransferPlan hierarchical_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                               const std::vector<std::vector<int>>& by_node, double bytes,
                               bool tree_across);

// CollNet all-reduce (docs/cost-model.md, "CollNet"), Simple only.
TransferPlan collnet_plan(const Topology& topo, const CommParams& params,
                          const std::vector<std::vector<int>>& by_node, double bytes);

}  // namespace csim::core::detail
