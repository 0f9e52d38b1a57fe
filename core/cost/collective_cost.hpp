// Collective and copy plans over a Topology (docs/cost-model.md, "Communication").
// A plan is a latency term plus a set of flows; the flow network shares link bandwidth between
// the flows of all transfers in flight (max-min fairness). Uncontended, a ring all-reduce plan
// takes 2(p-1)*alpha + 2(p-1)/p * S / B, the nccl-tests bus-bandwidth model.
#pragma once

#include <vector>

#include "core/program.hpp"
#include "core/topology.hpp"

namespace csim::core {

struct FlowSpec {
  Endpoint src, dst;
  double bytes = 0;                 // bytes this flow carries
  double rate_cap_bytes_per_s = 0;  // 0 = no cap beyond the links (pageable copies cap)
};

struct TransferPlan {
  TimeNs latency_ns = 0;        // fixed part, elapsed before the flows start
  std::vector<FlowSpec> flows;  // bandwidth part; finished when every flow has finished
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
};

// Plan a collective on `gpus` (rank order) moving `bytes` per GPU (nccl-tests "size").
TransferPlan plan_collective(const Topology& topo, const CommParams& params, CollectiveKind kind,
                             CollectiveAlgo algo, const std::vector<int>& gpus, int root,
                             double bytes);

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
