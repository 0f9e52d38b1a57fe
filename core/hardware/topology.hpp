// Topology: the directed links of a cluster and the routes between endpoints
// (docs/cost-model.md, "Topology"). Built from ClusterSpec; used by the cost model and the flow
// network.
//
// Links are directed: a full-duplex PCIe, NVLink or InfiniBand port is two links, one per
// direction, so traffic in one direction never slows traffic in the other. A link's capacity is its
// line rate times an achieved-efficiency factor for its kind (LinkParams), fitted to published NCCL
// measurements; the case ids are recorded next to each constant.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/scenario/scenario.hpp"

namespace csim::core {

// Capacity of a node's host.staging link (docs/cost-model.md, "Host staging"; the plans' fills
// are core/cost/host_staging.hpp's): every staged byte crosses the host bridge twice (into host
// memory, out of it) and the two crossings share its bandwidth: bridge / 2.
double host_staging_link_bytes_per_s(double bridge_bytes_per_s);

using LinkId = int;

enum class LinkKind { kPcie, kHostBridge, kNvlink, kNvswitch, kNic, kFabric };
const char* to_string(LinkKind k);

struct Link {
  LinkId id = 0;
  std::string name;                  // "node0/gpu1.pcie.up", "node0/nvlink 0->3", "node1/nic0.down"
  double capacity_bytes_per_s = 0;   // per direction (links are directed): line rate * efficiency
  double alpha_ns = 0;               // per-message latency contribution of one hop
  LinkKind kind = LinkKind::kPcie;   // what the link is (selects efficiency and alpha)
  double line_rate_bytes_per_s = 0;  // datasheet / usable rate before the efficiency factor
  int node = 0;                      // node the link belongs to
};

// Per-link-kind constants (docs/cost-model.md, "Topology" and "Calibration").
struct LinkParams {
  // Achieved fraction of line rate for NCCL-style traffic.
  //  NVLink / NVSwitch 0.80: ~20 of 25 GB/s per link with 128-byte SM payloads (sjeaugey in
  //  nccl_a100x8_allreduce_peak); predicts 240 vs 230 GB/s (A100, +4.3%) and 360 vs 370 GB/s
  //  (H100, nccl_h100x8_ring, -2.7%).
  double nvlink_efficiency = 0.80;    // direct NVLink (kNvlinkMesh)
  double nvswitch_efficiency = 0.80;  // GPU <-> NVSwitch ports
  double nic_efficiency = 0.97;       // 48.5 of 50 GB/s per CX-7 NDR NIC (nccl_ndr_nic_peak)
  double pcie_efficiency = 1.0;       // the PCIe rates below are already usable rates
  // Per-hop latency. A GPU<->GPU PCIe route (up + bridge up + bridge down + down) adds 1.1 us,
  // so a 2-rank 8-byte all-reduce is 4.0 + 2 * 1.1 = 6.2 us (nccl_2x4070tis_pcie_latency: 6.21).
  double pcie_alpha_ns = 500;        // GPU's PCIe link, per direction
  double host_bridge_alpha_ns = 50;  // root complex crossing
  double nvlink_alpha_ns = 700;      // one direct NVLink hop
  double nvswitch_alpha_ns = 350;    // GPU -> switch or switch -> GPU (GPU<->GPU: 0.7 us)
  // NIC hop: includes NCCL's proxy hand-off, RDMA write and completion polling; fitted so that an
  // 8-byte all-reduce over 2 x 8 GPUs takes 47.5 us (nccl_2x8h20_ib_latency).
  double nic_alpha_ns = 9300;
  // Fat-tree leaf <-> spine hop (cluster.fabric): one switch traversal, ~130 ns port to port on an
  // NDR InfiniBand switch (NVIDIA QM9700 datasheet: "130ns" switch latency), rounded to 150 ns.
  double fabric_alpha_ns = 150;
  double fabric_efficiency = 0.97;  // as the NICs feeding it (nccl_ndr_nic_peak)
  bool operator==(const LinkParams&) const = default;
};

// Usable PCIe bandwidth per direction of an x16 link: gen3 12 GB/s, gen4 24 GB/s, gen5 48 GB/s
// (line rates 15.75 / 31.5 / 63 GB/s minus TLP headers and flow control; typical cudaMemcpy pinned
// figures). Scales linearly with lanes. docs/cost-model.md, "Topology".
double pcie_usable_bytes_per_s(int gen, int lanes);

// An endpoint is a GPU (global index) or the host memory of a node.
struct Endpoint {
  enum class Kind { kGpu, kHost } kind = Kind::kGpu;
  int index = 0;  // GPU global index, or node index for kHost
  static Endpoint gpu(int g) { return {Kind::kGpu, g}; }
  static Endpoint host(int node) { return {Kind::kHost, node}; }
};

class Topology {
 public:
  explicit Topology(const ClusterSpec& cluster);
  Topology(const ClusterSpec& cluster, const LinkParams& params);

