// Collective and copy plans (docs/cost-model.md, "Communication").
//
// Index: [SECTION] Helpers (and the shared builders of collective_builder.hpp),
//        [SECTION] Algorithms, [SECTION] Collectives, [SECTION] Copies
#include "core/cost/collective_cost.hpp"

#include "core/cost/collective_builder.hpp"

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

namespace detail {

// docs/cost-model.md, "Channels": NCCL's ring graph for the group, the channels a collective of
// `bytes` runs on, and the protocol's per-channel limit on them.
double channel_busbw_cap(const Topology& topo, const CommParams& params,
                         const std::vector<int>& gpus, NcclProto proto, bool tree, double bytes) {
  if (!params.channel_model || gpus.size() < 2) return std::numeric_limits<double>::infinity();
  const NcclRingGraph g = nccl_ring_graph(topo, gpus);
  const int p = static_cast<int>(gpus.size());
  const int c =
      nccl_channels_for(g, tree ? CollectiveAlgo::kTree : CollectiveAlgo::kRing, proto, p, bytes);
  return nccl_busbw_cap(g, nccl_arch(topo.gpu_spec().compute_capability), proto, tree, c);
}

// docs/cost-model.md, "Channels": a busbw cap B over a collective of size S and factor f is
// reached when the collective takes f S / B; a flow of w wire bytes then moves at w B / (f S).
double busbw_flow_cap(double wire_bytes, double busbw_cap, double factor, double bytes) {
  if (!std::isfinite(busbw_cap) || !(busbw_cap > 0) || !(factor * bytes > 0)) return 0;
  return wire_bytes * busbw_cap / (factor * bytes);
}

// Rings run side by side, each over its own GPUs, each edge carrying factor * bytes: the k rings
// of one ring algorithm (bytes = S/k each), or one stage of the hierarchical all-reduce. Latency =
// base + factor * the slowest ring's alphas.
TransferPlan parallel_rings(const Topology& topo, const CommParams& params, NcclProto proto,
                            const std::vector<std::vector<int>>& rings, double factor, double bytes,
                            CollectiveAlgo algo, double cap_payload) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  b.flow_cap_payload = std::isfinite(cap_payload) ? cap_payload : 0;
  double worst_hops = 0;
  for (const std::vector<int>& order : rings) {
    const int p = static_cast<int>(order.size());
    double sum_hops = 0;
    for (int i = 0; i < p && p > 1; ++i) {
      sum_hops += b.hop(order[i], order[(i + 1) % p]);
      b.flow(order[i], order[(i + 1) % p], factor * bytes);
    }
    worst_hops = std::max(worst_hops, sum_hops);
  }
  b.latency_ns = b.base() + factor * worst_hops;
  b.plan.algo = algo;
  return b.finish();
}

// Double binary tree (docs/cost-model.md, "Communication", "Tree"), as NCCL builds it: two binary
// trees over the ring order, the second mirrored so that a rank interior in one is (mostly) a leaf
// in the other; each tree reduces half of the buffer up to its root and broadcasts it back down.
// Flows: every tree edge carries S/2 up and S/2 down. Latency = base + the slowest leaf's
// round trip (sum of alphas up to the root and back), i.e. base + 2 * depth * alpha for uniform
// hops with depth = floor(log2 p) <= ceil(log2 p).
TransferPlan tree_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                       const std::vector<int>& order, double bytes, double cap_payload) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  b.tree_hops = true;
  b.flow_cap_payload = std::isfinite(cap_payload) ? cap_payload : 0;
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
          depth_alpha[parent] + b.hop(child_gpu, parent_gpu) + b.hop(parent_gpu, child_gpu);
      worst = std::max(worst, depth_alpha[i]);
      b.flow(child_gpu, parent_gpu, bytes / 2);
      b.flow(parent_gpu, child_gpu, bytes / 2);
    }
  }
  b.latency_ns = b.base() + worst;
  b.plan.algo = CollectiveAlgo::kTree;
  return b.finish();
}

}  // namespace detail

