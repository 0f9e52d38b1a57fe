// Copy engines as links of the flow network (docs/cost-model.md, "Resource sharing", copy
// engines): each GPU has one DMA engine per direction for host copies, H2D and D2H, and the
// copies of one direction share it by max-min fairness like any link. The count: CUDA reports
// asyncEngineCount >= 2 on every GPU of the catalog, and "if the device has more than 1
// asynchronous copy engine then by default the CUDA driver assigns copy engines to different
// directions (H2D, D2H, and P2P)" (NVIDIA, forums.developer.nvidia.com/t/365145, on H100 with
// asyncEngineCount 3, whose concurrent H2D copies run on one engine); the CUDA C++ Best Practices
// Guide, "Asynchronous and Overlapping Transfers with Computation": "a GPU with two copy engines
// can simultaneously perform one asynchronous data transfer from the host to the device, one
// asynchronous data transfer from the device to the host". The rate: "copy engines are designed
// to saturate PCIe/C2C" (same NVIDIA answer), so an engine's capacity is its GPU's PCIe link.
#pragma once

#include <vector>

#include "core/hardware/topology.hpp"

namespace csim::sim {

class CopyEngines {
 public:
  // The topology's links, then two per GPU: its H2D engine and its D2H engine.
  explicit CopyEngines(const core::Topology& topo) : first_(static_cast<int>(topo.links().size())) {
    links_ = topo.links();
    for (int g = 0; g < topo.gpus(); ++g) {
      const core::Endpoint host = core::Endpoint::host(topo.node_of(g)),
                           gpu = core::Endpoint::gpu(g);
      // The last hop into the GPU and the first out of it: its PCIe link, each direction.
      add(topo, topo.route(host, gpu).back(), "gpu" + std::to_string(g) + ".copy_engine.h2d");
      add(topo, topo.route(gpu, host).front(), "gpu" + std::to_string(g) + ".copy_engine.d2h");
    }
  }
  const std::vector<core::Link>& links() const { return links_; }
  core::LinkId h2d(int gpu) const { return first_ + 2 * gpu; }
  core::LinkId d2h(int gpu) const { return first_ + 2 * gpu + 1; }

 private:
  void add(const core::Topology& topo, core::LinkId pcie, std::string name) {
    core::Link l = topo.links()[static_cast<std::size_t>(pcie)];
    l.id = static_cast<core::LinkId>(links_.size());
    l.name = std::move(name);
    l.alpha_ns = 0;  // the route's hops carry the latency
    links_.push_back(std::move(l));
  }
  int first_;
  std::vector<core::Link> links_;
};

}  // namespace csim::sim
