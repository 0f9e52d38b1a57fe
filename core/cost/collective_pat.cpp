// NCCL's PAT all-gather and reduce-scatter (docs/cost-model.md, "PAT"): log-step exchanges when
// every GPU of the group is on its own node.
#include <algorithm>
#include <set>

#include "core/cost/collective_builder.hpp"
#include "core/error.hpp"

namespace csim::core::detail {

// NCCL 2.2x src/graph/tuning.cc ncclPatEnable: sm_60+ (CUDA atomics), nNodes == nRanks.
bool pat_available(const Topology& topo, const std::vector<int>& gpus) {
  if (gpus.size() < 2 || topo.gpu_spec().compute_capability < 60) return false;
  std::set<int> nodes;
  for (int g : gpus) nodes.insert(topo.node_of(g));
  return nodes.size() == gpus.size();
}

// docs/cost-model.md, "PAT" (src/device/prims_simple.h patReduce / patCopy, tuning.cc): Bruck-like
// steps at distances d = 1, 2, 4, ... < p; at distance d rank i sends min(d, p - d) shares of S/p
// to rank i + d (all-gather; i - d for a reduce-scatter), p - 1 shares in all per rank. NCCL
// pipelines the steps, so all flows run at once. Bandwidth: NCCL's model gives PAT 0.75 of the
// ring graph's channels (pat_bandwidth_fraction): the ring's channel busbw cap times 0.75, on
// every flow. Latency = base + per step the slowest route's alpha x pat_net_factor + p x
// pat_per_rank_us (tuning.cc's linear term). Simple only.
TransferPlan pat_plan(const Topology& topo, const CommParams& params, const std::vector<int>& gpus,
                      double bytes, bool reduce_scatter) {
  const int p = static_cast<int>(gpus.size());
  CSIM_ASSERT(p >= 2);
  const double n = p;
  Builder b{topo, params, {}, 0};
  b.set_protocol(NcclProto::kSimple);
  const double cap = params.pat_bandwidth_fraction *
                     channel_busbw_cap(topo, params, gpus, NcclProto::kSimple, false, bytes);
  const double factor = (n - 1) / n;
  double steps_ns = 0;
  for (int d = 1; d < p; d *= 2) {
    const double share = std::min(d, p - d) * bytes / n;
    double worst = 0;
    for (int i = 0; i < p; ++i) {
      const int src = gpus[i];
      const int dst = gpus[reduce_scatter ? (i - d + p) % p : (i + d) % p];
      worst = std::max(worst, b.alpha(src, dst));
      b.flow(src, dst, share, busbw_flow_cap(share, cap, factor, bytes));
    }
    steps_ns += worst * params.pat_net_factor;
  }
  b.latency_ns = b.base() + steps_ns + n * params.pat_per_rank_us * 1e3;
  b.plan.algo = CollectiveAlgo::kPat;
  return b.finish();
}

}  // namespace csim::core::detail
