// Topology construction, routes and ring search (docs/cost-model.md, "Topology").
//
// Index: [SECTION] Link kinds and PCIe rates, [SECTION] Construction, [SECTION] Routes,
//        [SECTION] Ring order
#include "core/hardware/topology.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "core/hardware/nic_stack.hpp"

namespace csim::core {

double host_staging_link_bytes_per_s(double bridge_bytes_per_s) {
  CSIM_ASSERT(bridge_bytes_per_s > 0);
  return bridge_bytes_per_s / 2;
}

// [SECTION] Link kinds and PCIe rates ------------------------------------------------------------

const char* to_string(LinkKind k) {
  switch (k) {
    case LinkKind::kPcie:
      return "pcie";
    case LinkKind::kHostBridge:
      return "host_bridge";
    case LinkKind::kNvlink:
      return "nvlink";
    case LinkKind::kNvswitch:
      return "nvswitch";
    case LinkKind::kNic:
      return "nic";
    case LinkKind::kFabric:
      return "fabric";
  }
  return "?";
}

// docs/cost-model.md, "Topology": usable bytes/s per direction of an x16 link, gen3 12 GB/s,
// doubling per generation (gen4 24, gen5 48); proportional to the lane count.
double pcie_usable_bytes_per_s(int gen, int lanes) {
  CSIM_ASSERT_MSG(gen >= 1 && gen <= 6, "PCIe generation out of range (the parser accepts 3..5)");
  CSIM_ASSERT_MSG(lanes >= 1 && lanes <= 32, "PCIe lanes out of range");
  const double x16_gen3 = 12e9;
  return x16_gen3 * std::ldexp(1.0, gen - 3) * (static_cast<double>(lanes) / 16.0);
}

const std::vector<LinkId> Topology::kEmptyRoute;

// [SECTION] Construction -------------------------------------------------------------------------

Topology::Topology(const ClusterSpec& cluster) : Topology(cluster, LinkParams{}) {}

Topology::Topology(const ClusterSpec& cluster, const LinkParams& params)
    : nodes_(cluster.nodes),
      gpus_per_node_(cluster.gpus_per_node),
      gpu_(cluster.gpu),
      params_(params),
      intra_kind_(cluster.intra.kind),
      nics_per_node_(cluster.nics_per_node),
      nic_line_rate_(cluster.nic_bytes_per_s),
      fabric_(cluster.fabric) {
  CSIM_ASSERT(nodes_ >= 1 && gpus_per_node_ >= 1);
  // The NIC hop's latency and line-rate fraction come from the cluster (cluster.nic: its
  // latency_us and efficiency, else its stack's catalogue figures, core/hardware/nic_stack.cpp); a
  // ClusterSpec built in code without them keeps the LinkParams figures (the InfiniBand fits).
  if (cluster.nic.latency_ns > 0 || cluster.nic.stack != NicStack::kInfiniband)
    params_.nic_alpha_ns = nic_latency_ns(cluster.nic);
  if (cluster.nic.efficiency > 0 || cluster.nic.stack != NicStack::kInfiniband)
    params_.nic_efficiency = nic_efficiency(cluster.nic);
  // P2P disabled: no GPU reaches another over NVLink / NVSwitch / PCIe P2P; every intra-node hop
  // is staged through host memory (docs/cost-model.md, "Host staging"), so NCCL sees a PCIe node.
  p2p_ = cluster.p2p;
  if (!p2p_) intra_kind_ = IntraNodeKind::kPcie;
  build(cluster);
}

LinkId Topology::add_link(std::string name, LinkKind kind, double line_rate_bytes_per_s, int node) {
  CSIM_ASSERT_MSG(line_rate_bytes_per_s > 0, "a link needs a positive rate");
  double efficiency = 1.0, alpha_ns = 0;
  switch (kind) {
    case LinkKind::kPcie:
      efficiency = params_.pcie_efficiency;
      alpha_ns = params_.pcie_alpha_ns;
      break;
    case LinkKind::kHostBridge:
      efficiency = params_.pcie_efficiency;
      alpha_ns = params_.host_bridge_alpha_ns;
      break;
    case LinkKind::kNvlink:
      efficiency = params_.nvlink_efficiency;
      alpha_ns = params_.nvlink_alpha_ns;
      break;
    case LinkKind::kNvswitch:
      efficiency = params_.nvswitch_efficiency;
      alpha_ns = params_.nvswitch_alpha_ns;
      break;
    case LinkKind::kNic:
      efficiency = params_.nic_efficiency;
      alpha_ns = params_.nic_alpha_ns;
      break;
    case LinkKind::kFabric:
      efficiency = params_.fabric_efficiency;
      alpha_ns = params_.fabric_alpha_ns;
      break;
  }
  Link l;
  l.id = static_cast<LinkId>(links_.size());
  l.name = std::move(name);
  l.capacity_bytes_per_s = line_rate_bytes_per_s * efficiency;
  l.alpha_ns = alpha_ns;
  l.kind = kind;
  l.line_rate_bytes_per_s = line_rate_bytes_per_s;
  l.node = node;
  links_.push_back(std::move(l));
  return links_.back().id;
}

void Topology::build(const ClusterSpec& c) {
  const int g = gpus_per_node_;
  const IntraNodeSpec& in = c.intra;
  CSIM_ASSERT_MSG(nodes_ == 1 || (nics_per_node_ >= 1 && c.nic_bytes_per_s > 0),
                  "a multi-node cluster needs NICs (the parser checks this)");
  const double pcie_rate = pcie_usable_bytes_per_s(in.pcie_gen, in.pcie_lanes);
  const double bridge_rate = in.host_bridge_bytes_per_s > 0
                                 ? in.host_bridge_bytes_per_s
                                 : pcie_usable_bytes_per_s(in.pcie_gen, 16);
  const int world = nodes_ * g;
  pcie_up_.assign(world, -1);
  pcie_down_.assign(world, -1);
  std::vector<LinkId> nvs_up(world, -1), nvs_down(world, -1);
  bridge_up_.assign(nodes_, -1);
  bridge_down_.assign(nodes_, -1);
  nic_up_.assign(static_cast<std::size_t>(nodes_) * nics_per_node_, -1);
  nic_down_.assign(nic_up_.size(), -1);

  // Bonded NVLink count per ordered local pair (kNvlinkMesh); the same for every node.
  std::vector<int> nvlinks(static_cast<std::size_t>(g) * g, 0);
  if (in.kind == IntraNodeKind::kNvlinkMesh) {
    CSIM_ASSERT_MSG(in.nvlink_bytes_per_s_per_link > 0, "NVLink mesh without a link rate");
    for (const NvlinkPair& p : in.nvlink_pairs) {
      CSIM_ASSERT_MSG(p.a >= 0 && p.a < g && p.b >= 0 && p.b < g && p.a != p.b && p.links >= 1,
                      "invalid NVLink pair (the parser checks this)");
      nvlinks[p.a * g + p.b] += p.links;
      nvlinks[p.b * g + p.a] += p.links;
    }
  }
  if (in.kind == IntraNodeKind::kNvswitch)
    CSIM_ASSERT_MSG(in.nvswitch_bytes_per_s > 0, "NVSwitch without a port rate");

  nvlink_units_ = nvlinks;
  std::vector<LinkId> nv(static_cast<std::size_t>(g) * g, -1);
  const int ne = g + 1;  // local endpoints: g GPUs and the host
  routes_.assign(static_cast<std::size_t>(nodes_) * ne * ne, {});
  for (int n = 0; n < nodes_; ++n) {
    const std::string pre = "node" + std::to_string(n) + "/";
    bridge_up_[n] = add_link(pre + "bridge.up", LinkKind::kHostBridge, bridge_rate, n);
    bridge_down_[n] = add_link(pre + "bridge.down", LinkKind::kHostBridge, bridge_rate, n);
    for (int l = 0; l < g; ++l) {
      const int gid = n * g + l;
      const std::string gp = pre + "gpu" + std::to_string(l);
      pcie_up_[gid] = add_link(gp + ".pcie.up", LinkKind::kPcie, pcie_rate, n);
      pcie_down_[gid] = add_link(gp + ".pcie.down", LinkKind::kPcie, pcie_rate, n);
      if (in.kind == IntraNodeKind::kNvswitch) {
        nvs_up[gid] =
            add_link(gp + ".nvswitch.up", LinkKind::kNvswitch, in.nvswitch_bytes_per_s, n);
        nvs_down[gid] =
            add_link(gp + ".nvswitch.down", LinkKind::kNvswitch, in.nvswitch_bytes_per_s, n);
      }
    }
    for (int a = 0; a < g; ++a)
      for (int b = 0; b < g; ++b)
        nv[a * g + b] =
            nvlinks[a * g + b] == 0
                ? -1
                : add_link(pre + "nvlink " + std::to_string(a) + "->" + std::to_string(b),
                           LinkKind::kNvlink, nvlinks[a * g + b] * in.nvlink_bytes_per_s_per_link,
                           n);
    // Host staging (docs/cost-model.md, "Host staging"): one link per node that every staged byte
    // crosses once, standing for its two crossings of the host bridge (written in, read out),
    // which share the bridge's bandwidth: capacity = bridge / 2, no latency of its own.
    if (!p2p_) {
      staging_.push_back(add_link(pre + "host.staging", LinkKind::kHostBridge,
                                  host_staging_link_bytes_per_s(bridge_rate), n));
      links_[staging_.back()].alpha_ns = 0;
    }
    for (int k = 0; k < nics_per_node_; ++k) {
      const std::string np = pre + "nic" + std::to_string(k);
      nic_up_[n * nics_per_node_ + k] = add_link(np + ".up", LinkKind::kNic, c.nic_bytes_per_s, n);
      nic_down_[n * nics_per_node_ + k] =
          add_link(np + ".down", LinkKind::kNic, c.nic_bytes_per_s, n);
    }
    // Degraded links (docs/cost-model.md, "Stragglers"): capacity x factor, both directions.
    for (const LinkDegradation& d : c.degraded_links) {
      if (d.node != n) continue;
      std::vector<LinkId> hit;
      if (d.nic >= 0) {
        hit = {nic_up_[n * nics_per_node_ + d.nic], nic_down_[n * nics_per_node_ + d.nic]};
      } else {
        const int gid = n * g + d.gpu;
        hit = {pcie_up_[gid], pcie_down_[gid], nvs_up[gid], nvs_down[gid]};
        for (int o = 0; o < g; ++o) {
          hit.push_back(nv[d.gpu * g + o]);
          hit.push_back(nv[o * g + d.gpu]);
        }
      }
      for (LinkId l : hit) {
        if (l >= 0) links_[l].capacity_bytes_per_s *= d.factor;
      }
    }

    // Intra-node routes (docs/cost-model.md, "Topology"): host memory reaches a GPU through the
    // host bridge and the GPU's PCIe link; GPU<->GPU goes over NVSwitch (up + down), a direct
    // NVLink, or else up through PCIe, across the host bridge both ways, and down.
    for (int s = 0; s < ne; ++s) {
      for (int d = 0; d < ne; ++d) {
        if (s == d) continue;
        std::vector<LinkId>& r = routes_[(static_cast<std::size_t>(n) * ne + s) * ne + d];
        const int sg = n * g + s, dg = n * g + d;
        if (s == g) {
          r = {bridge_down_[n], pcie_down_[dg]};
        } else if (d == g) {
          r = {pcie_up_[sg], bridge_up_[n]};
        } else if (!p2p_) {
          // Staged: copy into host memory (PCIe up, bridge up), then out of it (bridge down,
          // PCIe down), the host.staging link sharing the bridge between the two copies.
          r = {pcie_up_[sg], bridge_up_[n], staging_[n], bridge_down_[n], pcie_down_[dg]};
        } else if (in.kind == IntraNodeKind::kNvswitch) {
          r = {nvs_up[sg], nvs_down[dg]};
        } else if (nv[s * g + d] >= 0) {
          r = {nv[s * g + d]};
        } else {
          r = {pcie_up_[sg], bridge_up_[n], bridge_down_[n], pcie_down_[dg]};
        }
      }
    }
  }

  // Fat tree: each leaf's uplink to and downlink from the spine carry (NIC ports below x NIC rate)
  // / oversubscription (docs/cost-model.md, "Fabric").
  if (fabric_.nodes_per_leaf > 0 && nics_per_node_ > 0 && nodes_ > 1) {
    const int per = fabric_.nodes_per_leaf;
    const int groups = (nodes_ + per - 1) / per;
    const int rails = fabric_.rail_optimized ? nics_per_node_ : 1;
    leaf_up_.assign(static_cast<std::size_t>(groups) * rails, -1);
    leaf_down_.assign(leaf_up_.size(), -1);
    for (int grp = 0; grp < groups; ++grp) {
      const int nodes_below = std::min(per, nodes_ - grp * per);
      const int ports = nodes_below * (fabric_.rail_optimized ? 1 : nics_per_node_);
      const double rate = ports * c.nic_bytes_per_s / fabric_.oversubscription;
      for (int rail = 0; rail < rails; ++rail) {
        const std::string name = "leaf" + std::to_string(grp) +
                                 (fabric_.rail_optimized ? ".rail" + std::to_string(rail) : "");
        const std::size_t i = static_cast<std::size_t>(grp) * rails + rail;
        leaf_up_[i] = add_link(name + ".up", LinkKind::kFabric, rate, grp * per);
        leaf_down_[i] = add_link(name + ".down", LinkKind::kFabric, rate, grp * per);
      }
    }
  }
}

// [SECTION] Routes -------------------------------------------------------------------------------

// Fat tree (docs/cost-model.md, "Fabric"): leaf switches of nodes_per_leaf nodes; rail-optimised,
// NIC k of those nodes has its own leaf (rail k), else all their NICs share one.
int Topology::leaf_of(int node, int nic) const {
  if (fabric_.nodes_per_leaf <= 0 || nics_per_node_ == 0) return -1;
  const int group = node / fabric_.nodes_per_leaf;
  return fabric_.rail_optimized ? group * nics_per_node_ + nic : group;
}

int Topology::endpoint_index(Endpoint e) const {
  if (e.kind == Endpoint::Kind::kGpu) {
    CSIM_ASSERT_MSG(e.index >= 0 && e.index < gpus(), "GPU index out of range");
    return e.index;
  }
  CSIM_ASSERT_MSG(e.index >= 0 && e.index < nodes_, "node index out of range");
  return gpus() + e.index;
}

// Inter-node routes (docs/cost-model.md, "Topology"): GPU i of a node uses NIC (i mod nics) and
// reaches it over its own PCIe link (GPUDirect RDMA through the PCIe switch, not the host bridge);
// the fabric between NICs is non-blocking. Host memory uses NIC 0.
std::vector<LinkId> Topology::build_inter_route(Endpoint src, Endpoint dst) const {
  std::vector<LinkId> r;
  const bool sgpu = src.kind == Endpoint::Kind::kGpu, dgpu = dst.kind == Endpoint::Kind::kGpu;
  const int snode = sgpu ? node_of(src.index) : src.index;
  const int dnode = dgpu ? node_of(dst.index) : dst.index;
  const int snic = sgpu ? (src.index % gpus_per_node_) % nics_per_node_ : 0;
  const int dnic = dgpu ? (dst.index % gpus_per_node_) % nics_per_node_ : 0;
  if (sgpu) r.push_back(pcie_up_[src.index]);
  r.push_back(nic_up_[snode * nics_per_node_ + snic]);
  const int sleaf = leaf_of(snode, snic), dleaf = leaf_of(dnode, dnic);
  if (sleaf != dleaf) {  // through the spine: the source leaf's uplink, the destination's downlink
    r.push_back(leaf_up_[sleaf]);
    r.push_back(leaf_down_[dleaf]);
  }
  r.push_back(nic_down_[dnode * nics_per_node_ + dnic]);
  if (dgpu) r.push_back(pcie_down_[dst.index]);
  return r;
}

const std::vector<LinkId>& Topology::route(Endpoint src, Endpoint dst) const {
  const int si = endpoint_index(src), di = endpoint_index(dst);
  if (si == di) return kEmptyRoute;
  const int g = gpus_per_node_;
  const int snode = src.kind == Endpoint::Kind::kGpu ? node_of(src.index) : src.index;
  const int dnode = dst.kind == Endpoint::Kind::kGpu ? node_of(dst.index) : dst.index;
  if (snode == dnode) {
    const int ne = g + 1;
    const int ls = src.kind == Endpoint::Kind::kGpu ? src.index % g : g;
    const int ld = dst.kind == Endpoint::Kind::kGpu ? dst.index % g : g;
    return routes_[(static_cast<std::size_t>(snode) * ne + ls) * ne + ld];
  }
  auto key = std::make_pair(si, di);
  // std::map never moves its nodes: the reference stays valid after the lock is released.
  const std::lock_guard<std::mutex> lock(inter_routes_mutex_);
  auto it = inter_routes_.find(key);
  if (it == inter_routes_.end()) it = inter_routes_.emplace(key, build_inter_route(src, dst)).first;
  return it->second;
}

double Topology::route_alpha_ns(Endpoint src, Endpoint dst) const {
  double a = 0;
  for (LinkId l : route(src, dst)) a += links_[l].alpha_ns;
  return a;
}

bool Topology::staged(Endpoint src, Endpoint dst) const {
  if (p2p_) return false;
  for (LinkId l : route(src, dst))
    if (std::find(staging_.begin(), staging_.end(), l) != staging_.end()) return true;
  return false;
}

double Topology::route_bandwidth(Endpoint src, Endpoint dst) const {
  double b = std::numeric_limits<double>::infinity();
  for (LinkId l : route(src, dst)) b = std::min(b, links_[l].capacity_bytes_per_s);
  return b;
}

// [SECTION] Ring order ---------------------------------------------------------------------------

namespace {

// Depth-first search for a Hamiltonian cycle through `n` vertices using only edges allowed by
// `ok(a, b)`, starting at vertex 0 and trying neighbours in index order (so the result is
// deterministic and equals the given order whenever that order is itself a valid cycle).
// `budget` bounds the expansions: the search is exponential in the worst case.
template <typename Ok>
bool hamiltonian_cycle(int n, const Ok& ok, std::vector<int>* cycle, long budget) {
  std::vector<int> path{0};
  std::vector<char> used(n, 0);
  used[0] = 1;
  std::vector<int> next(n, 0);  // next candidate to try at each depth
  next[0] = 1;
  while (!path.empty()) {
    if (--budget < 0) return false;
    const int depth = static_cast<int>(path.size());
    if (depth == n) {
      if (ok(path.back(), path.front())) {
        *cycle = path;
        return true;
      }
      used[path.back()] = 0;
      path.pop_back();
      continue;
    }
    const int at = path.back();
    int& cand = next[depth - 1];
    while (cand < n && (used[cand] || !ok(at, cand))) ++cand;
    if (cand == n) {
      if (depth == 1) return false;
      used[at] = 0;
      path.pop_back();
      continue;
    }
    const int v = cand++;
    used[v] = 1;
    path.push_back(v);
    next[depth] = 1;
  }
  return false;
}

}  // namespace

// NCCL searches rings that maximise the bandwidth of the slowest hop. We do the same: for each
// distinct hop bandwidth, highest first, look for a Hamiltonian cycle using only hops at least that
// fast; the first threshold that admits one is the max-bottleneck ring. For a DGX-1 hybrid cube
// mesh this finds an all-NVLink ring; on PCIe or NVSwitch all hops are equal and the given order is
// kept.
std::vector<int> Topology::ring_order_in_node(const std::vector<int>& gpus) const {
  const int n = static_cast<int>(gpus.size());
  constexpr int kMaxSearchGpus = 16;
  if (n <= 3 || n > kMaxSearchGpus) return gpus;  // every order of <= 3 is the same ring
  std::vector<double> w(static_cast<std::size_t>(n) * n, 0);
  std::vector<double> levels;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) {
        w[a * n + b] = route_bandwidth(Endpoint::gpu(gpus[a]), Endpoint::gpu(gpus[b]));
        levels.push_back(w[a * n + b]);
      }
  std::sort(levels.begin(), levels.end(), std::greater<double>());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  for (double t : levels) {
    std::vector<int> cyc;
    auto ok = [&](int a, int b) { return w[a * n + b] >= t; };
    if (hamiltonian_cycle(n, ok, &cyc, 200000)) {
      std::vector<int> out;
      out.reserve(n);
      for (int v : cyc) out.push_back(gpus[v]);
      return out;
    }
  }
  return gpus;
}

