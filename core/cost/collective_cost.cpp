// Collective and copy plans (docs/cost-model.md, "Communication").
//
// Index: [SECTION] Helpers, [SECTION] Algorithms, [SECTION] Collectives, [SECTION] Copies
#include "core/cost/collective_cost.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/cost/host_staging.hpp"
#include "core/error.hpp"

namespace csim::core {

// [SECTION] Helpers ------------------------------------------------------------------------------

double busbw_factor(CollectiveKind kind, int p) {
  CSIM_ASSERT(p >= 1);
  const double n = p;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
    case CollectiveKind::kAllToAll:
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter:
      return (n - 1) / n;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
    case CollectiveKind::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

// docs/cost-model.md, "Communication", "Prediction": a lower bound on the plan's bandwidth time
// that is exact when every flow is limited by the same link (rings, chains, trees of equal sizes).
double predict_bandwidth_s(const Topology& topo, const std::vector<FlowSpec>& flows) {
  const std::vector<Link>& links = topo.links();
  std::map<LinkId, double> load;  // ordered: deterministic iteration
  double t = 0;
  for (const FlowSpec& f : flows) {
    if (!(f.bytes > 0)) continue;
    double bw = topo.route_bandwidth(f.src, f.dst);
    if (f.rate_cap_bytes_per_s > 0) bw = std::min(bw, f.rate_cap_bytes_per_s);
    if (std::isfinite(bw)) t = std::max(t, f.bytes / bw);
    for (LinkId l : topo.route(f.src, f.dst)) load[l] += f.bytes;
  }
  for (const auto& [l, bytes] : load) t = std::max(t, bytes / links[l].capacity_bytes_per_s);
  return t;
}

namespace {

struct Builder {
  const Topology& topo;
  const CommParams& params;
  TransferPlan plan;
  double latency_ns = 0;
  double efficiency = 1.0;  // the protocol's share of a line that is payload

  double alpha(int a, int b) const {
    return topo.route_alpha_ns(Endpoint::gpu(a), Endpoint::gpu(b));
  }
  // A flow of `bytes` payload moves bytes / efficiency on the wire (docs/cost-model.md,
  // "Protocols").
  void flow(int a, int b, double bytes, double cap = 0) {
    if (bytes > 0)
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
  double hops(double alpha_ns) const {
    const double f = plan.proto == NcclProto::kLL128    ? params.ll128_hop_factor
                     : plan.proto == NcclProto::kSimple ? params.simple_hop_factor
                                                        : 1.0;
    return alpha_ns * f;
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

double base_ns(const CommParams& p) {
  return p.nccl_base_latency_us * 1e3;
}

// [SECTION] Algorithms ---------------------------------------------------------------------------

// Rings run side by side, each over its own GPUs, each edge carrying factor * bytes: the k rings
// of one ring algorithm (bytes = S/k each), or one stage of the hierarchical all-reduce. Latency =
// base + factor * the slowest ring's alphas.
TransferPlan parallel_rings(const Topology& topo, const CommParams& params, NcclProto proto,
                            const std::vector<std::vector<int>>& rings, double factor, double bytes,
                            CollectiveAlgo algo) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  double worst_alpha = 0;
  for (const std::vector<int>& order : rings) {
    const int p = static_cast<int>(order.size());
    double sum_alpha = 0;
    for (int i = 0; i < p && p > 1; ++i) {
      sum_alpha += b.alpha(order[i], order[(i + 1) % p]);
      b.flow(order[i], order[(i + 1) % p], factor * bytes);
    }
    worst_alpha = std::max(worst_alpha, sum_alpha);
  }
  b.latency_ns = b.base() + factor * b.hops(worst_alpha);
  b.plan.algo = algo;
  return b.finish();
}

// Ring (docs/cost-model.md, "Communication", "Ring"): p flows, one per ring edge, each carrying
// `factor` * S; latency = base + factor * sum of the edges' alphas, i.e. base + factor * p * alpha
// for uniform hops (all-reduce: factor 2(p-1)/p gives 2(p-1) * alpha). With k rings (NCCL channels
// over different NVLinks) each ring carries S/k; they run at once, so the latency is the slowest
// ring's.
TransferPlan ring_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                       const std::vector<std::vector<int>>& rings, double factor, double bytes) {
  return parallel_rings(topo, params, proto, rings, factor,
                        bytes / static_cast<double>(rings.size()), CollectiveAlgo::kRing);
}

// Double binary tree (docs/cost-model.md, "Communication", "Tree"), as NCCL builds it: two binary
// trees over the ring order, the second mirrored so that a rank interior in one is (mostly) a leaf
// in the other; each tree reduces half of the buffer up to its root and broadcasts it back down.
// Flows: every tree edge carries S/2 up and S/2 down. Latency = base + the slowest leaf's
// round trip (sum of alphas up to the root and back), i.e. base + 2 * depth * alpha for uniform
// hops with depth = floor(log2 p) <= ceil(log2 p).
TransferPlan tree_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                       const std::vector<int>& order, double bytes) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  const int p = static_cast<int>(order.size());
  double worst = 0;
  for (int tree = 0; tree < 2; ++tree) {
    auto rank_at = [&](int heap_index) {
      return tree == 0 ? order[heap_index] : order[p - 1 - heap_index];
    };
    std::vector<double> depth_alpha(p, 0);  // round-trip alpha from the root to this heap index
    for (int i = 1; i < p; ++i) {
      const int parent = (i - 1) / 2;
      const int child_gpu = rank_at(i), parent_gpu = rank_at(parent);
      depth_alpha[i] =
          depth_alpha[parent] + b.alpha(child_gpu, parent_gpu) + b.alpha(parent_gpu, child_gpu);
      worst = std::max(worst, depth_alpha[i]);
      b.flow(child_gpu, parent_gpu, bytes / 2);
      b.flow(parent_gpu, child_gpu, bytes / 2);
    }
  }
  b.latency_ns = b.base() + b.hops(worst);
  b.plan.algo = CollectiveAlgo::kTree;
  return b.finish();
}

// Pipelined chain along the ring starting (broadcast) or ending (reduce) at the root
// (docs/cost-model.md, "Communication", "Chain"): p-1 flows of S each; latency = base + sum of the
// chain's alphas = base + (p-1) * alpha for uniform hops. With k rings, one chain per ring, S/k
// each.
TransferPlan chain_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                        const std::vector<std::vector<int>>& rings, int root, bool toward_root,
                        double bytes) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  const double k = static_cast<double>(rings.size());
  double worst_alpha = 0;
  for (const std::vector<int>& ring : rings) {
    const int p = static_cast<int>(ring.size());
    const auto it = std::find(ring.begin(), ring.end(), root);
    CSIM_ASSERT_MSG(it != ring.end(), "the root is not in the group");
    const int r = static_cast<int>(it - ring.begin());
    // Broadcast: root, ring[r+1], ..., ring[r-1]. Reduce: ring[r+1], ..., ring[r-1], root.
    std::vector<int> chain;
    chain.reserve(p);
    for (int i = 0; i < p; ++i) chain.push_back(ring[(r + (toward_root ? 1 : 0) + i) % p]);
    double sum_alpha = 0;
    for (int i = 0; i + 1 < p; ++i) {
      sum_alpha += b.alpha(chain[i], chain[i + 1]);
      b.flow(chain[i], chain[i + 1], bytes / k);
    }
    worst_alpha = std::max(worst_alpha, sum_alpha);
  }
  b.latency_ns = b.base() + b.hops(worst_alpha);
  b.plan.algo = CollectiveAlgo::kRing;
  return b.finish();
}

