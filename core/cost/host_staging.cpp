// Host staging of P2P-disabled hops (docs/cost-model.md, "Host staging").
#include "core/cost/host_staging.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"

namespace csim::core {

double shm_step_wire_bytes(NcclProto proto) {
  // NCCL src/init.cc: DEFAULT_LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS
  // (512) x NCCL_STEPS (8) x 16-byte lines; DEFAULT_LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD
  // (120) x NCCL_LL128_MAX_NTHREADS (640) x NCCL_STEPS x 8 bytes; DEFAULT_BUFFSIZE = 4 MiB. A step
  // is buffer / NCCL_STEPS (src/transport/shm.cc: stepSize = buffSizes[p] / NCCL_STEPS).
  constexpr double kSteps = 8;
  switch (proto) {
    case NcclProto::kLL:
      return 8.0 * 512 * kSteps * 16 / kSteps;  // 64 KiB
    case NcclProto::kLL128:
      return 120.0 * 640 * kSteps * 8 / kSteps;  // 614,400 B
    case NcclProto::kSimple:
    case NcclProto::kAuto:
      return 4194304.0 / kSteps;  // 512 KiB
  }
  return 4194304.0 / kSteps;
}

double staged_hop_fill_s(const Topology& topo, int src_gpu, int dst_gpu, double wire_bytes,
                         NcclProto proto) {
  CSIM_ASSERT(topo.staged(Endpoint::gpu(src_gpu), Endpoint::gpu(dst_gpu)));
  const double chunk = std::min(wire_bytes, shm_step_wire_bytes(proto));
  const double copy_in =
      topo.route_bandwidth(Endpoint::gpu(src_gpu), Endpoint::host(topo.node_of(src_gpu)));
  return chunk > 0 ? chunk / copy_in : 0.0;
}

double staging_pipeline_steps(CollectiveKind kind, CollectiveAlgo algo, int p) {
  const double n = p;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      if (algo == CollectiveAlgo::kTree) return 2 * std::ceil(std::log2(n));
      if (algo == CollectiveAlgo::kNvls) return 0;
      return 2 * (n - 1);
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return n - 1;
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kSendRecv:
      return 1;
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter:
      return 0;
  }
  return 0;
}

namespace {

// One stage: its latency and prediction grow by steps x (staged share) x the largest fill;
// returns the growth.
TimeNs add_to_stage(const Topology& topo, TransferPlan& stage, double steps, NcclProto proto) {
  int staged = 0;
  double fill = 0;
  for (const FlowSpec& f : stage.flows) {
    if (f.src.kind != Endpoint::Kind::kGpu || f.dst.kind != Endpoint::Kind::kGpu) continue;
    if (!topo.staged(f.src, f.dst)) continue;
    ++staged;
    fill = std::max(fill, staged_hop_fill_s(topo, f.src.index, f.dst.index, f.bytes, proto));
  }
  if (staged == 0) return 0;
  const double share = static_cast<double>(staged) / static_cast<double>(stage.flows.size());
  const TimeNs extra = round_to_ns(steps * share * fill);
  stage.latency_ns += extra;
  stage.predicted_ns += extra;
  return extra;
}

}  // namespace

// docs/cost-model.md, "Host staging", "Chunk pipeline".
TransferPlan add_host_staging(const Topology& topo, TransferPlan plan, CollectiveKind kind,
                              const std::vector<int>& gpus) {
  if (topo.p2p() || gpus.size() < 2) return plan;
  const int p = static_cast<int>(gpus.size());
  if (plan.algo == CollectiveAlgo::kHierarchical && plan.then.size() == 2) {
    // Reduce-scatter and all-gather inside the nodes (g GPUs each) around the all-reduce across
    // the N nodes (NIC hops: not staged, so that stage gains nothing).
    std::set<int> nodes;
    for (int g : gpus) nodes.insert(topo.node_of(g));
    const int n_nodes = static_cast<int>(nodes.size());
    const int g = p / n_nodes;
    add_to_stage(topo, plan, g - 1, plan.proto);
    // The first stage's predicted_ns covers every stage (TransferPlan::then).
    plan.predicted_ns += add_to_stage(topo, plan.then[0], 2.0 * (n_nodes - 1), plan.then[0].proto);
    plan.predicted_ns += add_to_stage(topo, plan.then[1], g - 1, plan.then[1].proto);
    return plan;
  }
  add_to_stage(topo, plan, staging_pipeline_steps(kind, plan.algo, p), plan.proto);
  return plan;
}

}  // namespace csim::core
