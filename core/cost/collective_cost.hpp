// Collective and copy plans over a Topology (docs/cost-model.md, "Communication").
// A plan is a latency term plus a set of flows; the flow network shares link bandwidth between
// the flows of all transfers in flight (max-min fairness). Uncontended, a ring all-reduce plan
// takes 2(p-1)*alpha + 2(p-1)/p * S / B, the nccl-tests bus-bandwidth model.
#pragma once

#include <vector>

#include "core/hardware/topology.hpp"
#include "core/program/program.hpp"

namespace csim::core {

struct FlowSpec {
  Endpoint src, dst;
  double bytes = 0;                 // bytes this flow carries
  double rate_cap_bytes_per_s = 0;  // 0 = no cap beyond the links (pageable copies cap)
};

struct TransferPlan {
  TimeNs latency_ns = 0;               // fixed part, elapsed before the flows start
  std::vector<FlowSpec> flows;         // bandwidth part; finished when every flow has finished
  NcclProto proto = NcclProto::kAuto;  // the protocol chosen (NCCL collectives)
  // Stages that run after this one, in order, each its latency then its flows (hierarchical
  // all-reduce: this stage is the intra-node reduce-scatter). predicted_ns covers them all.
  std::vector<TransferPlan> then;
  CollectiveAlgo algo = CollectiveAlgo::kAuto;  // the algorithm chosen (collectives); kAuto for
                                                // direct patterns (gather, scatter, all-to-all,
                                                // send/recv) and copies
  // Uncontended prediction of the whole transfer: latency plus the plan's flows alone on the
  // topology, bounded below by the slowest flow on its route and by the most loaded link
  // (docs/cost-model.md, "Communication", "Prediction").
  TimeNs predicted_ns = 0;
};

struct CommParams {
  // Collective launch + setup, independent of p. With the per-hop alphas of LinkParams it gives
  // 6.2 us for a 2-rank 8-byte PCIe all-reduce (nccl_2x4070tis_pcie_latency: 6.21 us).
  double nccl_base_latency_us = 4.0;
  double host_staging_bytes_per_s =
      6e9;  // pageable H2D effective cap (staging through a bounce buffer)
  // NCCL point-to-point (send/recv, all-to-all) runs on fewer channels than collectives and reaches
  // this fraction of the route's bandwidth: 195.1 of 240 GB/s on 8x A100
  // (nccl_a100x8_sendrecv_1GB).
  double p2p_bandwidth_fraction = 0.81;
  // Protocols (docs/cost-model.md, "Protocols"). The fitted latencies above are LL's (NCCL runs
  // small messages in LL); LL128 and Simple add to the base and multiply the per-hop alphas in
  // the ratios of NCCL's own tuning model (src/graph/tuning.cc, ring over NVLink: base LL 3.6,
  // LL128 10.0, Simple 8.4 us; per hop LL 0.6, LL128 1.9, Simple 3.4 us). Bandwidth: LL carries 4
  // data bytes per 8-byte line (0.5), LL128 120 per 128 (0.9375), Simple all of it.
  double ll128_base_extra_us = 6.4, simple_base_extra_us = 4.8;
  double ll128_hop_factor = 1.9 / 0.6, simple_hop_factor = 3.4 / 0.6;
  // A hop between nodes (docs/cost-model.md, "Network hops"): the route alpha (NIC, fabric) times
  // the ratio of NCCL's NET hardware latency for the algorithm and protocol (src/graph/tuning.cc,
  // hwLatencies[NET]: tree LL 5.0, LL128 8.5, Simple 14; ring LL 2.7, LL128 4.0, Simple 14 us) to
  // its tree LL latency, the protocol the NIC alpha was fitted with (nccl_2x8h20_ib_latency: an
  // 8-byte all-reduce, tree/LL).
  struct NetHopFactors {
    double ll, ll128, simple;
  };
  NetHopFactors net_tree{1.0, 8.5 / 5.0, 14.0 / 5.0};
  NetHopFactors net_ring{2.7 / 5.0, 4.0 / 5.0, 14.0 / 5.0};
  double collnet_net_factor = 31.0 / 5.0;  // CollNetDirect, Simple: NET 31 us (tuning.cc)
  double ll_efficiency = 0.5, ll128_efficiency = 120.0 / 128.0;
  // NVLink SHARP (H100/H200 NVSwitch): every GPU sends its buffer up to the switch, which reduces
  // it, and receives the result: S each way per GPU at this fraction of its NVSwitch port's
  // capacity; fitted to 273 GB/s algbw on 8x H100 (nccl_h100_nvls_by_gpucount: busbw 480).
  double nvls_efficiency = 0.758;
  // NVLS setup cost on top of the base latency: NCCL's tuning model charges 25 us of hardware
  // latency for NVLS Simple (src/graph/tuning.cc); not fitted (no small-message NVLS case).
  double nvls_extra_latency_us = 25.0;
  // NVLSTree (docs/cost-model.md, "NVLSTree"): the factor on a network hop's route alpha in its
  // trees, fitted to nccl_2x8h20_ib_latency (2 x 8 H20, NCCL_ALGO=NVLSTree, 8 B: 47.5 us) =
  // base 4 + NVLS 25 + switch alpha 0.7 + 2 x 19.6 us x f: f = 17.8 / 39.2. NCCL's ratio rule
  // ("Network hops": NET NVLSTree Simple 20.9 us / tree LL 5.0 = 4.18) would give 193.6 us.
  double nvlstree_net_factor = 17.8 / 39.2;
  // PAT (docs/cost-model.md, "PAT"), NCCL's tuning model (src/graph/tuning.cc): busBw = 0.75 x
  // the ring graph's channels; latency per step interLat / 3.5 with interLat = NET tree Simple
  // 14 us, i.e. a route alpha times (14 / 3.5) / 5.0 against tree LL's 5.0; plus nRanks x 2.8 us.
  double pat_bandwidth_fraction = 0.75;
  double pat_net_factor = 14.0 / 3.5 / 5.0;
  double pat_per_rank_us = 2.8;
  // NCCL's channels (docs/cost-model.md, "Channels"): the ring graph's channels, how many a
  // collective of a given size runs on, and each protocol's per-channel limit cap the flows of
  // ring, tree and chain plans. false: links only (the pure alpha-beta model).
  bool channel_model = true;
  // Forcing, as NCCL_ALGO / NCCL_PROTO (scenario "nccl"); kAuto: the fastest predicted.
  CollectiveAlgo algo = CollectiveAlgo::kAuto;
  NcclProto proto = NcclProto::kAuto;
};

// CommParams for a scenario: the defaults above with the scenario's "nccl" forcing.
CommParams comm_params_for(const Scenario& s);

// Plan a collective on `gpus` (rank order) moving `bytes` per GPU (nccl-tests "size").
// `a2a_shares`: an all-to-all's traffic matrix when not uniform (CommGroup::a2a_shares; null or
// empty: NCCL's S / p to every member).
TransferPlan plan_collective(const Topology& topo, const CommParams& params, CollectiveKind kind,
                             CollectiveAlgo algo, const std::vector<int>& gpus, int root,
                             double bytes, const std::vector<double>* a2a_shares = nullptr);

// Plan a copy; `src`/`dst` are endpoints; pageable H2D is capped at host_staging_bytes_per_s.
TransferPlan plan_copy(const Topology& topo, const CommParams& params, CopyKind kind, Endpoint src,
                       Endpoint dst, double bytes);

// nccl-tests bus-bandwidth factor: busbw = algbw * factor, algbw = S / t (docs/cost-model.md,
// "Communication"): all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all, gather,
// scatter (p-1)/p; broadcast, reduce, send/recv 1.
double busbw_factor(CollectiveKind kind, int p);

// The bandwidth part of predicted_ns, in seconds, for a plan's flows alone on the topology:
// max(max over flows of bytes / min(route bandwidth, cap), max over links of load / capacity).
double predict_bandwidth_s(const Topology& topo, const std::vector<FlowSpec>& flows);

}  // namespace csim::core