// NVLink SHARP all-reduce (docs/cost-model.md, "NVLS"): the NVSwitch reduces; every GPU sends its
// S bytes up its switch port and receives S down, at nvls_efficiency of the port. Expressed as
// flows GPU i -> GPU i+1, each loading one up port and one down port with S / efficiency.
// Latency = base + NVLS setup + one switch round trip. Simple protocol only.
TransferPlan nvls_plan(const Topology& topo, const CommParams& params, const std::vector<int>& gpus,
                       double bytes) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(NcclProto::kSimple);
  b.efficiency = params.nvls_efficiency;
  const int p = static_cast<int>(gpus.size());
  double worst = 0;
  for (int i = 0; i < p; ++i) {
    const int a = gpus[i], c = gpus[(i + 1) % p];
    worst = std::max(worst, b.alpha(a, c));
    b.flow(a, c, bytes);
  }
  b.latency_ns = params.nccl_base_latency_us * 1e3 + params.nvls_extra_latency_us * 1e3 + worst;
  b.plan.algo = CollectiveAlgo::kNvls;
  return b.finish();
}

// The group's GPUs per node, in ring order (nodes contiguous), when it is N >= 2 nodes of the same
// g >= 2 GPUs each: the shape the hierarchical all-reduce needs; empty otherwise.
std::vector<std::vector<int>> node_blocks(const Topology& topo, const std::vector<int>& ring) {
  std::vector<std::vector<int>> by_node;
  for (int gpu : ring) {
    if (by_node.empty() || topo.node_of(by_node.back().front()) != topo.node_of(gpu)) {
      by_node.push_back({});
    }
    by_node.back().push_back(gpu);
  }
  const std::size_t g = by_node.front().size();
  if (by_node.size() < 2 || g < 2) return {};
  for (const std::vector<int>& n : by_node) {
    if (n.size() != g) return {};
  }
  return by_node;
}

