// Topology: links, routes, ring order (docs/cost-model.md, "Topology").
#include <catch2/catch.hpp>

#include <cmath>

#include "core/hardware/topology.hpp"

using namespace csim;
using namespace csim::core;

namespace {

ClusterSpec pcie_cluster(int gpus, int gen) {
  ClusterSpec c;
  c.gpus_per_node = gpus;
  c.intra.kind = IntraNodeKind::kPcie;
  c.intra.pcie_gen = gen;
  return c;
}

// DGX-1 (V100) hybrid cube mesh: 6 NVLinks per GPU, per `nvidia-smi topo -m` on a DGX-1V.
ClusterSpec dgx1() {
  ClusterSpec c;
  c.gpus_per_node = 8;
  c.intra.kind = IntraNodeKind::kNvlinkMesh;
  c.intra.nvlink_bytes_per_s_per_link = 25e9;
  c.intra.nvlink_pairs = {{0, 1, 1}, {0, 2, 1}, {0, 3, 2}, {0, 4, 2}, {1, 2, 2}, {1, 3, 1},
                          {1, 5, 2}, {2, 3, 2}, {2, 6, 1}, {3, 7, 1}, {4, 5, 1}, {4, 6, 1},
                          {4, 7, 2}, {5, 6, 2}, {5, 7, 1}, {6, 7, 2}};
  return c;
}

ClusterSpec nvswitch_nodes(int nodes, int nics) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.intra.kind = IntraNodeKind::kNvswitch;
  c.intra.pcie_gen = 4;
  c.intra.nvswitch_bytes_per_s = 300e9;
  c.nics_per_node = nics;
  c.nic_bytes_per_s = 25e9;
  return c;
}

}  // namespace

TEST_CASE("usable PCIe rates by generation and lanes", "[topology]") {
  // x16: gen3 12 GB/s, gen4 24, gen5 48; x8 halves it
  CHECK(pcie_usable_bytes_per_s(3, 16) == Approx(12e9));
  CHECK(pcie_usable_bytes_per_s(4, 16) == Approx(24e9));
  CHECK(pcie_usable_bytes_per_s(5, 16) == Approx(48e9));
  CHECK(pcie_usable_bytes_per_s(4, 8) == Approx(12e9));
}

TEST_CASE("PCIe: GPU to GPU crosses the host bridge both ways", "[topology]") {
  const Topology t(pcie_cluster(4, 3));
  // 4 GPUs x (up, down) + bridge (up, down) = 10 links
  CHECK(t.links().size() == 10);
  const auto& r = t.route(Endpoint::gpu(0), Endpoint::gpu(2));
  REQUIRE(r.size() == 4);
  CHECK(t.links()[r[0]].name == "node0/gpu0.pcie.up");
  CHECK(t.links()[r[1]].name == "node0/bridge.up");
  CHECK(t.links()[r[2]].name == "node0/bridge.down");
  CHECK(t.links()[r[3]].name == "node0/gpu2.pcie.down");
  // gen3: every hop 12 GB/s; alpha 0.5 + 0.05 + 0.05 + 0.5 = 1.1 us
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(2)) == Approx(12e9));
  CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(2)) == Approx(1100));
  // host -> GPU: bridge down + GPU down, alpha 0.55 us
  CHECK(t.route(Endpoint::host(0), Endpoint::gpu(1)).size() == 2);
  CHECK(t.route_alpha_ns(Endpoint::host(0), Endpoint::gpu(1)) == Approx(550));
  CHECK(t.route(Endpoint::gpu(1), Endpoint::gpu(1)).empty());
  CHECK(std::isinf(t.route_bandwidth(Endpoint::gpu(1), Endpoint::gpu(1))));
}

TEST_CASE("PCIe: explicit host bridge bandwidth", "[topology]") {
  ClusterSpec c = pcie_cluster(2, 4);
  c.intra.host_bridge_bytes_per_s = 10e9;
  const Topology t(c);
  // min(24 GB/s GPU link, 10 GB/s bridge) = 10 GB/s
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(1)) == Approx(10e9));
}