namespace {

using detail::Builder;
using detail::channel_busbw_cap;

double base_ns(const CommParams& p) {
  return p.nccl_base_latency_us * 1e3;
}

// [SECTION] Algorithms ---------------------------------------------------------------------------

// Ring (docs/cost-model.md, "Communication", "Ring"): p flows, one per ring edge, each carrying
// `factor` * S; latency = base + factor * sum of the edges' alphas, i.e. base + factor * p * alpha
// for uniform hops (all-reduce: factor 2(p-1)/p gives 2(p-1) * alpha). With k rings (NCCL channels
// over different NVLinks, or over the rails across nodes) each ring carries S/k; they run at once,
// so the latency is the slowest ring's. The channels' busbw cap is shared by the k rings
// (docs/cost-model.md, "Channels").
TransferPlan ring_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                       const std::vector<std::vector<int>>& rings, double factor, double bytes,
                       const std::vector<int>& gpus) {
  const double k = static_cast<double>(rings.size());
  const double cap = channel_busbw_cap(topo, params, gpus, proto, false, bytes) / k;
  return detail::parallel_rings(topo, params, proto, rings, factor, bytes / k,
                                CollectiveAlgo::kRing, cap);
}

// Tree: every rank's busiest link carries four tree flows of S/2 (two children up, its parent's
// down in one tree, its parent's in the other), so each flow gets a quarter of the channels' cap.
TransferPlan tree_of(const Topology& topo, const CommParams& params, NcclProto proto,
                     const std::vector<int>& order, double bytes) {
  const double cap = channel_busbw_cap(topo, params, order, proto, true, bytes) / 4;
  return detail::tree_plan(topo, params, proto, order, bytes, cap);
}

// Pipelined chain along the ring starting (broadcast) or ending (reduce) at the root
// (docs/cost-model.md, "Communication", "Chain"): p-1 flows of S each; latency = base + sum of the
// chain's alphas = base + (p-1) * alpha for uniform hops. With k rings, one chain per ring, S/k
// each, capped by the ring channels as a ring is.
TransferPlan chain_plan(const Topology& topo, const CommParams& params, NcclProto proto,
                        const std::vector<std::vector<int>>& rings, int root, bool toward_root,
                        double bytes, const std::vector<int>& gpus) {
  Builder b{topo, params, {}, 0};
  b.set_protocol(proto);
  const double k = static_cast<double>(rings.size());
  const double cap = channel_busbw_cap(topo, params, gpus, proto, false, bytes) / k;
  b.flow_cap_payload = std::isfinite(cap) ? cap : 0;
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
    double sum_hops = 0;
    for (int i = 0; i + 1 < p; ++i) {
      sum_hops += b.hop(chain[i], chain[i + 1]);
      b.flow(chain[i], chain[i + 1], bytes / k);
    }
    worst_alpha = std::max(worst_alpha, sum_hops);
  }
  b.latency_ns = b.base() + worst_alpha;
  b.plan.algo = CollectiveAlgo::kRing;
  return b.finish();
}

// Algorithm gates (docs/cost-model.md, "Algorithm gates"; NCCL 2.2x src/graph/search.cc skips the
// NVLS graph without NVSwitch or below sm_90, src/graph/tuning.cc disables NVLS across nodes
// unless CollNet is enabled). Here NVLS runs inside one node only; across nodes with SHARP
// switches the CollNet plan stands for NVLS + CollNet.
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

// The faster of two plans (the first on ties).
void keep_faster(TransferPlan& best, TransferPlan t) {
  if (t.predicted_ns < best.predicted_ns) best = std::move(t);
}