// Hierarchical all-reduce (docs/cost-model.md, "Hierarchical all-reduce") over `by_node`
// (node_blocks: N nodes with g GPUs each): (1) reduce-scatter inside every node, (g-1)/g S per
// ring edge; (2) g all-reduces across the nodes, one per local index j over GPU j of every node
// (its own NIC), each of S/g: 2(N-1)/N S/g per edge; (3) all-gather inside every node, (g-1)/g S.
// The stages run one after the other; the prediction is the sum of theirs.
TransferPlan hierarchical_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                               const std::vector<std::vector<int>>& by_node, double bytes) {
  const std::size_t g = by_node.front().size();
  const double gd = static_cast<double>(g), nd = static_cast<double>(by_node.size());
  std::vector<std::vector<int>> across(g);
  for (std::size_t j = 0; j < g; ++j) {
    for (const std::vector<int>& n : by_node) across[j].push_back(n[j]);
  }
  TransferPlan rs = parallel_rings(topo, params, proto, by_node, (gd - 1) / gd, bytes,
                                   CollectiveAlgo::kHierarchical);
  TransferPlan ar = parallel_rings(topo, params, proto, across, 2 * (nd - 1) / nd, bytes / gd,
                                   CollectiveAlgo::kHierarchical);
  TransferPlan ag = parallel_rings(topo, params, proto, by_node, (gd - 1) / gd, bytes,
                                   CollectiveAlgo::kHierarchical);
  rs.predicted_ns += ar.predicted_ns + ag.predicted_ns;
  rs.then.push_back(std::move(ar));
  rs.then.push_back(std::move(ag));
  return rs;
}

// NVLS needs Hopper (sm_90+) GPUs on third-generation NVSwitch, all in one node (NVLSTree across
// nodes is not modelled).
bool nvls_available(const Topology& topo, const std::vector<int>& gpus) {
  if (topo.intra_kind() != IntraNodeKind::kNvswitch) return false;
  if (topo.gpu_spec().compute_capability < 90 || gpus.size() < 2) return false;
  for (int g : gpus) {
    if (topo.node_of(g) != topo.node_of(gpus.front())) return false;
  }
  return true;
}

// The protocols to try: the forced one, or all three (Simple first: ties go to it).
std::vector<NcclProto> protocols(const CommParams& params) {
  if (params.proto != NcclProto::kAuto) return {params.proto};
  return {NcclProto::kSimple, NcclProto::kLL128, NcclProto::kLL};
}

// The fastest predicted plan of `make(proto)` over the protocols (first on ties).
template <typename Make>
TransferPlan best_over_protocols(const CommParams& params, const Make& make) {
  TransferPlan best;
  bool any = false;
  for (NcclProto pr : protocols(params)) {
    TransferPlan t = make(pr);
    if (!any || t.predicted_ns < best.predicted_ns) best = std::move(t);
    any = true;
  }
  return best;
}

}  // namespace

// [SECTION] Collectives --------------------------------------------------------------------------

namespace {
TransferPlan plan_collective_on_links(const Topology& topo, const CommParams& params,
                                      CollectiveKind kind, CollectiveAlgo algo,
                                      const std::vector<int>& gpus, int root, double bytes);
}  // namespace

// P2P disabled: the plan over the staged routes, plus the SHM chunk pipeline's fill
// (docs/cost-model.md, "Host staging"; core/cost/host_staging.cpp).
TransferPlan plan_collective(const Topology& topo, const CommParams& params, CollectiveKind kind,
                             CollectiveAlgo algo, const std::vector<int>& gpus, int root,
                             double bytes) {
  TransferPlan plan = plan_collective_on_links(topo, params, kind, algo, gpus, root, bytes);
  return topo.p2p() ? plan : add_host_staging(topo, std::move(plan), kind, gpus);
}