TEST_CASE("NVSwitch: GPU up + switch down at line rate x efficiency", "[topology]") {
  const Topology t(nvswitch_nodes(1, 0));
  const auto& r = t.route(Endpoint::gpu(3), Endpoint::gpu(5));
  REQUIRE(r.size() == 2);
  CHECK(t.links()[r[0]].kind == LinkKind::kNvswitch);
  // 300 GB/s * 0.80 = 240 GB/s; alpha 0.35 + 0.35 = 0.7 us
  CHECK(t.route_bandwidth(Endpoint::gpu(3), Endpoint::gpu(5)) == Approx(240e9));
  CHECK(t.route_alpha_ns(Endpoint::gpu(3), Endpoint::gpu(5)) == Approx(700));
  // host traffic still uses PCIe gen4: 24 GB/s
  CHECK(t.route_bandwidth(Endpoint::host(0), Endpoint::gpu(5)) == Approx(24e9));
}

TEST_CASE("NVLink mesh: direct links where present, PCIe otherwise", "[topology]") {
  ClusterSpec c = dgx1();
  const Topology t(c);
  // 0 -> 3: one link of 2 bonded NVLinks: 2 * 25 GB/s * 0.80 = 40 GB/s, alpha 0.7 us
  CHECK(t.route(Endpoint::gpu(0), Endpoint::gpu(3)).size() == 1);
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(3)) == Approx(40e9));
  CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(3)) == Approx(700));
  // 0 -> 1: a single NVLink: 20 GB/s
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(1)) == Approx(20e9));
  // 0 -> 5: no NVLink: PCIe gen3 through the host, 12 GB/s, 4 hops
  CHECK(t.route(Endpoint::gpu(0), Endpoint::gpu(5)).size() == 4);
  CHECK(t.route_bandwidth(Endpoint::gpu(0), Endpoint::gpu(5)) == Approx(12e9));
}