// All-reduce (docs/cost-model.md, "Communication", "Algorithm choice"): NCCL picks the algorithm x
// protocol with the least predicted time: tree wins on latency for small messages on many ranks,
// ring on bandwidth for large ones, NVLS where the switch can reduce, CollNet where the IB
// switches can; the hierarchical plan is one more candidate across nodes. A forced algorithm (the
// op's, else the scenario's) that cannot run here falls back to the automatic choice (the
// scenario parser rejects a forced one the gates forbid, docs/scenario.md "nccl").
TransferPlan all_reduce_plan(const Topology& topo, const CommParams& params, CollectiveAlgo algo,
                             const std::vector<int>& gpus,
                             const std::vector<std::vector<int>>& rings, double bytes) {
  const double n = static_cast<double>(gpus.size());
  const std::vector<int> ring = topo.ring_order(gpus);
  const CollectiveAlgo want = algo != CollectiveAlgo::kAuto ? algo : params.algo;
  const bool nvls = nvls_available(topo, gpus);
  const std::vector<std::vector<int>> blocks = detail::node_blocks(topo, ring, 2);
  const std::vector<std::vector<int>> blocks1 = detail::node_blocks(topo, ring, 1);
  const bool hier = !blocks.empty();
  const bool collnet = topo.fabric().sharp && !blocks1.empty();
  // NVLSTree (docs/cost-model.md, "NVLSTree"): NVLS inside every node (the NVLS graph's gate), N
  // >= 2 nodes of g >= 2 GPUs; tuning.cc disables it on one node.
  const bool nvlstree = hier && topo.intra_kind() == IntraNodeKind::kNvswitch &&
                        topo.gpu_spec().compute_capability >= 90;
  const bool simple_ok = params.proto == NcclProto::kAuto || params.proto == NcclProto::kSimple;
  auto ring_f = [&](NcclProto pr) {
    return ring_plan(topo, params, pr, rings, 2 * (n - 1) / n, bytes, gpus);
  };
  auto tree_f = [&](NcclProto pr) { return tree_of(topo, params, pr, ring, bytes); };
  auto hier_f = [&](NcclProto pr) {
    TransferPlan h = detail::hierarchical_plan(topo, params, pr, blocks, bytes, false);
    keep_faster(h, detail::hierarchical_plan(topo, params, pr, blocks, bytes, true));
    return h;
  };
  if (want == CollectiveAlgo::kRing) return best_over_protocols(params, ring_f);
  if (want == CollectiveAlgo::kTree) return best_over_protocols(params, tree_f);
  if (want == CollectiveAlgo::kNvls && nvls)
    return detail::nvls_ring_plan(topo, params, gpus, bytes);
  if ((want == CollectiveAlgo::kCollnet || want == CollectiveAlgo::kNvls) && collnet)
    return detail::collnet_plan(topo, params, blocks1, bytes);
  if (want == CollectiveAlgo::kHierarchical && hier) return best_over_protocols(params, hier_f);
  if (want == CollectiveAlgo::kNvlsTree && nvlstree)
    return detail::nvlstree_plan(topo, params, blocks, bytes);
  // NCCL's own choice (docs/cost-model.md, "Hierarchical all-reduce"): NCCL's algorithms are Tree,
  // Ring, CollNet, NVLS, NVLSTree and PAT (src/include/device.h). Its Tree across nodes is a chain
  // inside every node and a double binary tree across the nodes per channel, the channels spread
  // over the NICs: the bytes per NVLink port and per NIC of the hierarchical plan with trees
  // across, which stands for it. The plan with rings across (2(N-1)/N · S/g per NIC, below the
  // ring's 2(p-1)/p · S/g) is no algorithm of NCCL's: only nccl.algo = hierarchical runs it.
  // Ties: ring, tree, hierarchical, NVLS, CollNet, NVLSTree.
  auto tree_across_f = [&](NcclProto pr) {
    return detail::hierarchical_plan(topo, params, pr, blocks, bytes, true);
  };
  TransferPlan best = best_over_protocols(params, ring_f);
  keep_faster(best, best_over_protocols(params, tree_f));
  if (hier) keep_faster(best, best_over_protocols(params, tree_across_f));
  if (nvls && simple_ok) keep_faster(best, detail::nvls_ring_plan(topo, params, gpus, bytes));
  if (collnet && simple_ok) keep_faster(best, detail::collnet_plan(topo, params, blocks1, bytes));
  if (nvlstree && simple_ok) keep_faster(best, detail::nvlstree_plan(topo, params, blocks, bytes));
  return best;
}

}  // namespace

// [SECTION] Collectives --------------------------------------------------------------------------

namespace {
TransferPlan plan_collective_on_links(const Topology& topo, const CommParams& params,
                                      CollectiveKind kind, CollectiveAlgo algo,
                                      const std::vector<int>& gpus, int root, double bytes,
                                      const std::vector<double>* a2a_shares);
}  // namespace