namespace {
TransferPlan plan_collective_on_links(const Topology& topo, const CommParams& params,
                                      CollectiveKind kind, CollectiveAlgo algo,
                                      const std::vector<int>& gpus, int root, double bytes) {
  const int p = static_cast<int>(gpus.size());
  CSIM_ASSERT_MSG(p >= 1, "a collective needs at least one GPU");
  CSIM_ASSERT(bytes >= 0);
  // docs/cost-model.md, "Communication": a single-rank group moves nothing; NCCL still launches.
  if (p == 1) {
    Builder b{topo, params, {}, base_ns(params)};
    b.plan.algo = algo == CollectiveAlgo::kTree && kind == CollectiveKind::kAllReduce
                      ? CollectiveAlgo::kTree
                      : CollectiveAlgo::kRing;
    return b.finish();
  }
  const std::vector<std::vector<int>> rings = topo.rings(gpus);
  const std::vector<int>& ring = rings.front();  // = topo.ring_order(gpus)
  const double n = p;
  switch (kind) {
    case CollectiveKind::kAllReduce: {
      // NCCL picks the algorithm x protocol with the least predicted time (docs/cost-model.md,
      // "Protocols"): tree wins on latency for small messages on many ranks (2 log2 p hops
      // instead of 2(p-1)), ring on bandwidth for large ones, NVLS where the switch can reduce.
      // A forced algorithm (op's, else the scenario's) that cannot run falls back to auto.
      const CollectiveAlgo want = algo != CollectiveAlgo::kAuto ? algo : params.algo;
      const bool nvls = nvls_available(topo, gpus);
      auto ring_of = [&](NcclProto pr) {
        return ring_plan(topo, params, pr, rings, 2 * (n - 1) / n, bytes);
      };
      auto tree_of = [&](NcclProto pr) { return tree_plan(topo, params, pr, ring, bytes); };
      if (want == CollectiveAlgo::kRing) return best_over_protocols(params, ring_of);
      if (want == CollectiveAlgo::kTree) return best_over_protocols(params, tree_of);
      if (want == CollectiveAlgo::kNvls && nvls) return nvls_plan(topo, params, gpus, bytes);
      const std::vector<std::vector<int>> blocks = node_blocks(topo, ring);
      const bool hier = !blocks.empty();
      auto hier_of = [&](NcclProto pr) {
        return hierarchical_plan(topo, params, pr, blocks, bytes);
      };
      if (want == CollectiveAlgo::kHierarchical && hier)
        return best_over_protocols(params, hier_of);
      TransferPlan best = best_over_protocols(params, ring_of);  // ties: ring, then tree
      TransferPlan t = best_over_protocols(params, tree_of);
      if (t.predicted_ns < best.predicted_ns) best = std::move(t);
      if (hier) {
        TransferPlan h = best_over_protocols(params, hier_of);
        if (h.predicted_ns < best.predicted_ns) best = std::move(h);
      }
      if (nvls && (params.proto == NcclProto::kAuto || params.proto == NcclProto::kSimple)) {
        TransferPlan v = nvls_plan(topo, params, gpus, bytes);
        if (v.predicted_ns < best.predicted_ns) best = std::move(v);
      }
      return best;
    }
    // NCCL implements these with rings only; a forced kTree falls back to the ring.
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather:
      return best_over_protocols(params, [&](NcclProto pr) {
        return ring_plan(topo, params, pr, rings, (n - 1) / n, bytes);
      });
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return best_over_protocols(params, [&](NcclProto pr) {
        return chain_plan(topo, params, pr, rings, root, kind == CollectiveKind::kReduce, bytes);
      });
    case CollectiveKind::kGather:
    case CollectiveKind::kScatter: {
      // torch.cuda.comm.gather / scatter: one copy per non-root rank of its S/p share, all in
      // flight together; latency = the slowest route's alpha (no NCCL launch).
      CSIM_ASSERT_MSG(std::find(gpus.begin(), gpus.end(), root) != gpus.end(),
                      "the root is not in the group");
      Builder b{topo, params, {}, 0};
      double worst = 0;
      for (int g : gpus) {
        if (g == root) continue;
        const int src = kind == CollectiveKind::kGather ? g : root;
        const int dst = kind == CollectiveKind::kGather ? root : g;
        worst = std::max(worst, b.alpha(src, dst));
        b.flow(src, dst, bytes / n);
      }
      b.latency_ns = worst;
      return b.finish();
    }
    case CollectiveKind::kAllToAll: {
      // Every rank sends S/p to every other rank at once over NCCL point-to-point channels.
      Builder b{topo, params, {}, 0};
      double worst = 0;
      for (int a : gpus)
        for (int c : gpus) {
          if (a == c) continue;
          worst = std::max(worst, b.alpha(a, c));
          b.flow(a, c, bytes / n, b.p2p_cap(a, c));
        }
      b.latency_ns = base_ns(params) + worst;
      return b.finish();
    }
    case CollectiveKind::kSendRecv: {
      // Two ranks: gpus[0] sends S to gpus[1]. More: rank i sends S to rank i+1 (mod p), the
      // nccl-tests sendrecv_perf pattern. Point-to-point channels cap the rate.
      Builder b{topo, params, {}, 0};
      double worst = 0;
      const int pairs = p == 2 ? 1 : p;
      for (int i = 0; i < pairs; ++i) {
        const int a = gpus[i], c = gpus[(i + 1) % p];
        worst = std::max(worst, b.alpha(a, c));
        b.flow(a, c, bytes, b.p2p_cap(a, c));
      }
      b.latency_ns = base_ns(params) + worst;
      return b.finish();
    }
  }
  CSIM_ASSERT_MSG(false, "unknown collective kind");
  return {};
}
}  // namespace