TEST_CASE("ring order on a DGX-1 is an all-double-NVLink Hamiltonian cycle", "[topology]") {
  const Topology t(dgx1());
  // Double-link edges: 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7 form the cycle
  // 0-3-2-1-5-6-7-4-0; the DFS tries neighbours in index order, so it finds exactly this one.
  const std::vector<int> ring = t.ring_order({0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(ring == std::vector<int>{0, 3, 2, 1, 5, 6, 7, 4});
  for (std::size_t i = 0; i < ring.size(); ++i)
    CHECK(t.route_bandwidth(Endpoint::gpu(ring[i]), Endpoint::gpu(ring[(i + 1) % ring.size()])) ==
          Approx(40e9));
}

TEST_CASE("rings on a DGX-1 use every NVLink (NCCL channels)", "[topology]") {
  const Topology t(dgx1());
  const auto rings = t.rings({0, 1, 2, 3, 4, 5, 6, 7});
  // 6 NVLink units out of and into each GPU: the double-link cycle and its reverse twice (4 rings),
  // then the single-link cycle 0-2-6-4-5-7-3-1 and its reverse: 6 directed rings.
  REQUIRE(rings.size() == 6);
  CHECK(rings[0] == std::vector<int>{0, 3, 2, 1, 5, 6, 7, 4});
  CHECK(rings[1] == std::vector<int>{4, 7, 6, 5, 1, 2, 3, 0});
  CHECK(rings[4] == std::vector<int>{0, 2, 6, 4, 5, 7, 3, 1});
  for (const auto& r : rings)
    for (std::size_t i = 0; i < r.size(); ++i)
      CHECK(t.links()[t.route(Endpoint::gpu(r[i]), Endpoint::gpu(r[(i + 1) % r.size()]))[0]].kind ==
            LinkKind::kNvlink);
  // PCIe: one ring
  CHECK(Topology(pcie_cluster(4, 3)).rings({0, 1, 2, 3}).size() == 1);
}

TEST_CASE("ring order keeps uniform topologies in the given order", "[topology]") {
  const Topology t(pcie_cluster(4, 3));
  CHECK(t.ring_order({2, 0, 3, 1}) == std::vector<int>{2, 0, 3, 1});
}

TEST_CASE("inter-node route: PCIe up, NIC up, NIC down, PCIe down", "[topology]") {
  const Topology t(nvswitch_nodes(2, 2));
  // GPU 3 (node 0, local 3) uses NIC 3 mod 2 = 1; GPU 12 (node 1, local 4) uses NIC 0
  const auto& r = t.route(Endpoint::gpu(3), Endpoint::gpu(12));
  REQUIRE(r.size() == 4);
  CHECK(t.links()[r[0]].name == "node0/gpu3.pcie.up");
  CHECK(t.links()[r[1]].name == "node0/nic1.up");
  CHECK(t.links()[r[2]].name == "node1/nic0.down");
  CHECK(t.links()[r[3]].name == "node1/gpu4.pcie.down");
  // min(24 GB/s PCIe gen4, 25 GB/s * 0.97 = 24.25 GB/s) = 24 GB/s
  CHECK(t.route_bandwidth(Endpoint::gpu(3), Endpoint::gpu(12)) == Approx(24e9));
  // alpha 0.5 + 9.3 + 9.3 + 0.5 = 19.6 us
  CHECK(t.route_alpha_ns(Endpoint::gpu(3), Endpoint::gpu(12)) == Approx(19600));
  // the same reference twice (cached)
  CHECK(&t.route(Endpoint::gpu(3), Endpoint::gpu(12)) == &r);
}

TEST_CASE("multi-node ring order keeps each node contiguous", "[topology]") {
  const Topology t(nvswitch_nodes(2, 8));
  // nodes in order of first appearance: node 1 (GPU 8) first
  CHECK(t.ring_order({8, 0, 9, 1}) == std::vector<int>{8, 9, 0, 1});
}

TEST_CASE("fat tree: same leaf direct, other leaves through the spine at ports x rate / ratio",
          "[topology][fabric]") {
  // 4 nodes x 2 NICs, 2 nodes per leaf, 4:1 oversubscription.
  ClusterSpec c = nvswitch_nodes(4, 2);
  c.fabric.nodes_per_leaf = 2;
  c.fabric.oversubscription = 4;
  SECTION("rail-optimised: one leaf per (node pair, rail)") {
    const Topology t(c);
    // GPU 0 (node 0, NIC 0) -> GPU 8 (node 1, NIC 0): same pair, same rail: no spine hop.
    CHECK(t.route(Endpoint::gpu(0), Endpoint::gpu(8)).size() == 4);
    // GPU 0 -> GPU 16 (node 2, NIC 0): leaf0.rail0 up, leaf1.rail0 down.
    const auto& r = t.route(Endpoint::gpu(0), Endpoint::gpu(16));
    REQUIRE(r.size() == 6);
    CHECK(t.links()[r[2]].name == "leaf0.rail0.up");
    CHECK(t.links()[r[3]].name == "leaf1.rail0.down");
    // A rail leaf has 2 ports below (one NIC of each node): 2 x 25 GB/s / 4 = 12.5 GB/s line
    // rate, x 0.97 efficiency.
    CHECK(t.links()[r[2]].capacity_bytes_per_s == Approx(12.5e9 * 0.97));
    // alpha: 0.5 + 9.3 + 0.15 + 0.15 + 9.3 + 0.5 us
    CHECK(t.route_alpha_ns(Endpoint::gpu(0), Endpoint::gpu(16)) == Approx(19900));
    // GPU 1 (NIC 1) -> GPU 8 (NIC 0) in the same node pair: different rails, via the spine.
    CHECK(t.route(Endpoint::gpu(1), Endpoint::gpu(8)).size() == 6);
  }
  SECTION("not rail-optimised: one leaf per node pair for all its NICs") {
    c.fabric.rail_optimized = false;
    const Topology t(c);
    CHECK(t.route(Endpoint::gpu(1), Endpoint::gpu(8)).size() == 4);  // same leaf
    const auto& r = t.route(Endpoint::gpu(0), Endpoint::gpu(16));
    REQUIRE(r.size() == 6);
    CHECK(t.links()[r[2]].name == "leaf0.up");
    // 4 ports below (2 nodes x 2 NICs): 4 x 25 / 4 = 25 GB/s line rate.
    CHECK(t.links()[r[2]].capacity_bytes_per_s == Approx(25e9 * 0.97));
  }
}

TEST_CASE("degraded links: a NIC or a GPU's ports at a fraction of their capacity",
          "[topology][heterogeneity]") {
  ClusterSpec c = nvswitch_nodes(2, 2);
  c.degraded_links = {{1, 0, -1, 0.5}, {0, -1, 3, 0.25}};
  const Topology t(c);
  for (const Link& l : t.links()) {
    CAPTURE(l.name);
    double factor = 1;
    if (l.name.rfind("node1/nic0.", 0) == 0) factor = 0.5;
    if (l.name.rfind("node0/gpu3.", 0) == 0) factor = 0.25;
    const double eff = l.kind == LinkKind::kNic ? 0.97 : l.kind == LinkKind::kNvswitch ? 0.80 : 1.0;
    CHECK(l.capacity_bytes_per_s == Approx(l.line_rate_bytes_per_s * eff * factor));
  }
}