// P2P disabled: the plan over the staged routes, plus the SHM chunk pipeline's fill
// (docs/cost-model.md, "Host staging"; core/cost/host_staging.cpp).
TransferPlan plan_collective(const Topology& topo, const CommParams& params, CollectiveKind kind,
                             CollectiveAlgo algo, const std::vector<int>& gpus, int root,
                             double bytes, const std::vector<double>* a2a_shares) {
  TransferPlan plan =
      plan_collective_on_links(topo, params, kind, algo, gpus, root, bytes, a2a_shares);
  return topo.p2p() ? plan : add_host_staging(topo, std::move(plan), kind, gpus);
}

namespace {
TransferPlan plan_collective_on_links(const Topology& topo, const CommParams& params,
                                      CollectiveKind kind, CollectiveAlgo algo,
                                      const std::vector<int>& gpus, int root, double bytes,
                                      const std::vector<double>* a2a_shares) {
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
  // One node: Topology::rings (NVLink-mesh channels); across nodes: one ring per rail.
  std::vector<std::vector<int>> rings = topo.rings(gpus);
  if (rings.size() == 1) rings = detail::rail_rings(topo, rings.front());
  const double n = p;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return all_reduce_plan(topo, params, algo, gpus, rings, bytes);
    // Rings, NVLS inside one Hopper NVSwitch node (docs/cost-model.md, "NVLS all-gather and
    // reduce-scatter"), or PAT when every GPU is on its own node ("PAT"). A forced algorithm
    // these cannot run (tree, hierarchical, ...) falls back to the automatic choice.
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllGather: {
      const CollectiveAlgo want = algo != CollectiveAlgo::kAuto ? algo : params.algo;
      const bool nvls = nvls_available(topo, gpus);
      const bool pat = detail::pat_available(topo, gpus);
      const bool rs = kind == CollectiveKind::kReduceScatter;
      const bool simple_ok = params.proto == NcclProto::kAuto || params.proto == NcclProto::kSimple;
      if (want == CollectiveAlgo::kNvls && nvls)
        return detail::nvls_ring_plan(topo, params, gpus, (n - 1) / n * bytes);
      if (want == CollectiveAlgo::kPat && pat)
        return detail::pat_plan(topo, params, gpus, bytes, rs);
      TransferPlan best = best_over_protocols(params, [&](NcclProto pr) {
        return ring_plan(topo, params, pr, rings, (n - 1) / n, bytes, gpus);
      });
      if (want == CollectiveAlgo::kRing) return best;
      if (nvls && simple_ok)
        keep_faster(best, detail::nvls_ring_plan(topo, params, gpus, (n - 1) / n * bytes));
      if (pat && simple_ok) keep_faster(best, detail::pat_plan(topo, params, gpus, bytes, rs));
      return best;
    }
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kReduce:
      return best_over_protocols(params, [&](NcclProto pr) {
        return chain_plan(topo, params, pr, rings, root, kind == CollectiveKind::kReduce, bytes,
                          gpus);
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
      // Every rank sends S/p to every other rank at once over NCCL point-to-point channels; with
      // a traffic matrix (docs/cost-model.md, "Weighted all-to-all") member a sends S x
      // shares[a p + c] to member c, the pairs without traffic left out.
      const bool weighted = a2a_shares && !a2a_shares->empty();
      CSIM_ASSERT_MSG(!weighted || a2a_shares->size() == static_cast<std::size_t>(p) * p,
                      "an all-to-all's traffic matrix is p x p");
      Builder b{topo, params, {}, 0};
      double worst = 0;
      for (int i = 0; i < p; ++i)
        for (int j = 0; j < p; ++j) {
          const int a = gpus[i], c = gpus[j];
          const double share =
              weighted ? (*a2a_shares)[static_cast<std::size_t>(i) * p + j] : 1.0 / n;
          if (a == c || share <= 0) continue;
          worst = std::max(worst, b.alpha(a, c));
          // NCCL's point-to-point channels cap its flows (p2p_bandwidth_fraction); DeepEP's own
          // kernels reach about the links' rate (its README: 153 of H800's ~160 GB/s NVLink, 43
          // to 47 of a CX7 NIC's ~50 GB/s RDMA), so a weighted exchange is not capped.
          b.flow(a, c, bytes * share, weighted ? 0.0 : b.p2p_cap(a, c));
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