CommParams comm_params_for(const Scenario& s) {
  CommParams c;
  c.algo = s.nccl.algo;
  c.proto = s.nccl.proto;
  return c;
}

// [SECTION] Copies -------------------------------------------------------------------------------

// docs/cost-model.md, "Communication", "Copies".
TransferPlan plan_copy(const Topology& topo, const CommParams& params, CopyKind kind, Endpoint src,
                       Endpoint dst, double bytes) {
  CSIM_ASSERT(bytes >= 0);
  Builder b{topo, params, {}, 0};
  const bool same_gpu = src.kind == Endpoint::Kind::kGpu && dst.kind == Endpoint::Kind::kGpu &&
                        src.index == dst.index;
  if (kind == CopyKind::kD2D || (kind == CopyKind::kPeer && same_gpu)) {
    // On one GPU: the copy engine / copy kernel reads and writes device memory, so it moves at
    // half the achieved memory bandwidth; a private rate cap on an empty route.
    CSIM_ASSERT_MSG(same_gpu, "a D2D copy stays on one GPU");
    const GpuSpec& g = topo.gpu_spec();
    const double rate = g.mem_bw_bytes_per_s * g.mem_bw_efficiency / 2;
    CSIM_ASSERT_MSG(rate > 0, "GPU without memory bandwidth");
    if (bytes > 0) b.plan.flows.push_back({src, dst, bytes, rate});
    b.latency_ns = static_cast<double>(g.kernel_overhead_ns);
    return b.finish();
  }
  switch (kind) {
    case CopyKind::kH2DPinned:
    case CopyKind::kH2DPageable:
      CSIM_ASSERT_MSG(src.kind == Endpoint::Kind::kHost && dst.kind == Endpoint::Kind::kGpu,
                      "H2D copies go from host memory to a GPU");
      break;
    case CopyKind::kD2H:
      CSIM_ASSERT_MSG(src.kind == Endpoint::Kind::kGpu && dst.kind == Endpoint::Kind::kHost,
                      "D2H copies go from a GPU to host memory");
      break;
    case CopyKind::kPeer:
      CSIM_ASSERT_MSG(src.kind == Endpoint::Kind::kGpu && dst.kind == Endpoint::Kind::kGpu,
                      "peer copies go between GPUs");
      break;
    case CopyKind::kD2D:
      break;
  }
  // Pinned copies DMA at the route's rate; pageable ones are staged by the driver through a pinned
  // bounce buffer and run at most at host_staging_bytes_per_s.
  const double cap = kind == CopyKind::kH2DPageable ? params.host_staging_bytes_per_s : 0.0;
  if (bytes > 0) b.plan.flows.push_back({src, dst, bytes, cap});
  b.latency_ns = topo.route_alpha_ns(src, dst);
  return b.finish();
}

}  // namespace csim::core
