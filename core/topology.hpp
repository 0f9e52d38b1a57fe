// Topology: the directed links of a cluster and the routes between endpoints
// (docs/cost-model.md, "Topology"). Built from ClusterSpec; used by the cost model and the flow network.
#pragma once

#include <string>
#include <vector>

#include "core/scenario.hpp"

namespace csim::core {

using LinkId = int;

struct Link {
  LinkId id = 0;
  std::string name;              // "node0/gpu1->pcie", "nvlink 0->3", "nic0.up"
  double capacity_bytes_per_s;   // per direction (links are directed)
  double alpha_ns = 0;           // per-message latency contribution of one hop
};

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

  const std::vector<Link>& links() const { return links_; }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  int gpus() const { return nodes_ * gpus_per_node_; }

  // The directed links a transfer from src to dst crosses, in order. Empty when src == dst.
  const std::vector<LinkId>& route(Endpoint src, Endpoint dst) const;
  // Sum of the hops' alpha_ns on that route.
  double route_alpha_ns(Endpoint src, Endpoint dst) const;
  // Smallest capacity on the route (bytes/s); +inf for an empty route.
  double route_bandwidth(Endpoint src, Endpoint dst) const;

  // A ring order over `gpus` that NCCL would pick: direct links (NVLink) preferred, maximising the
  // slowest hop; deterministic.
  std::vector<int> ring_order(const std::vector<int>& gpus) const;

 private:
  int nodes_ = 1, gpus_per_node_ = 1;
  std::vector<Link> links_;
  // routes_[src_index * n_endpoints + dst_index]; endpoints indexed GPUs first, then hosts
  std::vector<std::vector<LinkId>> routes_;
  int endpoint_index(Endpoint e) const;
  void build(const ClusterSpec& c);
};

}  // namespace csim::core
