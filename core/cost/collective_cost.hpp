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
  TimeNs latency_ns = 0;            // fixed part, elapsed before the flows start
  std::vector<FlowSpec> flows;      // bandwidth part; finished when every flow has finished
  CollectiveAlgo algo = CollectiveAlgo::kAuto;  // the algorithm chosen (collectives)
  // Uncontended prediction of the whole transfer (latency + slowest flow alone on its route).
  TimeNs predicted_ns = 0;
};

struct CommParams {
  double nccl_base_latency_us = 5.0;   // collective launch + setup, independent of p
  double host_staging_bytes_per_s = 6e9;  // pageable H2D effective cap (staging through a bounce buffer)
};

// Plan a collective on `gpus` (rank order) moving `bytes` per GPU (nccl-tests "size").
TransferPlan plan_collective(const Topology& topo, const CommParams& params, CollectiveKind kind,
                             CollectiveAlgo algo, const std::vector<int>& gpus, int root, double bytes);

// Plan a copy; `src`/`dst` are endpoints; pageable H2D is capped at host_staging_bytes_per_s.
TransferPlan plan_copy(const Topology& topo, const CommParams& params, CopyKind kind, Endpoint src,
                       Endpoint dst, double bytes);

}  // namespace csim::core