// Multi-node: each node's GPUs stay contiguous (nodes in order of first appearance), so the ring
// crosses the network once per node boundary, as NCCL's rings do.
std::vector<int> Topology::ring_order(const std::vector<int>& gpus) const {
  std::vector<int> node_order;
  std::vector<std::vector<int>> by_node(nodes_);
  for (int g : gpus) {
    const int n = node_of(g);
    if (by_node[n].empty()) node_order.push_back(n);
    by_node[n].push_back(g);
  }
  std::vector<int> out;
  out.reserve(gpus.size());
  for (int n : node_order) {
    std::vector<int> part = ring_order_in_node(by_node[n]);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// NCCL spreads its channels over every NVLink of a mesh; one ring would use only one link per GPU
// pair. Greedy: take the max-bottleneck ring if it is all-NVLink, subtract one NVLink unit per
// directed edge, try its reverse, then search (same DFS) for another directed Hamiltonian cycle
// over the units left, until none is found. On a DGX-1 (6 NVLinks per GPU) this yields up to 6
// rings.
std::vector<std::vector<int>> Topology::rings(const std::vector<int>& gpus) const {
  std::vector<int> first = ring_order(gpus);
  const int n = static_cast<int>(first.size());
  constexpr int kMaxRings = 16, kMaxSearchGpus = 16;
  if (!p2p_ || intra_kind_ != IntraNodeKind::kNvlinkMesh || n < 2 || n > kMaxSearchGpus)
    return {first};
  for (int g : gpus)
    if (node_of(g) != node_of(gpus[0])) return {first};
  const int gpn = gpus_per_node_;
  std::vector<int> local(n);  // local index of first[i]
  for (int i = 0; i < n; ++i) local[i] = first[i] % gpn;
  std::vector<int> units(static_cast<std::size_t>(n) * n, 0);  // by position in `first`
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b) units[a * n + b] = nvlink_units_[local[a] * gpn + local[b]];
  // positions -> a ring uses edges cyc[i] -> cyc[i+1]
  auto available = [&](const std::vector<int>& cyc) {
    for (int i = 0; i < n; ++i)
      if (units[cyc[i] * n + cyc[(i + 1) % n]] < 1) return false;
    return true;
  };
  auto take = [&](const std::vector<int>& cyc) {
    for (int i = 0; i < n; ++i) --units[cyc[i] * n + cyc[(i + 1) % n]];
  };
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i;
  if (!available(pos)) return {first};
  std::vector<std::vector<int>> found;
  auto add = [&](const std::vector<int>& cyc) {
    take(cyc);
    found.push_back(cyc);
    std::vector<int> rev(cyc.rbegin(), cyc.rend());
    if (static_cast<int>(found.size()) < kMaxRings && available(rev)) {
      take(rev);
      found.push_back(rev);
    }
  };
  add(pos);
  while (static_cast<int>(found.size()) < kMaxRings) {
    std::vector<int> cyc;
    auto ok = [&](int a, int b) { return units[a * n + b] >= 1; };
    if (!hamiltonian_cycle(n, ok, &cyc, 200000)) break;
    add(cyc);
  }
  std::vector<std::vector<int>> out;
  for (const auto& cyc : found) {
    std::vector<int> r;
    r.reserve(n);
    for (int v : cyc) r.push_back(first[v]);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace csim::core