  const std::vector<Link>& links() const { return links_; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  int gpus() const { return nodes_ * gpus_per_node_; }
  int nodes() const { return nodes_; }
  int gpus_per_node() const { return gpus_per_node_; }
  const GpuSpec& gpu_spec() const { return gpu_; }
  const LinkParams& link_params() const { return params_; }
  IntraNodeKind intra_kind() const { return intra_kind_; }
  // false: GPU peer-to-peer is disabled (cluster.p2p); intra-node GPU -> GPU routes are staged
  // through host memory (docs/cost-model.md, "Host staging").
  bool p2p() const { return p2p_; }
  // Whether the route src -> dst is staged through host memory (crosses a host.staging link).
  bool staged(Endpoint src, Endpoint dst) const;
  int nics_per_node() const { return nics_per_node_; }
  double nic_line_rate_bytes_per_s() const { return nic_line_rate_; }  // per NIC, per direction
  const FabricSpec& fabric() const { return fabric_; }

  // The directed links a transfer from src to dst crosses, in order. Empty when src == dst.
  // Intra-node routes are precomputed; inter-node routes are built on first use and cached under
  // a mutex, so that one Topology may serve several threads (core/hardware/topology_cache.hpp). A
  // route's address never changes.
  const std::vector<LinkId>& route(Endpoint src, Endpoint dst) const;
  // Sum of the hops' alpha_ns on that route.
  double route_alpha_ns(Endpoint src, Endpoint dst) const;
  // Smallest capacity on the route (bytes/s); +inf for an empty route.
  double route_bandwidth(Endpoint src, Endpoint dst) const;

  // A ring order over `gpus` that NCCL would pick: direct links (NVLink) preferred, maximising the
  // slowest hop; deterministic.
  std::vector<int> ring_order(const std::vector<int>& gpus) const;

  // The rings NCCL would run at once (its channels): ring_order(gpus) first, then, on an NVLink
  // mesh within one node, further directed rings over the NVLink units not yet used (the reverse of
  // each ring first), so that all of a DGX-1's NVLinks carry traffic. One ring elsewhere.
  std::vector<std::vector<int>> rings(const std::vector<int>& gpus) const;

 private:
  int nodes_ = 1, gpus_per_node_ = 1;
  std::vector<Link> links_;
  // Intra-node routes only: routes_[node * (g + 1)^2 + ls * (g + 1) + ld] with local endpoint
  // indices 0..g-1 for the node's GPUs and g for its host (g = gpus_per_node).
  std::vector<std::vector<LinkId>> routes_;
  int endpoint_index(Endpoint e) const;  // GPUs first, then hosts
  void build(const ClusterSpec& c);

  GpuSpec gpu_;
  LinkParams params_;
  IntraNodeKind intra_kind_ = IntraNodeKind::kPcie;
  bool p2p_ = true;
  std::vector<LinkId> staging_;  // host.staging by node (P2P disabled only)
  int nics_per_node_ = 0;
  double nic_line_rate_ = 0;  // ClusterSpec::nic_bytes_per_s (NCCL's channel search reads it)
  std::vector<LinkId> pcie_up_, pcie_down_;      // by global GPU
  std::vector<LinkId> nic_up_, nic_down_;        // by node * nics_per_node + nic
  std::vector<LinkId> bridge_up_, bridge_down_;  // by node
  std::vector<LinkId> leaf_up_, leaf_down_;      // fat tree: by leaf switch (leaf_of)
  FabricSpec fabric_;
  int leaf_of(int node, int nic) const;  // -1: one non-blocking switch
  std::vector<int> nvlink_units_;        // bonded NVLinks by local pair a * g + b
  mutable std::map<std::pair<int, int>, std::vector<LinkId>> inter_routes_;  // by endpoint indices
  mutable std::mutex inter_routes_mutex_;
  static const std::vector<LinkId> kEmptyRoute;

  LinkId add_link(std::string name, LinkKind kind, double line_rate_bytes_per_s, int node);
  std::vector<LinkId> build_inter_route(Endpoint src, Endpoint dst) const;
  std::vector<int> ring_order_in_node(const std::vector<int>& gpus) const;
};

}  // namespace csim::core
